#include "profiler/embedding_bag_layout.hpp"
#include "profiler/kernels/embedding_bag.hpp"

namespace perfcast::profiler::kernels {

EmbeddingBagDeviceBatch make_device_batch(const EmbeddingBagLayout& layout, WeightPrecision precision,
                                          PoolingMode pooling, std::int64_t num_indices) {
  EmbeddingBagDeviceBatch batch;
  batch.num_tables = static_cast<std::int32_t>(layout.num_tables());
  batch.batch_size = static_cast<std::int32_t>(layout.batch_size);
  batch.total_dim = layout.total_dim;
  batch.max_dim = layout.max_dim;
  batch.total_rows = layout.total_rows;
  batch.num_indices = num_indices;
  batch.precision = precision;
  batch.pooling = pooling;
  return batch;
}

}  // namespace perfcast::profiler::kernels

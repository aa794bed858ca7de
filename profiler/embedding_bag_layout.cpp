#include "profiler/embedding_bag_layout.hpp"

#include <limits>
#include <stdexcept>
#include <string>

#include "profiler/embedding_bag_types.hpp"

namespace perfcast::profiler {

EmbeddingBagLayout make_embedding_bag_layout(std::span<const TableShape> shapes, std::int64_t batch_size) {
  if (shapes.empty()) {
    throw std::invalid_argument("embedding-bag layout: at least one table is required");
  }
  if (batch_size < 1) {
    throw std::invalid_argument("embedding-bag layout: batch_size must be >= 1, got " + std::to_string(batch_size));
  }
  EmbeddingBagLayout layout;
  layout.batch_size = batch_size;
  layout.tables.reserve(shapes.size());
  constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
  std::int64_t total_dim = 0;
  for (std::size_t t = 0; t < shapes.size(); ++t) {
    const TableShape& s = shapes[t];
    const std::string name = "embedding-bag layout: table " + std::to_string(t);
    if (s.rows < 1) {
      throw std::invalid_argument(name + ": rows must be >= 1, got " + std::to_string(s.rows));
    }
    if (s.dim < 1 || s.dim > kMaxEmbeddingDim) {
      throw std::invalid_argument(name + ": dim must be in 1.." + std::to_string(kMaxEmbeddingDim) + ", got " +
                                  std::to_string(s.dim));
    }
    if (s.rows > (kInt64Max - layout.total_weight_elements) / s.dim || s.rows > kInt64Max - layout.total_rows) {
      throw std::invalid_argument(name + ": total table size overflows int64");
    }
    EmbeddingTableMeta meta;
    meta.rows = s.rows;
    meta.dim = s.dim;
    meta.row_offset = layout.total_rows;
    meta.weight_offset = layout.total_weight_elements;
    meta.output_offset = static_cast<std::int32_t>(total_dim);
    layout.tables.push_back(meta);
    layout.total_rows += s.rows;
    layout.total_weight_elements += s.rows * s.dim;
    total_dim += s.dim;
    if (s.dim > layout.max_dim) layout.max_dim = s.dim;
  }
  if (total_dim > std::numeric_limits<std::int32_t>::max()) {
    throw std::invalid_argument("embedding-bag layout: sum of dims overflows int32");
  }
  layout.total_dim = static_cast<std::int32_t>(total_dim);
  if (batch_size > kInt64Max / total_dim ||
      batch_size > std::numeric_limits<std::int32_t>::max() / static_cast<std::int64_t>(shapes.size())) {
    throw std::invalid_argument("embedding-bag layout: batch_size too large (T*B must fit int32)");
  }
  return layout;
}

void validate_embedding_bag_batch(const EmbeddingBagLayout& layout, std::span<const std::int64_t> indices,
                                  std::span<const std::int64_t> offsets) {
  const std::int64_t num_bags = layout.num_bags();
  if (static_cast<std::int64_t>(offsets.size()) != num_bags + 1) {
    throw std::invalid_argument("embedding-bag batch: offsets must have T*B+1 = " + std::to_string(num_bags + 1) +
                                " elements, got " + std::to_string(offsets.size()));
  }
  if (offsets[0] != 0) {
    throw std::invalid_argument("embedding-bag batch: offsets[0] must be 0, got " + std::to_string(offsets[0]));
  }
  for (std::int64_t i = 0; i < num_bags; ++i) {
    if (offsets[i + 1] < offsets[i]) {
      throw std::invalid_argument("embedding-bag batch: offsets decrease at position " + std::to_string(i + 1));
    }
  }
  if (offsets[num_bags] != static_cast<std::int64_t>(indices.size())) {
    throw std::invalid_argument("embedding-bag batch: offsets[T*B] = " + std::to_string(offsets[num_bags]) +
                                " but there are " + std::to_string(indices.size()) + " indices");
  }
  if (indices.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw std::invalid_argument("embedding-bag batch: more than 2^31-1 indices");
  }
  for (std::int64_t t = 0; t < layout.num_tables(); ++t) {
    const std::int64_t rows = layout.tables[static_cast<std::size_t>(t)].rows;
    const std::int64_t begin = offsets[t * layout.batch_size];
    const std::int64_t end = offsets[(t + 1) * layout.batch_size];
    for (std::int64_t p = begin; p < end; ++p) {
      const std::int64_t idx = indices[static_cast<std::size_t>(p)];
      if (idx < 0 || idx >= rows) {
        throw std::out_of_range("embedding-bag batch: index " + std::to_string(idx) + " at position " +
                                std::to_string(p) + " is outside table " + std::to_string(t) + " (rows " +
                                std::to_string(rows) + ")");
      }
    }
  }
}

}  // namespace perfcast::profiler

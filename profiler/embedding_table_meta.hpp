#pragma once
/// \file embedding_table_meta.hpp
/// Where one embedding table lives in the flat buffers of a batched embedding-bag problem.
/// Plain data, C++17: the CUDA kernels read an array of these from device memory.

#include <cstdint>

namespace perfcast::profiler {

struct EmbeddingTableMeta {
  std::int64_t rows = 0;           ///< number of rows (valid indices are 0 .. rows-1)
  std::int64_t row_offset = 0;     ///< first row in the row-wise state array (sum of earlier rows)
  std::int64_t weight_offset = 0;  ///< element offset of row 0 in the flat weight buffer
  std::int32_t dim = 0;            ///< embedding dimension, 1 .. kMaxEmbeddingDim
  std::int32_t output_offset = 0;  ///< first column of this table in a [B, total_dim] output row
};

}  // namespace perfcast::profiler

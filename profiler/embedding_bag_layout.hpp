#pragma once
/// \file embedding_bag_layout.hpp
/// Shape of a batched embedding-bag problem: T tables (each rows x dim, stored one after the
/// other in one flat weight buffer), one batch of B bags per table in CSR form, like FBGEMM's
/// TBE operator:
///   - `indices`: int64, all bags of all tables concatenated (table 0 bag 0, table 0 bag 1, ...);
///   - `offsets`: int64, length T*B + 1; bag b of table t holds
///     indices[offsets[t*B + b] .. offsets[t*B + b + 1]);
///   - output / grad_output: fp32 row-major [B, total_dim]; sample b's row holds the pooled
///     vectors of tables 0..T-1 concatenated (table t at columns output_offset .. +dim);
///   - row-wise optimizer state: fp32 [total_rows], table t's rows at row_offset .. +rows.

#include <cstdint>
#include <span>
#include <vector>

#include "profiler/embedding_table_meta.hpp"

namespace perfcast::profiler {

/// Size of one table, as given by the user.
struct TableShape {
  std::int64_t rows = 0;
  std::int32_t dim = 0;
};

/// All tables of a problem plus the batch size, with the derived offsets.
struct EmbeddingBagLayout {
  std::vector<EmbeddingTableMeta> tables;
  std::int64_t batch_size = 0;             ///< B, bags per table
  std::int64_t total_rows = 0;             ///< sum of rows over tables
  std::int64_t total_weight_elements = 0;  ///< sum of rows*dim over tables
  std::int32_t total_dim = 0;              ///< sum of dims: width of an output row
  std::int32_t max_dim = 0;                ///< largest dim over tables

  [[nodiscard]] std::int64_t num_tables() const { return static_cast<std::int64_t>(tables.size()); }
  /// Number of bags, T*B; `offsets` has one more element.
  [[nodiscard]] std::int64_t num_bags() const { return num_tables() * batch_size; }
};

/// Builds the layout: tables are packed in the given order without padding.
/// Throws std::invalid_argument if there is no table, batch_size < 1, a table has rows < 1,
/// or a dim is outside 1 .. kMaxEmbeddingDim, or a total overflows the index types used.
[[nodiscard]] EmbeddingBagLayout make_embedding_bag_layout(std::span<const TableShape> shapes,
                                                           std::int64_t batch_size);

/// Checks one batch against the layout: offsets has T*B+1 elements, starts at 0, never
/// decreases and ends at indices.size(); every index of table t lies in 0 .. rows_t-1.
/// Throws std::invalid_argument (std::out_of_range for a bad index) naming the first problem.
void validate_embedding_bag_batch(const EmbeddingBagLayout& layout, std::span<const std::int64_t> indices,
                                  std::span<const std::int64_t> offsets);

}  // namespace perfcast::profiler

#pragma once
/// \file index_data.hpp
/// Embedding-lookup index data as the public DLRM datasets store it (facebookresearch/
/// dlrm_datasets, FBGEMM TBE inputs): per batch, one flat array of row indices for all
/// tables and bags, table-major (table 0's B bags, then table 1's, ...), plus either CSR
/// offsets or per-bag lengths. Read from raw little-endian int32 / int64 files, with
/// per-table, per-batch statistics: accesses, unique rows, the 17-bin reuse histogram,
/// pooling mean and spread, the working set against L2, and a fitted Zipf exponent.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "predictors/index_distribution.hpp"
#include "core/units.hpp"

namespace perfcast {

enum class IndexDType { kInt32, kInt64 };

/// Reads a raw little-endian array of int32 or int64 values. Throws ConfigError naming
/// the file when it cannot be read or its size is not a multiple of the element size.
[[nodiscard]] std::vector<std::int64_t> read_index_array(const std::filesystem::path& path, IndexDType dtype);

/// How bags are delimited.
enum class BagEncoding {
  kOffsets,  ///< CSR offsets: per batch T*B+1 entries (bag i = [o[i], o[i+1])), or T*B
             ///< entries (bag starts; a batch's last bag ends where the next batch starts)
  kLengths,  ///< per batch T*B bag lengths
};

/// Index data of one or more batches. Offsets are positions in `indices`; with T*B+1
/// entries per batch they may also restart at 0 in every batch (batch-relative), each
/// batch then following the previous one in `indices`.
struct IndexData {
  std::vector<std::int64_t> indices;
  std::vector<std::int64_t> bags;  ///< offsets or lengths, see `encoding`
  BagEncoding encoding = BagEncoding::kOffsets;
  int tables = 0;
  std::int64_t batch = 0;          ///< bags per table per batch
  std::string indices_file = "indices";  ///< names used in error messages
  std::string bags_file = "offsets";
};

/// One table within one batch.
struct TableBatchStats {
  int table = 0;
  int batch_index = 0;
  std::int64_t bags = 0;
  std::int64_t accesses = 0;     ///< indices looked up (sum of bag lengths)
  std::int64_t unique_rows = 0;  ///< distinct row indices
  std::int64_t max_index = -1;   ///< largest index seen (-1: none)
  ReuseHistogram unique_shares{};  ///< share of unique rows per reuse bin (sums to 1)
  ReuseHistogram access_shares{};  ///< share of accesses per reuse bin (sums to 1)
  double pooling_mean = 0;       ///< mean bag length
  double pooling_stddev = 0;     ///< population standard deviation of bag lengths
};

/// Options of the statistics: table sizes and row width for bounds and working sets.
struct IndexStatsOptions {
  /// Rows per table: empty (bounds unchecked; the largest index + 1 stands in), one value
  /// for every table, or one per table. Indices must be in [0, rows).
  std::vector<std::int64_t> rows;
  std::int64_t dim = 0;         ///< embedding dimension, elements (0: no working set)
  double row_element_bytes = 4;  ///< bytes per weight element (fp32 4, fp16 2)
  Bytes l2_cache = 0;           ///< GPU L2 capacity (0: no L2 comparison)
};

/// Per-batch statistics of every table. Throws ConfigError naming the file on bad data:
/// size mismatch between offsets/lengths and T x B, offsets that decrease or leave the
/// indices array, lengths that are negative or do not add up to the indices, negative
/// indices, or indices >= rows.
[[nodiscard]] std::vector<TableBatchStats> compute_index_stats(const IndexData& data, const IndexStatsOptions& opt);

/// One table summarized over batches (means of the per-batch values).
struct TableIndexSummary {
  int table = 0;
  std::string name;              ///< "table N", or the name a stats file gives
  int batches = 0;
  std::int64_t rows = 0;         ///< declared rows, else the largest index + 1 (0: unknown)
  bool rows_declared = false;
  std::int64_t batch = 0;        ///< bags per batch
  double accesses = 0;           ///< per batch
  double unique_rows = 0;        ///< per batch
  double pooling_mean = 0, pooling_stddev = 0;
  bool pooling_stddev_known = true;  ///< false where the source gives only means
  ReuseHistogram unique_shares{}, access_shares{};
  std::int64_t dim = 0;
  double working_set_bytes = 0;  ///< unique rows x dim x element bytes (0: dim unknown)
  double working_set_over_l2 = 0;  ///< working set / L2 capacity (0: unknown)
  /// Zipf exponent reproducing the mean unique rows via expected_unique_rows (0: no skew
  /// beyond uniform; absent unless rows are declared: the largest index seen is only a lower
  /// bound and would bias the fit).
  std::optional<double> zipf_alpha;
  /// Mean reuse measured (accesses / unique rows).
  [[nodiscard]] double mean_reuse_measured() const { return unique_rows > 0 ? accesses / unique_rows : 0.0; }
};

[[nodiscard]] std::vector<TableIndexSummary> summarize_index_stats(const std::vector<TableBatchStats>& per_batch,
                                                                   const IndexStatsOptions& opt);

/// Working set and fitted Zipf exponent of a summary from its rows, accesses and unique
/// rows (used for summaries read from stats files too).
void complete_summary(TableIndexSummary& s, const IndexStatsOptions& opt);

/// The distribution a workload table accepts for this table: the fitted Zipf exponent
/// (uniform when it is 0), or with `histogram` (or unknown rows) the measured reuse
/// histogram of unique rows; where only one of the two is known, that one. Throws
/// ConfigError (naming the table) when neither is.
[[nodiscard]] IndexDistribution summary_distribution(const TableIndexSummary& s, bool histogram);

}  // namespace perfcast

#pragma once
/// \file index_stats_file.hpp
/// Per-table index statistics in files: Meta's published locality statistics of the DLRM
/// embedding-lookup datasets, and perfcast's own JSON / CSV stats format (what
/// `perfcast index-stats --json` writes), plus the renderings of TableIndexSummary.

#include <filesystem>
#include <string>
#include <vector>

#include "predictors/index_data.hpp"
#include "core/json_reader.hpp"

namespace perfcast {

/// One block of Meta's locality_stats.txt (facebookresearch/dlrm_datasets, embedding_bag/
/// 2021 and 2022): statistics of one dataset file over all its tables, per batch.
///   fbgemm_t856_bs65536_0.pt
///   Locality stats after processing 1 batches of size 65536
///   Avg # of indices: 468084223
///   Avg # of unique cols: 61644628
///   Avg col size: 7.6
///   Histogram of col sizes:          (share of unique indices per reuse bin, 17 lines)
///   (0, 1]: 0.423 ... (32768+: 0.000
///   [0, 1, 2, ...]  ['0.000', ...]   (bin edges and cumulative shares; ignored)
///   Ratio of index distribution at different column sizes:   (share of accesses, 17 lines)
struct LocalityStatsBlock {
  std::string dataset;          ///< the .pt file name
  int batches = 0;
  std::int64_t batch_size = 0;  ///< samples per batch
  double indices = 0;           ///< mean indices per batch (all tables)
  double unique = 0;            ///< mean unique indices per batch (all tables)
  double avg_col_size = 0;      ///< as printed: indices / unique, one decimal
  ReuseHistogram unique_shares{};  ///< as printed (3 decimals: heavy bins round to 0)
  ReuseHistogram access_shares{};
  int line = 0;                 ///< line of the block's first line, 1-based
};

/// Parses a locality_stats.txt. Throws ConfigError naming the file and line.
[[nodiscard]] std::vector<LocalityStatsBlock> read_locality_stats(const std::filesystem::path& path);

/// A locality block as a summary: accesses and unique rows per batch, the unique shares
/// reconstructed from the access shares (unique_shares_from_access_shares: the printed
/// unique shares round the heavy bins to 0), pooling = indices / (batch x tables) when
/// `tables` > 0 (the file does not state the table count; the file name does: t856).
[[nodiscard]] TableIndexSummary locality_summary(const LocalityStatsBlock& b, int tables);

/// Table count from a dataset name such as "fbgemm_t856_bs65536_0.pt" (0 when absent).
[[nodiscard]] int tables_from_dataset_name(const std::string& name);

/// perfcast's stats format, JSON:
///   {"schema": "perfcast.index_stats", "schema_version": "1.0",
///    "tables": [{"name": "t0", "rows": 1000000 (optional), "batch": 4096, "accesses": 81920,
///                "unique_rows": 60000, "dim": 128 (optional), "pooling_mean": 20,
///                "pooling_stddev": 3 (optional), "unique_shares": [17 numbers] (optional),
///                "access_shares": [17] (optional), "batches": 1 (optional)}, ...]}
/// (further keys that `index-stats --json` writes are read back and recomputed) or CSV
/// with a header naming at least table,rows,batch,accesses,unique_rows and optionally
/// dim,pooling_mean,pooling_stddev. Choice by extension (.json / .csv). Throws ConfigError.
[[nodiscard]] std::vector<TableIndexSummary> read_index_stats_file(const std::filesystem::path& path,
                                                                   const IndexStatsOptions& opt);

/// The JSON written by `index-stats --json` (readable by read_index_stats_file).
[[nodiscard]] nlohmann::json index_stats_to_json(const std::vector<TableIndexSummary>& tables,
                                                 const std::vector<TableBatchStats>& per_batch, Bytes l2_cache);
/// JSON of a distribution as a workload table's "distribution" accepts it.
[[nodiscard]] nlohmann::json index_distribution_to_json(const IndexDistribution& d);
/// `--as-distribution` output: [{"table": name, "distribution": {...}}, ...].
[[nodiscard]] nlohmann::json distributions_to_json(const std::vector<TableIndexSummary>& tables, bool histogram);
/// Human-readable table.
[[nodiscard]] std::string render_index_stats_text(const std::vector<TableIndexSummary>& tables, Bytes l2_cache);

}  // namespace perfcast

#pragma once
/// \file index_stats_command.hpp
/// `perfcast index-stats` as a library call (the command line and the Python package both
/// use it): embedding-lookup index statistics from raw index data (the layout of the public
/// DLRM datasets), from Meta's locality stats, or from a stats file of ours
/// (predictors/index_data.hpp, predictors/index_stats_file.hpp).

#include <cstdint>
#include <string>
#include <vector>

namespace perfcast {

struct IndexStatsRequest {
  /// Exactly one source: raw `indices` with `offsets` or `lengths` (and `tables`, `batch`),
  /// or `locality` (Meta dlrm_datasets locality_stats.txt), or `stats` (.json / .csv of ours).
  std::string indices, offsets, lengths, locality, stats;
  int tables = 0;             ///< tables T in the index data
  std::int64_t batch = 0;     ///< bags per table per batch B
  std::vector<std::int64_t> rows;  ///< rows per table: one for all or one per table
  std::string dtype = "int64";     ///< element type of the raw files: int32 or int64
  std::int64_t dim = 0;            ///< embedding dimension, for the working set
  std::string weight_dtype = "fp32";  ///< fp32, fp16, bf16 or int8
  std::string system;               ///< system or GPU file: the working set against its L2 ("" none)
  bool as_distribution = false;     ///< JSON: the per-table "distribution" objects a workload table accepts
  bool histogram = false;           ///< distributions as the measured reuse histogram, not the fitted Zipf
};

struct IndexStatsOutcome {
  std::string text;  ///< the report for people
  std::string json;  ///< as `--json` writes it
};

/// Throws ConfigError naming the option for a bad combination, and the file for bad data.
[[nodiscard]] IndexStatsOutcome run_index_stats(const IndexStatsRequest& request);

}  // namespace perfcast

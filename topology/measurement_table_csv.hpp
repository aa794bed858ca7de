#pragma once
/// \file measurement_table_csv.hpp
/// Reads collective timings transcribed into one CSV table from several public sources
/// (data/public-measurements/nccl_*_dev.csv). Header (any column order):
///   source_url, gpu, gpus_per_node, nodes, nics_per_node_and_rate, nccl_version, env,
///   collective, bytes, time_us, algbw_GBps, busbw_GBps, notes, inplace_time_us,
///   inplace_busbw_GBps, tool, derived_fields
/// One CollectiveLog per source (rows sharing source_url, gpu, nodes and env). Times:
/// the out-of-place time_us where given, else inplace_time_us, else derived from the
/// in-place bus bandwidth (t = bytes x F(n) / busBw, nccl-tests' definition); each sample
/// says which. A blank node count is taken as 1 and noted.

#include <string>
#include <vector>

#include "topology/nccl_tests_parser.hpp"

namespace perfcast {

struct SourcedLog {
  CollectiveLog log;            ///< log.file: "<csv path>#<row of the source's first line>"
  std::string source_url;       ///< the rows' source_url
  std::string env;              ///< the rows' env (command line, NCCL_ALGO forcing, ...)
  /// "nvls", "nvls_tree", "ring", "tree", "collnet_chain", "collnet_direct", "pat" when env
  /// sets NCCL_ALGO; else ""
  std::string forced_algorithm;
  std::string time_basis;       ///< "out-of-place time", "in-place time" or "in-place busBw (derived)"
  bool nodes_assumed = false;   ///< the nodes column was blank (taken as 1)
  bool suspect = false;         ///< some row's notes say "suspect"
};

/// True when the file's first line is this table's header (starts with "source_url,").
[[nodiscard]] bool is_measurement_table_csv(const std::string& path);

/// Parses the table; throws ConfigError (file, line, what was expected) on malformed rows.
[[nodiscard]] std::vector<SourcedLog> parse_measurement_table_csv(const std::string& path);
[[nodiscard]] std::vector<SourcedLog> parse_measurement_table_csv_text(const std::string& text, const std::string& name);

/// NCCL_ALGO value -> the spec-derived model's algorithm name ("" when not recognised).
[[nodiscard]] std::string algorithm_from_nccl_algo(const std::string& value);

}  // namespace perfcast

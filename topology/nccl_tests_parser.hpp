#pragma once
/// \file nccl_tests_parser.hpp
/// Reads measured collective timings in the formats users already have:
///  - the standard table printed by nccl-tests (`all_reduce_perf`, `all_gather_perf`,
///    `reduce_scatter_perf`, `alltoall_perf`, `broadcast_perf`, `reduce_perf`): header
///    comments naming the test, the devices (one "#  Rank" line per rank) and the NCCL
///    version, then rows "size count type [redop root] time algbw busbw #wrong time algbw
///    busbw #wrong" (out-of-place, then in-place; times in microseconds);
///  - CSV lookup tables "size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)"
///    (as in vTrain's AR_GPU<n>_*_LUT.csv), whose collective and rank count come from the
///    file name (AR = all-reduce, GPU<n>) or from the caller.
/// Byte sizes follow nccl-tests (docs/collectives.md section 2).

#include <optional>
#include <string>
#include <vector>

#include "topology/collective.hpp"

namespace perfcast {

struct CollectiveSample {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  int ranks = 0;
  int nodes = 1;
  double bytes = 0;    ///< nccl-tests convention
  double time_s = 0;   ///< out-of-place time
  std::string source;  ///< file it came from
};

struct CollectiveLog {
  std::string file;
  std::string format;        ///< "nccl-tests" or "csv"
  std::string gpu;           ///< device name from the log, if any
  std::string nccl_version;  ///< from the log, if any
  std::vector<CollectiveSample> samples;
};

/// Hints for what a file does not say itself.
struct LogHints {
  std::optional<CollectiveKind> kind;
  std::optional<int> ranks;
  int nodes = 1;
};

/// Parses one file of either format; throws ConfigError (file, line) on malformed input
/// or when the collective or rank count cannot be known.
[[nodiscard]] CollectiveLog parse_collective_log(const std::string& path, const LogHints& hints = {});
/// Same, from text already in memory (`name` is used for messages and file-name hints).
[[nodiscard]] CollectiveLog parse_collective_log_text(const std::string& text, const std::string& name, const LogHints& hints = {});

/// nccl-tests bus-bandwidth factor: busBw = algBw x factor (2(n-1)/n for all-reduce,
/// (n-1)/n for all-gather, reduce-scatter, all-to-all; 1 for broadcast and reduce).
[[nodiscard]] double bus_factor(CollectiveKind kind, int n);

/// "all_reduce" / "allreduce" / "all_reduce_perf" / "AR" -> kind.
[[nodiscard]] std::optional<CollectiveKind> collective_from_name(const std::string& name);

}  // namespace perfcast

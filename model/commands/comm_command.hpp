#pragma once
/// \file comm_command.hpp
/// `perfcast comm` as a library call: a collective's predicted time and bandwidth over a
/// range of message sizes on a system (nccl-tests' byte and bus-bandwidth conventions).

#include <string>

#include "core/json_reader.hpp"

namespace perfcast {

struct CommRequest {
  JsonDocument system;
  std::string collective = "all_reduce";  ///< all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce
  std::string sizes = "8B:16GiB";         ///< FROM:TO doubling, or a comma list of sizes
  int ranks = 0;                          ///< ranks taking part (0: all GPUs of the nodes used)
  int nodes = 0;                          ///< nodes used (0: as few as hold the ranks); overrides the system's
};

struct CommOutcome {
  std::string text;  ///< nccl-tests-like table
  std::string json;  ///< {"context": ..., "results": [...]}, as `--json` writes it
};

/// Throws ConfigError (naming "--sizes", "--collective", "--ranks" for bad arguments).
[[nodiscard]] CommOutcome run_comm(CommRequest request);

}  // namespace perfcast

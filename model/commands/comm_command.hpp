#pragma once
/// \file comm_command.hpp
/// `perfcast comm` as a library call: a collective's predicted time and bandwidth over a
/// range of message sizes on a system (nccl-tests' byte and bus-bandwidth conventions).

#include <string>
#include <vector>

#include "core/json_reader.hpp"

namespace perfcast {

struct CommRequest {
  JsonDocument system;
  std::string collective = "all_reduce";  ///< all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce
  std::string sizes = "8B:16GiB";         ///< FROM:TO doubling, or a comma list of sizes
  int ranks = 0;                          ///< ranks taking part (0: all GPUs of the nodes used)
  std::string nodes;                      ///< "" (as few nodes as hold the ranks) or a list "1,2,4": one table each
  std::vector<std::string> overrides;     ///< system what-ifs "PATH=VALUE" (optionally "system.PATH=VALUE")
};

struct CommOutcome {
  std::string text;  ///< nccl-tests-like table
  std::string json;  ///< {"context": ..., "results": [...]} (several node counts: "tables"), as `--json` writes it
  std::string csv;   ///< one row per node count and size, as `--csv` writes it
};

/// Throws ConfigError (naming "--sizes", "--collective", "--ranks" for bad arguments).
[[nodiscard]] CommOutcome run_comm(CommRequest request);

}  // namespace perfcast

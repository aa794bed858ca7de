#pragma once
/// \file convert_plan_command.hpp
/// `perfcast convert-plan` as a library call (the command line and the Python package both
/// use it): read a sharding plan in any shape perfcast reads (its own, TorchRec's
/// dataclasses.asdict or ShardingPlan._serialize()), check it against the workload and the
/// system as predict does, and write it in the shape asked for. A TorchRec plan written back
/// in its own shape is the same JSON value (model/graph/torchrec_plan.hpp).

#include <string>
#include <vector>

#include "core/json_reader.hpp"

namespace perfcast {

struct ConvertPlanRequest {
  JsonDocument system;
  JsonDocument workload;
  JsonDocument plan;
  std::vector<std::string> overrides;  ///< "PATH=VALUE", as for predict
  /// "perfcast", "torchrec", "torchrec_serialized", or "" for the shape it was read in.
  std::string plan_format;
  /// TorchRec shapes: every table under this module path; "" keeps a TorchRec plan's own
  /// modules (sparse_arch.embedding_bag_collection for a perfcast plan).
  std::string module_path;
};

struct ConvertPlanOutcome {
  std::string plan;    ///< the file text
  std::string format;  ///< the format written ("perfcast", "torchrec", "torchrec_serialized")
  std::string summary; ///< one line: what was read (its source line) and what was written
};

/// Throws ConfigError naming the file and JSON path for a plan that does not fit the
/// workload or the system, and "--plan-format" / "--module-path" for bad options.
[[nodiscard]] ConvertPlanOutcome convert_plan(ConvertPlanRequest request);

}  // namespace perfcast

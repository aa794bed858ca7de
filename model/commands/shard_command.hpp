#pragma once
/// \file shard_command.hpp
/// `perfcast shard` as a library call (the command line and the Python package both use
/// it): search for the fastest plan that fits, evaluate the baselines beside it, and render
/// the report, the result JSON and the best plan's file.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/json_reader.hpp"
#include "model/graph/sharding_plan.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {

/// Plan file shapes `perfcast shard --out` and `perfcast convert-plan` write: perfcast's flat
/// format, TorchRec's as dataclasses.asdict(ParameterSharding) gives it, and TorchRec's
/// ShardingPlan._serialize() (model/graph/torchrec_plan.hpp).
enum class PlanFormat { kPerfcast, kTorchrec, kTorchrecSerialized };

struct ShardRequest {
  JsonDocument system;
  JsonDocument workload;
  std::vector<std::string> overrides;  ///< "PATH=VALUE", as for predict
  std::string budget = "10s";          ///< wall-clock search budget, a time quantity
  std::size_t evaluations = 0;         ///< stop after N simulated plans instead (0: budget)
  std::string timeout;                 ///< stop after this wall-clock time even with `evaluations` ("" = none)
  std::uint64_t seed = 1;
  PlanFormat plan_format = PlanFormat::kPerfcast;
  /// The module path a TorchRec plan puts the tables under (TorchRec matches it exactly):
  /// letters, digits, '_' and '.'; checked by run_shard.
  std::string module_path = "sparse_arch.embedding_bag_collection";
  /// Host-memory tables (fused_uvm, fused_uvm_caching) in the baselines and the search:
  /// "on", "off", or "auto" (on when no HBM-only baseline fits).
  std::string memory_tiers = "auto";
  /// Where the dense part runs: "workload" (as the workload says), "data_parallel", "hybrid"
  /// (the bottom MLP for the global batch on rank 0, NVIDIA's hybrid-parallel layout), or
  /// "search": the table search runs for both layouts, half the budget or evaluations each,
  /// and the faster feasible plan wins.
  std::string dense_layout = "workload";
  /// Called now and then with (plans simulated, best iteration time in s); may be empty.
  std::function<void(std::size_t, double)> progress;
};

struct ShardOutcome {
  bool feasible = false;  ///< the best plan fits in memory
  std::string text;       ///< the report for people
  std::string json;       ///< the result (context, best, baselines, search), as `--json` writes it
  std::string plan;       ///< the best plan's file text in `plan_format`
};

/// Throws ConfigError for bad input ("--budget" for an unreadable budget).
[[nodiscard]] ShardOutcome run_shard(ShardRequest request);

/// "perfcast", "torchrec" or "torchrec_serialized" -> the format; ConfigError("--plan-format") otherwise.
[[nodiscard]] PlanFormat plan_format_from_name(const std::string& name);

/// A TorchRec module path ("sparse_arch.embedding_bag_collection"): dot-separated Python
/// identifiers, as nn.Module.named_modules() gives them; ConfigError("--module-path") otherwise.
void check_module_path(const std::string& path);

/// `plan`'s file text in `format`; for TorchRec's shapes every table under `module_path`
/// ("" keeps a read plan's own modules).
[[nodiscard]] std::string write_plan(const ShardingPlan& plan, const DlrmSpec& w, const SystemSpec& s, PlanFormat format,
                                     const std::string& module_path);

}  // namespace perfcast

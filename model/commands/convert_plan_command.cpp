#include "model/commands/convert_plan_command.hpp"

#include <fmt/format.h>

#include "model/commands/shard_command.hpp"
#include "model/graph/torchrec_plan.hpp"
#include "model/predict/predict.hpp"
#include "model/predict/runtime_profile.hpp"

namespace perfcast {
namespace {

/// The format a plan was read in, as plan_format_from_name spells it.
std::string format_read(const ShardingPlan& plan) {
  if (!plan.torchrec) return "perfcast";
  return plan.torchrec->serialized ? "torchrec_serialized" : "torchrec";
}

}  // namespace

ConvertPlanOutcome convert_plan(ConvertPlanRequest req) {
  if (!req.module_path.empty()) check_module_path(req.module_path);
  JsonDocument host{nlohmann::json::object(), "--set"};  // host costs change no plan
  for (const auto& o : req.overrides) apply_override_text(o, req.system, req.workload, &req.plan, &host);
  const SystemSpec s = parse_system(req.system);
  (void)take_runtime_name(req.workload);  // the software stack changes no plan either
  const DlrmSpec w = parse_workload(req.workload);
  const ShardingPlan plan = parse_plan(req.plan, w, s.world_size(), s.gpus_per_node);
  ConvertPlanOutcome out;
  out.format = req.plan_format.empty() ? format_read(plan) : req.plan_format;
  const PlanFormat format = plan_format_from_name(out.format);
  out.plan = write_plan(plan, w, s, format, req.module_path);
  out.summary = fmt::format("read {} table(s) from {}; written as {}{}", plan.tables.size(), plan.source, out.format,
                            format == PlanFormat::kPerfcast || req.module_path.empty() ? std::string()
                                                                                       : " under module " + req.module_path);
  return out;
}

}  // namespace perfcast

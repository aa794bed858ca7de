#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/log.hpp"
#include "core/output_files.hpp"
#include "model/commands/convert_plan_command.hpp"

namespace perfcast::cli {
namespace {

struct ConvertPlanArgs {
  std::string system, workload, plan, out = "-";
  std::vector<std::string> overrides;
  std::string plan_format, module_path;
};

}  // namespace

Action add_convert_plan(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert-plan",
                                 "Check a sharding plan against a workload and system and write it in another shape (perfcast's, "
                                 "TorchRec's asdict or ShardingPlan._serialize()); a TorchRec plan written in its own shape "
                                 "comes back as the same JSON");
  auto a = std::make_shared<ConvertPlanArgs>();
  cmd->add_option("--system", a->system, "system file (the plan's ranks and GPUs per node are checked against it)")->required();
  cmd->add_option("--workload", a->workload, "DLRM workload file (the plan's tables are checked against it)")->required();
  cmd->add_option("--plan", a->plan, "plan file: perfcast's format, or TorchRec's (asdict or _serialize() output)")->required();
  cmd->add_option("--out", a->out, "write the plan to FILE, or - for standard output (default)");
  cmd->add_option("--set", a->overrides, "what-if override PATH=VALUE (as for predict)");
  cmd->add_option("--plan-format", a->plan_format,
                  "perfcast, torchrec (ParameterSharding as dataclasses.asdict gives it) or torchrec_serialized "
                  "(ShardingPlan._serialize()); default: the shape the plan was read in")
      ->check(CLI::IsMember({"perfcast", "torchrec", "torchrec_serialized"}));
  cmd->add_option("--module-path", a->module_path,
                  "TorchRec shapes: put every table under this module path (default: each table's module as read; "
                  "sparse_arch.embedding_bag_collection for a perfcast plan)");
  return [a]() {
    ConvertPlanRequest req;
    req.system = load_json_file(a->system);
    req.workload = load_json_file(a->workload);
    req.plan = load_json_file(a->plan);
    req.overrides = a->overrides;
    req.plan_format = a->plan_format;
    req.module_path = a->module_path;
    const ConvertPlanOutcome r = convert_plan(std::move(req));
    write_outputs({{a->out, r.plan}});
    log().info("{}", r.summary);
    return 0;
  };
}

}  // namespace perfcast::cli

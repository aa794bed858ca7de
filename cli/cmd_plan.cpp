#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/log.hpp"
#include "core/output_files.hpp"
#include "core/deadline.hpp"
#include "model/commands/command_context.hpp"
#include "model/commands/plan_command.hpp"

namespace perfcast::cli {
namespace {

struct PlanOptions {
  PlanSearchRequest req;
  std::string budget;  ///< --budget, a duration; empty: none
  std::string overlaps = "search";  ///< --overlaps: search | off
  std::string json_out, csv_out;
  int top = 10;
};

}  // namespace

Action add_plan(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Find the fastest Transformer parallelism (TP x PP x DP, micro-batch, recompute, "
                                         "distributed optimizer) that fits, on a number of GPUs");
  auto o = std::make_shared<PlanOptions>();
  auto& req = o->req;
  cmd->add_option("--system", req.base.system, "system file (configs/systems/*.json)")->required();
  cmd->add_option("--workload", req.base.workload, "Transformer workload file (configs/workloads/*.json)")->required();
  cmd->add_option("--gpus", req.gpus,
                  "GPUs to plan for (default: the system's); whole nodes, or fewer GPUs than one node")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--set", req.base.overrides, "what-if override PATH=VALUE applied to every candidate (as for predict)");
  cmd->add_option("--micro-batches", req.space.micro_batches, "micro-batch sizes to try (default 1,2,4,8)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--cp", req.space.context_parallel,
                  "context-parallel sizes to try, e.g. 1,2,4 (default: the workload's); each needs flash attention and "
                  "seq_len divisible by 2 cp")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--vp", req.space.virtual_stages,
                  "virtual pipeline stages to try where pp > 1, e.g. 1,2,4 (default: the workload's); > 1 is the interleaved "
                  "schedule")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  cmd->add_option("--max-tp", req.space.max_tp,
                  "largest TP size to try (powers of 2; default: the GPUs of one node). Larger values put TP groups "
                  "across nodes, whose per-layer collectives cross the network")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--ep", req.space.expert_parallel,
                  "expert-parallel sizes to try for a MoE workload, e.g. 1,2,4,8 (default: the workload's); each must divide "
                  "the experts, and ep x expert TP the ranks of a pipeline stage")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--expert-tp", req.space.expert_tensor_parallel,
                  "expert tensor-parallel sizes to try for a MoE workload, e.g. 1,2 (default: the workload's moe.expert_tp); "
                  "Megatron-Core's parallel folding: ep x expert TP must divide the ranks of a pipeline stage")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--overlaps", o->overlaps,
                  "search: also try overlapping the DP gradient reduction (dp > 1) and TP communication (tp > 1, "
                  "Transformer Engine) (default); off: neither")
      ->check(CLI::IsMember({"search", "off"}));
  cmd->add_option("--budget", o->budget,
                  "wall-clock limit (e.g. 60s): no new candidate is predicted after it; the ranking covers those predicted");
  cmd->add_option("--threads", req.threads, "threads (default: all cores)")->check(CLI::Range(1, 1024));
  cmd->add_flag_function(
      "--all-micro-batches", [o](std::int64_t) { o->req.base.steady_state.enabled = false; },
      "simulate every micro-batch of each candidate (default: from 2 x (M0 + 2 steps) micro-batches, M0 = "
      "max(16, 2 x pp x vp), the steady state is extrapolated, exactly; docs/transformers.md)");
  cmd->add_option("--top", o->top, "plans to list in the text report (default 10); they are always simulated in full")
      ->check(CLI::Range(1, 100000));
  cmd->add_flag("--exhaustive", req.exhaustive,
                "simulate every candidate in full (default: estimate each from two short simulations and simulate in "
                "full those within 3% of the listed plans; docs/transformers.md)");
  cmd->add_option("--json", o->json_out, "write the result as JSON to FILE, or - for standard output");
  cmd->add_option("--csv", o->csv_out, "write one CSV row per predicted plan to FILE, or - for standard output");
  return [o]() {
    if (!o->budget.empty()) o->req.timeout_s = parse_duration_option("--budget", o->budget);
    if (o->overlaps == "off") o->req.space.overlap_grad_reduce = o->req.space.tp_comm_overlap = {false};
    o->req.exact_top = static_cast<std::size_t>(std::max(o->top, 10));
    const PlanSearchResult r = search_parallel_plans(o->req, draw_progress);
    // The limit that stopped it: --budget, or the --timeout every command takes (cli/main.cpp).
    const std::string limit = !o->budget.empty() ? "--budget " + o->budget : current_deadline_label();
    if (!r.not_run.empty()) log().warn("stopped by {}: {} candidates not predicted", limit, r.not_run.size());
    std::vector<std::pair<std::string, std::string>> files;
    if (!o->json_out.empty()) files.emplace_back(o->json_out, render_plan_json(r, o->req));
    if (!o->csv_out.empty()) files.emplace_back(o->csv_out, render_plan_csv(r));
    write_outputs(files);
    if (o->json_out != "-" && o->csv_out != "-") std::cout << render_plan_text(r, o->top);
    // None predicted: 3 when the limit came first (as a command stopped by --timeout), else 1.
    if (r.ranked.empty()) return r.not_run.empty() ? 1 : 3;
    return 0;
  };
}

}  // namespace perfcast::cli

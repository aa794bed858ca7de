#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/log.hpp"
#include "model/commands/command_context.hpp"
#include "core/output_files.hpp"
#include "model/commands/shard_command.hpp"
#include "model/graph/torchrec_plan.hpp"

namespace perfcast::cli {
namespace {

struct ShardArgs {
  std::string system, workload, out, json, csv;
  std::vector<std::string> overrides;
  std::string budget = "10s";
  std::size_t evaluations = 0;
  std::string timeout;
  std::uint64_t seed = 1;
  std::string plan_format = "perfcast";
  std::string module_path = kTorchrecDlrmModule;
  std::string memory_tiers = "auto";
  std::string dense_layout = "workload";
};

}  // namespace

Action add_shard(CLI::App& app) {
  auto* cmd = app.add_subcommand("shard", "Search for the fastest embedding sharding plan that fits in memory");
  auto a = std::make_shared<ShardArgs>();
  cmd->add_option("--system", a->system, "system file")->required();
  cmd->add_option("--workload", a->workload, "workload file")->required();
  cmd->add_option("--set", a->overrides, "what-if override PATH=VALUE (as for predict)");
  cmd->add_option("--budget", a->budget,
                  "wall-clock budget of the whole command (search, baselines, report), e.g. 10s, 500ms (default 10s)");
  cmd->add_option("--evaluations", a->evaluations, "stop after N simulated plans instead (deterministic for a seed)");
  cmd->add_option("--timeout", a->timeout,
                  "hard wall-clock limit of the whole command (e.g. 30s), also with --evaluations: the search stops "
                  "in time to report the best plan found so far");
  cmd->add_option("--seed", a->seed, "random seed of the search and the random baseline");
  cmd->add_option("--out", a->out, "write the best plan to FILE (see --plan-format)");
  cmd->add_option("--plan-format", a->plan_format,
                  "shape of the --out plan (and of best.plan in --json): perfcast (flat, schema perfcast.plan; default), "
                  "torchrec (module path, then table: ParameterSharding as dataclasses.asdict gives it) or "
                  "torchrec_serialized (ShardingPlan._serialize())");
  cmd->add_option("--module-path", a->module_path,
                  "with --plan-format torchrec or torchrec_serialized: the module path of the embedding tables in your model, as TorchRec "
                  "matches it exactly (default sparse_arch.embedding_bag_collection, TorchRec's DLRM)");
  cmd->add_option("--memory-tiers", a->memory_tiers,
                  "tables in host memory (fused_uvm, fused_uvm_caching with its cache size) in the baselines and the "
                  "search: auto (default: when no plan fits in HBM), on, off");
  cmd->add_option("--dense-layout", a->dense_layout,
                  "where the dense part runs: workload (default: as the workload says), data_parallel, hybrid (bottom "
                  "MLP for the global batch on rank 0), or search (both, half the budget each; the faster wins)")
      ->check(CLI::IsMember({"workload", "data_parallel", "hybrid", "search"}));
  cmd->add_option("--json", a->json, "write the result as JSON to FILE, or - for standard output");
  cmd->add_option("--csv", a->csv, "write one CSV row per baseline plan and the best plan to FILE, or - for standard output");
  return [a]() {
    ShardRequest req;
    req.plan_format = plan_format_from_name(a->plan_format);
    req.module_path = a->module_path;
    req.system = load_json_file(a->system);
    req.workload = load_json_file(a->workload);
    req.overrides = a->overrides;
    req.budget = a->budget;
    req.evaluations = a->evaluations;
    req.dense_layout = a->dense_layout;
    req.timeout = a->timeout;
    req.seed = a->seed;
    req.memory_tiers = a->memory_tiers;
    const bool tty = progress_enabled();
    if (tty) {
      req.progress = [](std::size_t n, double best) {
        std::fprintf(stderr, "\r  searching: %zu plans simulated, best %.3f ms   ", n, best * 1e3);
        std::fflush(stderr);
      };
    }
    const ShardOutcome r = run_shard(std::move(req));
    if (tty) std::fprintf(stderr, "\r%60s\r", "");
    std::vector<std::pair<std::string, std::string>> files;
    if (!a->out.empty()) files.emplace_back(a->out, r.plan);
    if (!a->json.empty()) files.emplace_back(a->json, r.json);
    if (!a->csv.empty()) {
      const nlohmann::json result = nlohmann::json::parse(r.json);
      nlohmann::json rows = result["baselines"];
      rows.push_back({{"name", "best (search)"}, {"iteration_time_s", result["best"]["iteration_time_s"]},
                      {"feasible", result["best"]["feasible"]}, {"reason", result["best"]["reason"]}});
      files.emplace_back(a->csv, json_rows_to_csv(rows, {"name", "iteration_time_s", "feasible", "reason"}));
    }
    write_outputs(files);
    if (a->out != "-" && a->json != "-" && a->csv != "-") std::cout << r.text;  // one document on standard output
    return r.feasible ? 0 : 1;
  };
}

}  // namespace perfcast::cli

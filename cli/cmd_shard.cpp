#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/output_file.hpp"
#include "model/sharding/plan_shapes.hpp"
#include "model/predict/predict.hpp"
#include "model/report/report.hpp"
#include "model/sharding/shard_search.hpp"
#include "perfcast/build_info.hpp"
#include "topology/collective_calibration.hpp"

namespace perfcast::cli {
namespace {

struct ShardArgs {
  std::string system, workload, out, json, csv;
  std::vector<std::string> overrides;
  std::string budget = "10s";
  std::size_t evaluations = 0;
  std::uint64_t seed = 1;
};

}  // namespace

Action add_shard(CLI::App& app) {
  auto* cmd = app.add_subcommand("shard", "Search for the fastest embedding sharding plan that fits in memory");
  auto a = std::make_shared<ShardArgs>();
  cmd->add_option("--system", a->system, "system file")->required();
  cmd->add_option("--workload", a->workload, "workload file")->required();
  cmd->add_option("--set", a->overrides, "what-if override PATH=VALUE (as for predict)");
  cmd->add_option("--budget", a->budget, "wall-clock search budget, e.g. 10s, 500ms (default 10s)");
  cmd->add_option("--evaluations", a->evaluations, "stop after N simulated plans instead (deterministic for a seed)");
  cmd->add_option("--seed", a->seed, "random seed of the search and the random baseline");
  cmd->add_option("--out", a->out, "write the best plan (TorchRec ParameterSharding fields) to FILE");
  cmd->add_option("--json", a->json, "write the result as JSON to FILE, or - for standard output");
  cmd->add_option("--csv", a->csv, "write one CSV row per baseline plan and the best plan to FILE, or - for standard output");
  return [a]() {
    JsonDocument system_doc = load_json_file(a->system);
    JsonDocument workload_doc = load_json_file(a->workload);
    for (const auto& o : a->overrides) apply_override_text(o, system_doc, workload_doc, nullptr);
    const SystemSpec s = parse_system(system_doc);
    const DlrmSpec w = parse_workload(workload_doc);
    double budget = 0;
    try {
      budget = parse_quantity(a->budget, Dimension::kTime);
    } catch (const std::invalid_argument& e) {
      throw ConfigError("--budget", "", e.what());
    }
    if (w.batch_size % s.world_size() != 0) {
      throw ConfigError(w.file, "/batch_size", fmt::format("the global batch {} does not divide over the system's {} ranks",
                                                           w.batch_size, s.world_size()));
    }
    const auto comm = make_collective_model(s);
    // The kernel calibration predict applies, so that the search and the report below agree.
    const std::optional<KernelCalibration> calibration = load_system_kernel_calibration(s);
    const KernelCalibration* cal = calibration ? &*calibration : nullptr;
    PlanEvaluator evaluator(s, w, *comm, 3, true, cal);
    const auto baselines = baseline_plans(w, s, a->seed);
    FixedPlansProposer fixed(baselines);
    LocalSearchProposer local(w, s, a->seed);
    SearchOptions opt;
    opt.budget_s = budget;
    opt.max_evaluations = a->evaluations;
    const bool tty = ::isatty(STDERR_FILENO) != 0;
    if (tty) {
      opt.progress = [](std::size_t n, double best) {
        std::fprintf(stderr, "\r  searching: %zu plans simulated, best %.3f ms   ", n, best * 1e3);
        std::fflush(stderr);
      };
    }
    const SearchResult r = run_search({&fixed, &local}, evaluator, opt);
    if (tty) std::fprintf(stderr, "\r%60s\r", "");

    // Baselines side by side (their evaluations are cached in the evaluator's estimates).
    PlanEvaluator again(s, w, *comm, 3, true, cal);
    nlohmann::json base_json = nlohmann::json::array();
    std::string text = fmt::format("perfcast shard: {} on {} ({} ranks), {} tables\n\n{:<22} {:>14} {:>9}  {}\n", w.name, s.name,
                                   s.world_size(), w.tables.size(), "plan", "iteration", "fits", "");
    for (const auto& b : baselines) {
      const PlanEvaluation e = again.evaluate(b.plan);
      base_json.push_back({{"name", b.name}, {"iteration_time_s", e.iteration_time}, {"feasible", e.feasible},
                           {"reason", e.reason}});
      text += fmt::format("{:<22} {:>14} {:>9}  {}\n", b.name, format_time(e.iteration_time), e.feasible ? "yes" : "no",
                          e.feasible ? "" : e.reason);
    }
    const auto& best = r.best->plan;
    text += fmt::format("{:<22} {:>14} {:>9}  found by {} ({} plans simulated in {:.2f} s, {:.0f} plans/s)\n\n", "best (search)",
                        format_time(r.best_eval.iteration_time), r.best_eval.feasible ? "yes" : "no", r.best->origin,
                        r.evaluations, r.wall_s, r.evaluations / std::max(r.wall_s, 1e-9));
    int counts[kShardingTypeCount] = {};
    for (const auto& t : best.tables) counts[static_cast<int>(t.type)]++;
    std::string summary;
    for (int k = 0; k < kShardingTypeCount; ++k) {
      if (counts[k] == 0) continue;
      summary += fmt::format("{}{} {}", summary.empty() ? "" : ", ", counts[k], sharding_type_name(static_cast<ShardingType>(k)));
    }
    text += fmt::format("best plan: {}\n\n", summary);
    const std::string hint = r.best_eval.feasible ? "" : capacity_hint(w, s);
    if (!r.best_eval.feasible) {
      text += fmt::format("no feasible plan found: {}\n{}\n\n", r.best_eval.reason, hint.empty() ? "" : hint);
    }
    ShardingPlan reported = best;
    reported.source = "search (" + r.best->origin + ")";
    const auto p = predict_parsed(s, w, reported, a->overrides);
    text += render_text(*p, 5);

    std::vector<std::pair<std::string, std::string>> files;
    const std::string plan_text = plan_to_json(best, w, s.world_size(), s.gpus_per_node);
    if (!a->out.empty()) files.emplace_back(a->out, plan_text);
    if (!a->json.empty()) {
      nlohmann::json j = {
          {"context", nlohmann::json::parse(context_json(*p))},
          {"best", {{"iteration_time_s", r.best_eval.iteration_time}, {"feasible", r.best_eval.feasible},
                    {"reason", r.best_eval.reason}, {"hint", hint}, {"found_by", r.best->origin}, {"plan", nlohmann::json::parse(plan_text)}}},
          {"baselines", base_json},
          {"search", {{"evaluations", r.evaluations}, {"proposals", r.proposals}, {"wall_s", r.wall_s}, {"seed", a->seed}}},
      };
      files.emplace_back(a->json, j.dump(2) + "\n");
    }
    if (!a->csv.empty()) {
      nlohmann::json rows = base_json;
      rows.push_back({{"name", "best (search)"}, {"iteration_time_s", r.best_eval.iteration_time},
                      {"feasible", r.best_eval.feasible}, {"reason", r.best_eval.reason}});
      files.emplace_back(a->csv, json_rows_to_csv(rows, {"name", "iteration_time_s", "feasible", "reason"}));
    }
    write_outputs(files);
    if (a->json != "-" && a->csv != "-") std::cout << text;
    return r.best_eval.feasible ? 0 : 1;
  };
}

}  // namespace perfcast::cli

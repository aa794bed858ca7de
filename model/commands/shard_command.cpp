#include "model/commands/shard_command.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/commands/command_context.hpp"
#include "model/graph/torchrec_plan.hpp"
#include "model/predict/predict.hpp"
#include "model/report/report.hpp"
#include "model/sharding/plan_shapes.hpp"
#include "model/sharding/shard_search.hpp"
#include "topology/collective_calibration.hpp"
#include "core/json_text.hpp"

namespace perfcast {

PlanFormat plan_format_from_name(const std::string& name) {
  if (name == "perfcast") return PlanFormat::kPerfcast;
  if (name == "torchrec") return PlanFormat::kTorchrec;
  if (name == "torchrec_serialized") return PlanFormat::kTorchrecSerialized;
  throw ConfigError("--plan-format", name,
                    "expected \"perfcast\" (flat, schema perfcast.plan), \"torchrec\" (module path, then table: "
                    "ParameterSharding as dataclasses.asdict writes it) or \"torchrec_serialized\" (ShardingPlan._serialize())");
}

/// A TorchRec module path ("sparse_arch.embedding_bag_collection"): dot-separated Python
/// identifiers, as nn.Module.named_modules() gives them.
void check_module_path(const std::string& path) {
  bool ok = !path.empty() && path.size() <= 1024 && path.front() != '.' && path.back() != '.' &&
            path.find("..") == std::string::npos;
  for (char c : path) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.');
  if (!ok)
    throw ConfigError("--module-path", path,
                      "expected a module path such as \"sparse_arch.embedding_bag_collection\" (names of Python "
                      "identifiers joined by dots, as named_modules() lists them)");
}


std::string write_plan(const ShardingPlan& plan, const DlrmSpec& w, const SystemSpec& s, PlanFormat format,
                       const std::string& module_path) {
  if (format == PlanFormat::kPerfcast) return plan_to_json(plan, w, s.world_size(), s.gpus_per_node);
  TorchrecWriteOptions options;
  options.module_path = module_path;
  options.shape = format == PlanFormat::kTorchrec ? TorchrecShape::kAsdict : TorchrecShape::kSerialize;
  return plan_to_torchrec_json(plan, w, s.gpus_per_node, options);
}

namespace {

/// --memory-tiers: "on", "off", or "auto": on when no HBM-only baseline fits.
bool use_memory_tiers(const std::string& mode, const DlrmSpec& w, const SystemSpec& s, std::uint64_t seed) {
  if (mode == "on") return true;
  if (mode == "off") return false;
  if (mode != "auto") throw ConfigError("--memory-tiers", mode, "expected \"auto\", \"on\" or \"off\"");
  for (const auto& b : baseline_plans(w, s, seed)) {
    const auto m = estimate_memory(w, b.plan, s);
    if (std::all_of(m.begin(), m.end(), [](const RankMemory& r) { return r.fits(); })) return false;
  }
  return s.host_memory.capacity > 0;
}

/// "3 in host memory (2 fused_uvm_caching, 1 fused_uvm)", or "".
std::string host_tables_summary(const ShardingPlan& p) {
  int cached = 0, uvm = 0;
  for (const auto& t : p.tables) {
    cached += t.storage == EmbeddingStorage::kHostUvmCaching ? 1 : 0;
    uvm += t.storage == EmbeddingStorage::kHostUvm ? 1 : 0;
  }
  if (cached + uvm == 0) return "";
  return fmt::format("; {} in host memory ({} fused_uvm_caching, {} fused_uvm)", cached + uvm, cached, uvm);
}

/// One table search for the workload `w` as given (its dense layout included).
/// `hybrid`: hybrid tables may be proposed (not for a TorchRec plan, which cannot hold them).
SearchResult search_tables(const DlrmSpec& w, const SystemSpec& s, const CollectiveModel& comm, const KernelCalibration* cal,
                           bool tiers, bool hybrid, std::uint64_t seed, const SearchOptions& opt) {
  PlanEvaluator evaluator(s, w, comm, 3, true, cal);
  FixedPlansProposer fixed(baseline_plans(w, s, seed, tiers));
  LocalSearchProposer local(w, s, seed, tiers, hybrid);
  return run_search({&fixed, &local}, evaluator, opt);
}

/// The dense layouts a --dense-layout value asks for: bottom_mlp_rank -1 (data-parallel) or 0.
std::vector<int> dense_layouts(const std::string& mode, const DlrmSpec& w) {
  if (mode == "workload") return {w.bottom_mlp_rank};
  if (mode == "data_parallel") return {-1};
  if (mode == "hybrid") return {0};
  if (mode == "search") return {-1, 0};
  throw ConfigError("--dense-layout", mode, "expected workload, data_parallel, hybrid or search");
}

/// Wall-clock seconds one plan of `w` takes to simulate here (the first baseline, timed once).
/// The work after the search (the baselines side by side and the reported prediction) is
/// charged in this unit, so that --budget and --timeout bound the whole command.
double seconds_per_evaluation(const DlrmSpec& w, const SystemSpec& s, const CollectiveModel& comm, const KernelCalibration* cal,
                              bool tiers, std::uint64_t seed) {
  const auto plans = baseline_plans(w, s, seed, tiers);
  if (plans.empty()) return 0;
  PlanEvaluator evaluator(s, w, comm, 3, true, cal);
  const auto t0 = std::chrono::steady_clock::now();
  (void)evaluator.evaluate(plans.front().plan);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string dense_layout_name(int bottom_mlp_rank) {
  return bottom_mlp_rank < 0 ? "data_parallel" : fmt::format("hybrid (bottom MLP on rank {})", bottom_mlp_rank);
}

}  // namespace

ShardOutcome run_shard(ShardRequest req) {
  const auto started = std::chrono::steady_clock::now();
  check_module_path(req.module_path);
  const auto since_start = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  JsonDocument host_overrides{nlohmann::json::object(), "--set"};
  for (const auto& o : req.overrides) apply_override_text(o, req.system, req.workload, nullptr, &host_overrides);
  SystemSpec s = parse_system(req.system);
  // The software stack, as predict applies it: its host costs (--set host costs win) and its
  // DLRM settings, so that plans are searched for the stack that runs them.
  const std::optional<std::string> named_runtime = take_runtime_name(req.workload);
  DlrmSpec w = parse_workload(req.workload);
  std::optional<RuntimeProfile> runtime =
      load_runtime_profile(named_runtime.value_or(default_runtime(false)), req.workload.file, named_runtime.has_value());
  if (runtime && host_overrides.root.contains("runtime_host"))
    override_runtime_host(*runtime, JsonObject(host_overrides).object("runtime_host"));
  if (runtime) {
    apply_runtime(s, *runtime);
    (void)apply_runtime_stack(w, *runtime);
  }
  apply_host_overrides(s, host_overrides);
  const int workload_bottom_mlp_rank = w.bottom_mlp_rank;
  const double budget = parse_duration_option("--budget", req.budget);
  const double timeout = req.timeout.empty() ? 0.0 : parse_duration_option("--timeout", req.timeout);
  // A count beyond this is a typo, and one beyond a double's exact range would wrap when
  // shared between the dense layouts (2^64 - 1 became one evaluation).
  constexpr std::size_t kMaxEvaluations = 1'000'000'000'000;
  if (req.evaluations > kMaxEvaluations)
    throw ConfigError("--evaluations", std::to_string(req.evaluations),
                      fmt::format("expected at most {} simulated plans", kMaxEvaluations));
  if (w.batch_size % s.world_size() != 0) {
    throw ConfigError(w.file, "/batch_size", fmt::format("the global batch {} does not divide over the system's {} ranks",
                                                         w.batch_size, s.world_size()));
  }
  const auto comm = make_collective_model(s);
  // The kernel calibration predict applies, so that the search and the report below agree.
  const std::optional<KernelCalibration> calibration = load_system_kernel_calibration(s);
  const KernelCalibration* cal = calibration ? &*calibration : nullptr;
  const bool tiers = use_memory_tiers(req.memory_tiers, w, s, req.seed);
  const std::vector<int> layouts = dense_layouts(req.dense_layout, w);
  SearchOptions opt;
  opt.max_evaluations = req.evaluations > 0 ? std::max<std::size_t>(1, std::size_t(double(req.evaluations) / double(layouts.size()))) : 0;
  opt.progress = req.progress;
  // --budget and --timeout bound the whole command: the searches get what is left after
  // what has run and the estimated work after them (the baselines and the reported prediction,
  // about one evaluation each), shared equally by the dense layouts still to search.
  const double after_search =
      seconds_per_evaluation(w, s, *comm, cal, tiers, req.seed) * double(baseline_plans(w, s, req.seed, tiers).size() + 2);
  // One search per dense layout; the faster feasible result wins (a feasible one over any other).
  std::optional<SearchResult> found;
  std::string layout_text;
  nlohmann::json layout_json = nlohmann::json::array();
  for (std::size_t k = 0; k < layouts.size(); ++k) {
    const int bottom = layouts[k];
    const double share = 1.0 / double(layouts.size() - k);
    const auto search_time = [&](double limit) { return std::max(0.0, limit - since_start() - after_search) * share; };
    opt.budget_s = search_time(budget);
    // 0 would mean no limit: a timeout already spent leaves the search its first plan only.
    opt.timeout_s = timeout > 0 ? std::max(search_time(timeout), 1e-9) : 0;
    DlrmSpec candidate = w;
    candidate.bottom_mlp_rank = bottom;
    SearchResult sr = search_tables(candidate, s, *comm, cal, tiers, req.plan_format == PlanFormat::kPerfcast, req.seed, opt);
    if (!sr.best) throw std::runtime_error("the search proposed no plan");
    layout_json.push_back({{"dense_layout", dense_layout_name(bottom)}, {"iteration_time_s", sr.best_eval.iteration_time},
                           {"feasible", sr.best_eval.feasible}, {"evaluations", sr.evaluations}});
    layout_text += fmt::format("  {:<40} {:>12} {:>5}  ({} plans simulated)\n", dense_layout_name(bottom),
                               format_time(sr.best_eval.iteration_time), sr.best_eval.feasible ? "yes" : "no", sr.evaluations);
    const auto better = [](const SearchResult& a, const SearchResult& b) {
      if (a.best_eval.feasible != b.best_eval.feasible) return a.best_eval.feasible;
      return a.best_eval.iteration_time < b.best_eval.iteration_time;
    };
    if (!found || better(sr, *found)) {
      found = std::move(sr);
      w = candidate;
    }
  }
  const SearchResult& r = *found;
  const auto baselines = baseline_plans(w, s, req.seed, tiers);

  // Baselines side by side (their evaluations are cached in the evaluator's estimates).
  PlanEvaluator again(s, w, *comm, 3, true, cal);
  nlohmann::json base_json = nlohmann::json::array();
  std::string text = fmt::format("perfcast shard: {} on {} ({} ranks), {} tables\n\n{:<32} {:>12} {:>5}  {}\n", w.name, s.name,
                                 s.world_size(), w.tables.size(), "plan", "iteration", "fits", "");
  for (const auto& b : baselines) {
    const PlanEvaluation e = again.evaluate(b.plan);
    base_json.push_back({{"name", b.name}, {"iteration_time_s", e.iteration_time}, {"feasible", e.feasible},
                         {"reason", e.reason}});
    text += fmt::format("{:<32} {:>12} {:>5}  {}\n", b.name, format_time(e.iteration_time), e.feasible ? "yes" : "no",
                        e.feasible ? "" : e.reason);
  }
  const auto& best = r.best->plan;
  text += fmt::format("{:<32} {:>12} {:>5}  found by {} ({} plans simulated in {:.2f} s, {:.0f} plans/s{})\n\n", "best (search)",
                      format_time(r.best_eval.iteration_time), r.best_eval.feasible ? "yes" : "no", r.best->origin,
                      r.evaluations, r.wall_s, r.evaluations / std::max(r.wall_s, 1e-9),
                      r.timed_out ? "; stopped by --timeout, best so far" : "");
  int counts[kShardingTypeCount] = {};
  for (const auto& t : best.tables) counts[static_cast<int>(t.type)]++;
  std::string summary;
  for (int k = 0; k < kShardingTypeCount; ++k) {
    if (counts[k] == 0) continue;
    summary += fmt::format("{}{} {}", summary.empty() ? "" : ", ", counts[k], sharding_type_name(static_cast<ShardingType>(k)));
  }
  text += fmt::format("best plan: {}{}\n\n", summary, host_tables_summary(best));
  if (layouts.size() > 1) {
    text += fmt::format("dense layout (--dense-layout search), best plan of each:\n{}chosen: {}\n\n", layout_text,
                        dense_layout_name(w.bottom_mlp_rank));
  }
  const std::string hint = r.best_eval.feasible ? "" : capacity_hint(w, s, tiers);
  if (!r.best_eval.feasible) {
    text += fmt::format("no feasible plan found: {}\n{}\n\n", r.best_eval.reason, hint.empty() ? "" : hint);
  }
  ShardingPlan reported = best;
  reported.source = "search (" + r.best->origin + ")";
  // The chosen layout, when it is not the workload's, is recorded as the override it amounts to.
  std::vector<std::string> overrides = req.overrides;
  if (w.bottom_mlp_rank != workload_bottom_mlp_rank)
    overrides.push_back(fmt::format("workload.bottom_mlp_rank={}", w.bottom_mlp_rank));
  const auto p = predict_parsed(s, w, reported, overrides);
  if (runtime) {
    p->runtime = runtime;
    p->provenance = prediction_provenance(p->system, load_system_kernel_calibration(p->system), p->kernel_calibration, &*runtime);
  }
  text += render_text(*p, 5);

  ShardOutcome out;
  out.feasible = r.best_eval.feasible;
  out.text = std::move(text);
  out.plan = write_plan(best, w, s, req.plan_format, req.module_path);
  // Per rank of the best plan's prediction: its period, busy and exposed times and memory.
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& b : p->analysis.ranks) {
    const auto& m = p->memory[static_cast<std::size_t>(b.rank)];
    ranks.push_back({{"rank", b.rank}, {"period_s", b.period}, {"compute_busy_s", b.compute_busy},
                     {"exposed_communication_s", b.exposed_communication}, {"embedding_bytes", double(m.embedding)},
                     {"memory_total_bytes", double(m.total())}, {"memory_capacity_bytes", double(m.capacity)},
                     {"host_memory_bytes", double(m.host)}, {"host_memory_capacity_bytes", double(m.host_capacity)}});
  }
  const nlohmann::json j = {
      {"context", nlohmann::json::parse(context_json(*p))},
      {"best", {{"iteration_time_s", r.best_eval.iteration_time}, {"feasible", r.best_eval.feasible},
                {"reason", r.best_eval.reason}, {"hint", hint}, {"found_by", r.best->origin},
                {"plan", nlohmann::json::parse(out.plan)}, {"ranks", ranks}}},
      {"baselines", base_json},
      {"search", {{"evaluations", r.evaluations}, {"proposals", r.proposals}, {"wall_s", r.wall_s}, {"seed", req.seed},
                  {"timed_out", r.timed_out}, {"memory_tiers", tiers}, {"dense_layout", dense_layout_name(w.bottom_mlp_rank)},
                  {"dense_layouts", layout_json}}},
  };
  out.json = json_text(j, 2) + "\n";
  return out;
}

}  // namespace perfcast

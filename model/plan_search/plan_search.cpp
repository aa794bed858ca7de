#include "model/plan_search/plan_search.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "core/json_reader.hpp"
#include "core/limits.hpp"
#include "model/plan_search/plan_estimate.hpp"
#include "model/plan_search/search_order.hpp"
#include "model/predict/predict_grid.hpp"
#include "model/predict/runtime_profile.hpp"
#include "model/predict/workload.hpp"

namespace perfcast {

std::vector<std::string> resize_overrides(const SystemSpec& system, int gpus) {
  if (gpus < 1) throw ConfigError("--gpus", std::to_string(gpus), "expected a number of GPUs >= 1");
  if (gpus == system.world_size()) return {};
  if (gpus % system.gpus_per_node == 0) return {fmt::format("system.nodes={}", gpus / system.gpus_per_node)};
  if (gpus < system.gpus_per_node) return {"system.nodes=1", fmt::format("system.gpus_per_node={}", gpus)};
  throw ConfigError("--gpus", std::to_string(gpus),
                    fmt::format("expected whole nodes of {} GPUs, or fewer GPUs than one node", system.gpus_per_node));
}

SearchCoverage search_coverage(const PlanSearchResult& r) {
  SearchCoverage c;
  c.predicted = r.ranked.size();
  c.not_run = r.not_run.size();
  c.candidates = c.predicted + c.not_run;
  std::set<int> all, predicted;
  for (const auto& p : r.ranked) {
    all.insert(p.choice.tp);
    predicted.insert(p.choice.tp);
    if (p.estimated) ++c.estimated;
  }
  for (const auto& n : r.not_run) all.insert(n.tp);
  c.tp_sizes.assign(all.begin(), all.end());
  c.tp_sizes_predicted.assign(predicted.begin(), predicted.end());
  return c;
}

namespace {

struct ParsedInputs {
  SystemSpec system;
  TransformerSpec workload;
};

/// The system and Transformer workload with `overrides` applied.
ParsedInputs parse_inputs(const PredictRequest& base, const std::vector<std::string>& overrides) {
  JsonDocument system_doc = load_json_file(base.system);
  JsonDocument workload_doc = load_json_file(base.workload);
  JsonDocument host{nlohmann::json::object(), "--set"};
  for (const auto& o : overrides) apply_override_text(o, system_doc, workload_doc, nullptr, &host);
  ParsedInputs in{parse_system(system_doc), {}};
  (void)take_runtime_name(workload_doc);
  Workload any = parse_any_workload(workload_doc);
  auto* tf = std::get_if<TransformerSpec>(&any);
  if (!tf) {
    throw ConfigError(base.workload, "/model",
                      "perfcast plan searches Transformer parallelism; for a DLRM's embedding sharding use perfcast shard");
  }
  in.workload = std::move(*tf);
  return in;
}

/// The workload file's own parallelism on `world` GPUs, when it resolves; else nullopt and
/// `why` says what does not divide.
std::optional<ParallelismChoice> asked_choice(TransformerSpec w, int world, std::string& why) {
  try {
    resolve_parallelism(w, world);
  } catch (const ConfigError& e) {
    why = e.what();
    return std::nullopt;
  }
  ParallelismChoice c;
  c.tp = w.tp;
  c.cp = w.cp;
  c.pp = w.pp;
  c.vp = w.vp;
  c.ep = w.ep;
  c.etp = w.moe.expert_tp;
  c.dp = w.dp;
  c.micro_batch = w.micro_batch;
  c.recompute = w.recompute;
  // As the space lists them: nothing to shard or reduce with one gradient rank.
  c.distributed_optimizer = w.distributed_optimizer && c.dp * c.cp > 1;
  c.overlap_grad_reduce = w.overlap_grad_reduce && c.dp * c.cp > 1;
  c.tp_comm_overlap = w.tp_comm_overlap && c.tp > 1;
  c.even_split_of_uneven = w.custom_pipeline_split();
  return c;
}

/// "+12.3%: pipeline bubble +80.1 ms": the part of the critical rank's iteration that grew
/// most against the fastest plan.
std::string why_slower(const RankedPlan& p, const RankedPlan& best) {
  const double t = p.iteration_time, t0 = best.iteration_time;
  std::map<std::string, Seconds> parts0;
  for (const auto& part : best.metrics.breakdown) parts0[part.name] += part.time;
  std::map<std::string, Seconds> parts;
  for (const auto& part : p.metrics.breakdown) parts[part.name] += part.time;
  for (const auto& [name, _] : parts0) parts.try_emplace(name, 0.0);
  std::string worst;
  Seconds grew = 0;
  for (const auto& [name, time] : parts) {
    const Seconds d = time - (parts0.count(name) ? parts0.at(name) : 0.0);
    if (d > grew) {
      grew = d;
      worst = name;
    }
  }
  const std::string pct = fmt::format("{:+.1f}%", t0 > 0 ? (t / t0 - 1) * 100 : 0.0);
  return worst.empty() ? pct : fmt::format("{}: {} +{}", pct, worst, format_time(grew));
}

/// `q` with the global batch that gives `micro_batches` micro-batches per pipeline to `c`.
PredictRequest with_micro_batch_count(PredictRequest q, const ParallelismChoice& c, std::int64_t micro_batches) {
  q.overrides.push_back(fmt::format("workload.global_batch={}", micro_batches * c.dp * c.micro_batch));
  // Two iterations, the fewest whose second period is the iteration's (simulator.hpp): the
  // estimate's error against the full three-iteration simulation is in docs/transformers.md.
  q.iterations = 2;
  return q;
}

/// Candidate i simulated in full: its plan's time and metrics from the prediction.
void record_full(RankedPlan& plan, const Prediction& p) {
  plan.iteration_time = p.timeline.iteration_time;
  plan.metrics = workload_metrics(p);
  plan.estimated = false;
}

/// The screening estimates (plan_estimate.hpp): two short simulations per candidate, or
/// the full one where M is small. Sets plans[i] (estimated unless simulated in full) and
/// done[i] for every candidate whose simulations all ran within `budget_s`.
void estimate_candidates(const std::vector<GridPoint>& points, std::int64_t global_batch, unsigned threads,
                         const std::function<void(std::size_t, std::size_t)>& progress, double budget_s,
                         std::vector<RankedPlan>& plans, std::vector<char>& done, PlanSearchResult& r) {
  struct Short {
    std::size_t candidate = 0;
    int slot = 0;  ///< 0: a, 1: b, 2: the full simulation (direct)
  };
  std::vector<GridPoint> shorts;
  std::vector<Short> owner;
  std::vector<EstimateCounts> counts(points.size());
  for (std::size_t i = 0; i < points.size(); ++i) {
    counts[i] = estimate_counts(plans[i].choice, global_batch);
    if (counts[i].direct()) {
      shorts.push_back(points[i]);
      owner.push_back({i, 2});
      continue;
    }
    shorts.push_back(GridPoint{{}, with_micro_batch_count(points[i].request, plans[i].choice, counts[i].a)});
    owner.push_back({i, 0});
    shorts.push_back(GridPoint{{}, with_micro_batch_count(points[i].request, plans[i].choice, counts[i].b)});
    owner.push_back({i, 1});
  }
  std::vector<std::array<Seconds, 2>> times(points.size());
  std::vector<std::array<WorkloadMetrics, 2>> metrics(points.size());
  const std::vector<bool> ran = run_grid_each(
      shorts, threads,
      [&](std::size_t j, std::unique_ptr<Prediction> p) {
        const Short& s = owner[j];
        if (s.slot == 2) {
          record_full(plans[s.candidate], *p);
          return;
        }
        times[s.candidate][static_cast<std::size_t>(s.slot)] = p->timeline.iteration_time;
        metrics[s.candidate][static_cast<std::size_t>(s.slot)] = workload_metrics(*p);
      },
      progress, budget_s);
  std::vector<int> missing(points.size(), 0);
  for (std::size_t j = 0; j < shorts.size(); ++j) {
    if (!ran[j]) ++missing[owner[j].candidate];
    if (owner[j].slot == 2) r.full_simulations += ran[j] ? 1 : 0;
    else r.short_simulations += ran[j] ? 1 : 0;
  }
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (missing[i] > 0) continue;
    done[i] = 1;
    if (counts[i].direct()) continue;
    RankedPlan& plan = plans[i];
    plan.iteration_time = estimate_iteration_time(counts[i], times[i][0], times[i][1]);
    plan.metrics = estimate_metrics(counts[i], metrics[i][0], times[i][0], metrics[i][1], times[i][1], plan.iteration_time);
    plan.estimated = true;
  }
}

/// The estimated candidates that must be simulated in full: those within `margin` above
/// the `top`-th fastest known time (full where simulated, else estimated), fastest first.
std::vector<std::size_t> candidates_to_simulate(const std::vector<RankedPlan>& plans, const std::vector<char>& done,
                                                std::size_t top, double margin) {
  std::vector<Seconds> known;
  for (std::size_t i = 0; i < plans.size(); ++i)
    if (done[i]) known.push_back(plans[i].iteration_time);
  if (known.empty()) return {};
  const std::size_t k = std::min(std::max<std::size_t>(top, 1), known.size()) - 1;
  std::nth_element(known.begin(), known.begin() + static_cast<std::ptrdiff_t>(k), known.end());
  const Seconds threshold = known[k] * (1 + margin);
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < plans.size(); ++i)
    if (done[i] && plans[i].estimated && plans[i].iteration_time <= threshold) out.push_back(i);
  std::stable_sort(out.begin(), out.end(), [&](std::size_t a, std::size_t b) { return plans[a].iteration_time < plans[b].iteration_time; });
  return out;
}

/// Simulates candidates `which` in full (in that order, within `budget_s`), replacing
/// their estimates.
void simulate_in_full(const std::vector<GridPoint>& points, const std::vector<std::size_t>& which, unsigned threads,
                      const std::function<void(std::size_t, std::size_t)>& progress, double budget_s,
                      std::vector<RankedPlan>& plans, std::vector<char>& done, PlanSearchResult& r) {
  std::vector<GridPoint> batch;
  batch.reserve(which.size());
  for (const std::size_t i : which) batch.push_back(points[i]);
  const std::vector<bool> ran = run_grid_each(
      batch, threads, [&](std::size_t j, std::unique_ptr<Prediction> p) { record_full(plans[which[j]], *p); }, progress,
      budget_s);
  for (std::size_t j = 0; j < which.size(); ++j) {
    if (!ran[j]) continue;
    done[which[j]] = 1;
    ++r.full_simulations;
  }
}

}  // namespace

PlanSearchResult search_parallel_plans(const PlanSearchRequest& req, const std::function<void(std::size_t, std::size_t)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  if (req.gpus < 0 || req.gpus > limits::kMaxGpus)
    throw ConfigError("gpus", "", fmt::format("expected 0 (the system's) or [1, {}], got {}", limits::kMaxGpus, req.gpus));
  if (!std::isfinite(req.timeout_s) || req.timeout_s < 0 || req.timeout_s > limits::kMaxTime)
    throw ConfigError("budget", "", fmt::format("expected 0 (none) or a time in (0, {}] s, got {}", limits::kMaxTime, req.timeout_s));
  validate_space_options(req.space);
  PlanSearchResult r;
  const ParsedInputs user = parse_inputs(req.base, req.base.overrides);
  r.resize = req.gpus > 0 ? resize_overrides(user.system, req.gpus) : std::vector<std::string>{};
  std::vector<std::string> base_overrides = req.base.overrides;
  base_overrides.insert(base_overrides.end(), r.resize.begin(), r.resize.end());
  const ParsedInputs in = r.resize.empty() ? user : parse_inputs(req.base, base_overrides);
  r.system_name = in.system.name;
  r.workload_name = in.workload.name;
  r.gpus = in.system.world_size();

  const std::vector<ScreenedChoice> screened = screen_parallelism_space(in.workload, in.system, req.space);
  const std::optional<ParallelismChoice> asked = asked_choice(in.workload, r.gpus, r.asked_unresolved);
  std::vector<GridPoint> points;
  std::vector<const ScreenedChoice*> candidates;
  for (const auto& sc : screened) {
    // The workload file's own choice is predicted even when dominated, to say how far it is from the best.
    const bool asked_and_fits = asked && sc.choice == *asked && sc.rejected.rfind("dominated", 0) == 0;
    if (!sc.rejected.empty() && !asked_and_fits) {
      r.rejected.push_back(sc);
      continue;
    }
    PredictRequest q = req.base;
    q.overrides = base_overrides;
    for (auto& o : sc.choice.overrides()) q.overrides.push_back(std::move(o));
    points.push_back(GridPoint{{}, std::move(q)});
    candidates.push_back(&sc);
  }
  // Predicted in an order that covers every TP size early (search_order.hpp), so that a
  // search cut by its budget has run the workload's own choice and the likely winners.
  {
    std::vector<ParallelismChoice> choices;
    choices.reserve(candidates.size());
    for (const auto* c : candidates) choices.push_back(c->choice);
    const std::vector<std::size_t> order = search_order(choices, in.workload.global_batch, asked);
    std::vector<GridPoint> ordered_points;
    std::vector<const ScreenedChoice*> ordered_candidates;
    for (const std::size_t i : order) {
      ordered_points.push_back(std::move(points[i]));
      ordered_candidates.push_back(candidates[i]);
    }
    points = std::move(ordered_points);
    candidates = std::move(ordered_candidates);
  }
  // The budget covers the whole search: reading and screening above come out of it.
  auto remaining_budget = [&] {
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return req.timeout_s > 0 ? std::max(req.timeout_s - spent, 1e-9) : 0.0;
  };
  std::vector<RankedPlan> plans(points.size());
  std::vector<char> done(points.size(), 0);
  for (std::size_t i = 0; i < plans.size(); ++i) {
    plans[i].choice = candidates[i]->choice;
    plans[i].max_memory_bytes = candidates[i]->max_memory_bytes;
  }
  r.exhaustive = req.exhaustive;
  if (!req.exhaustive) {
    estimate_candidates(points, in.workload.global_batch, req.threads, progress, remaining_budget(), plans, done, r);
    r.screen_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // The workload file's own choice is simulated in full wherever it ranks; then every
    // estimate close to the listed plans, again while full simulations move the threshold.
    std::vector<std::size_t> full;
    for (std::size_t i = 0; i < plans.size(); ++i)
      if (asked && plans[i].choice == *asked && done[i] && plans[i].estimated) full.push_back(i);
    for (;;) {
      for (const std::size_t i : candidates_to_simulate(plans, done, req.exact_top, req.screen_margin))
        if (std::find(full.begin(), full.end(), i) == full.end()) full.push_back(i);
      if (full.empty() || (req.timeout_s > 0 && remaining_budget() <= 1e-9)) break;
      const std::size_t before = r.full_simulations;
      simulate_in_full(points, full, req.threads, progress, remaining_budget(), plans, done, r);
      if (r.full_simulations == before) break;  // cut by the budget
      full.clear();
    }
  } else {
    std::vector<std::size_t> all(points.size());
    std::iota(all.begin(), all.end(), std::size_t{0});
    simulate_in_full(points, all, req.threads, progress, remaining_budget(), plans, done, r);
  }

  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    if (done[i]) order.push_back(i);
    else r.not_run.push_back(candidates[i]->choice);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return plans[a].iteration_time < plans[b].iteration_time; });
  for (const std::size_t i : order) r.ranked.push_back(std::move(plans[i]));
  for (std::size_t k = 1; k < r.ranked.size(); ++k) r.ranked[k].why_slower = why_slower(r.ranked[k], r.ranked[0]);

  if (asked) {
    r.asked = *asked;
    for (std::size_t k = 0; k < r.ranked.size(); ++k)
      if (r.ranked[k].choice == *asked) r.asked_rank = static_cast<int>(k);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace perfcast

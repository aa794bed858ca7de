#pragma once
/// \file plan_search.hpp
/// `perfcast plan`: the fastest Transformer parallelism on a number of GPUs. Screens the
/// space of parallelism_space.hpp, predicts every candidate (one full prediction each, on
/// a thread pool, as `predict --sweep` does), ranks them by iteration time and says for
/// each loser which part of the critical rank's iteration grew most against the best
/// (compute, exposed communication of a group, pipeline bubble, host-bound idle).
///
/// Unless `exhaustive`, each candidate is first estimated from two short simulations
/// (plan_estimate.hpp); then every candidate whose estimate is within `screen_margin` of the
/// `exact_top`-th fastest known time is simulated in full, repeated until no estimate is
/// that close. The plans listed first are therefore all simulated in full; the rest of the
/// ranking may hold estimates (RankedPlan::estimated).

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/plan_search/parallelism_space.hpp"
#include "model/predict/predict.hpp"
#include "model/report/workload_metrics.hpp"

namespace perfcast {

struct PlanSearchRequest {
  PredictRequest base;  ///< system, workload and the user's --set overrides
  int gpus = 0;         ///< 0: the system's GPUs; else resized (nodes, or GPUs of one node)
  SpaceOptions space;
  unsigned threads = 0;   ///< 0: all cores
  double timeout_s = 0;   ///< > 0: no new candidate after this wall-clock time
  /// Simulate every candidate in full (no screening estimate).
  bool exhaustive = false;
  /// The fastest this many plans are simulated in full (with screen_margin to spare).
  std::size_t exact_top = 10;
  /// A candidate whose estimate is within this share above the exact_top-th fastest known
  /// time is simulated in full. The estimate's largest error on the bundled presets is in
  /// docs/transformers.md; the margin is well above it.
  double screen_margin = 0.03;
};

struct RankedPlan {
  ParallelismChoice choice;
  Seconds iteration_time = 0;
  WorkloadMetrics metrics;  ///< tokens/s, MFU, the critical rank's breakdown (the prediction itself is not kept)
  double max_memory_bytes = 0;
  std::string why_slower;  ///< "" for the fastest; else "+12.3%: pipeline bubble +80 ms"
  /// The time and metrics are the screening estimate (plan_estimate.hpp), not a full
  /// simulation: the candidate was estimated well behind the plans simulated in full.
  bool estimated = false;
};

struct PlanSearchResult {
  std::string system_name, workload_name;
  int gpus = 0;
  std::vector<std::string> resize;  ///< the overrides that set the GPU count
  std::vector<RankedPlan> ranked;   ///< fastest first; ties in the order predicted (search_order.hpp)
  std::vector<ScreenedChoice> rejected;  ///< screened out before simulation
  std::vector<ParallelismChoice> not_run;  ///< candidates left when the timeout hit
  /// The workload file's own parallelism, when it is in the space (index into ranked; -1: not ranked).
  int asked_rank = -1;
  ParallelismChoice asked;      ///< meaningful when asked_unresolved is empty
  std::string asked_unresolved;  ///< why the workload's own parallelism does not resolve on these GPUs ("" when it does)
  double seconds = 0;  ///< wall-clock time of the search
  bool exhaustive = false;         ///< every candidate was to be simulated in full
  std::size_t short_simulations = 0;  ///< simulations run for the screening estimates
  std::size_t full_simulations = 0;   ///< candidates simulated in full
  /// Wall-clock time from the start to the end of the screening estimates (reading, the
  /// memory and shape screen and the estimates; 0 when exhaustive).
  double screen_seconds = 0;
};

/// How much of the space a search predicted: every candidate that passed screening
/// (predicted + not_run) and the TP sizes among them and among those predicted, ascending.
/// `estimated`: of those predicted, how many by the screening estimate only.
struct SearchCoverage {
  std::size_t candidates = 0, predicted = 0, not_run = 0, estimated = 0;
  std::vector<int> tp_sizes, tp_sizes_predicted;
  [[nodiscard]] bool complete() const { return not_run == 0; }
};
[[nodiscard]] SearchCoverage search_coverage(const PlanSearchResult& r);

/// The `--set` lines that resize `system` to `gpus` GPUs: whole nodes (system.nodes) when
/// `gpus` is a multiple of the GPUs per node, else one node with that many GPUs
/// (system.nodes=1, system.gpus_per_node). Throws ConfigError when gpus < 1.
[[nodiscard]] std::vector<std::string> resize_overrides(const SystemSpec& system, int gpus);

/// Runs the search. Throws ConfigError for bad input, and when the workload is not a
/// Transformer. `progress(done, total)` as run_grid.
[[nodiscard]] PlanSearchResult search_parallel_plans(const PlanSearchRequest& request,
                                                     const std::function<void(std::size_t, std::size_t)>& progress = {});

}  // namespace perfcast

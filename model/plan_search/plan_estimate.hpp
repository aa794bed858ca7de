#pragma once
/// \file plan_estimate.hpp
/// The screening estimate of `perfcast plan`: a candidate's iteration time from two short
/// simulations instead of one over all its micro-batches.
///
/// Past the first micro-batch every further one adds about the same time to a pipelined
/// iteration: the period of the slowest stage (1F1B), or of a group of pp micro-batches
/// (the interleaved schedule, which needs a multiple of pp). The estimate simulates
/// a = step and b = 2 step micro-batches (step = 1, or pp when vp > 1) with everything else
/// of the candidate unchanged, two iterations each (the full prediction simulates three and
/// reports the last period), and extends the line through them to the candidate's M:
/// T(M) ~ T(a) + (M - a) / (b - a) x (T(b) - T(a)). The warmup, cooldown, gradient reduction,
/// optimizer step and their exposure are in T(a) as simulated. What the line misses is a
/// period that changes after the first micro-batches (the interleaved warmup, contention
/// that builds up); `perfcast plan` therefore simulates in full every candidate whose
/// estimate is within a margin of the plans it lists (plan_search.hpp), and the estimate
/// only decides which candidates need no full simulation.

#include <cstdint>

#include "model/plan_search/parallelism_space.hpp"
#include "model/report/workload_metrics.hpp"

namespace perfcast {

/// The micro-batch counts a candidate's estimate simulates. `direct()`: M is so small that
/// simulating it in full costs about as much as the two short simulations (M <= 4 step);
/// then the candidate is simulated in full at once.
struct EstimateCounts {
  std::int64_t micro_batches = 0;  ///< M, the candidate's, per pipeline
  std::int64_t a = 0, b = 0;       ///< the two simulated counts (0 when direct)
  [[nodiscard]] bool direct() const { return a == 0; }
  /// (M - a) / (b - a): how many increments of T(b) - T(a) the estimate adds to T(a).
  [[nodiscard]] double increments() const { return direct() ? 0.0 : double(micro_batches - a) / double(b - a); }
};

/// The counts for `c` with `global_batch` sequences per iteration (the choice divides it:
/// screen_parallelism_space checked).
[[nodiscard]] EstimateCounts estimate_counts(const ParallelismChoice& c, std::int64_t global_batch);

/// The line through (a, ta) and (b, tb) at M: ta + increments x (tb - ta), never below tb
/// (M >= b micro-batches cannot take less than b).
[[nodiscard]] Seconds estimate_iteration_time(const EstimateCounts& n, Seconds ta, Seconds tb);

/// The figures of the estimated iteration `e` (seconds) from the metrics of the two short
/// simulations: per-iteration amounts (model FLOPs, samples, the breakdown's parts) follow
/// the same line as the time, clamped at 0; rates are those amounts over `e`.
[[nodiscard]] WorkloadMetrics estimate_metrics(const EstimateCounts& n, const WorkloadMetrics& a, Seconds ta,
                                               const WorkloadMetrics& b, Seconds tb, Seconds e);

}  // namespace perfcast

#pragma once
/// \file steady_state.hpp
/// Transformer iterations with many micro-batches: simulate a few, extrapolate the steady
/// state.
///
/// After the pipeline's warmup every further micro-batch adds the same ops to every rank
/// (1F1B: one forward and one backward per stage; the interleaved schedule: a group of pp
/// micro-batches, `step` = pp). The simulation is a deterministic max-plus evaluation, so
/// once the schedule has settled each further step adds the same time to every additive
/// figure: the iteration time, each rank's busy, exposed and idle times, each critical-path
/// entry's time and event count. perfcast simulates M0, M0 + step and M0 + 2 step
/// micro-batches; when both increments agree (to 1e-9 of the iteration time, every figure)
/// the figures for M micro-batches are those of M0 + 2 step plus (M - M0 - 2 step) / step
/// increments. When they do not agree, the schedule has not settled and every micro-batch
/// is simulated. The simulation then holds at most M0 + 2 step micro-batches in memory,
/// whatever M is: memory and time no longer grow with the global batch.

#include <array>
#include <cstdint>
#include <optional>

#include "model/graph/transformer_spec.hpp"
#include "model/sim/timeline_analysis.hpp"

namespace perfcast {

struct SteadyStateOptions {
  bool enabled = true;
  /// Smallest M0 (micro-batches of the first simulation); M0 is at least 2 x pp, the
  /// warmup and cooldown of every stage (1F1B and interleaved alike: the interleaved warmup of
  /// 2 (pp - 1) + (vp - 1) pp virtual micro-batches is under 2 pp micro-batches of vp chunks)
  /// plus as many steady-state micro-batches.
  std::int64_t min_base = 16;
  /// Increments agree when they differ by at most this share of the iteration time
  /// (negative: never, which forces the full simulation; for tests).
  double agreement = 1e-9;
  /// M0 is multiplied by this (predict retries with 4 when the increments of the first base
  /// disagree, before it simulates every micro-batch).
  std::int64_t base_scale = 1;
};

/// Which micro-batch counts to simulate for `w` (parallelism resolved).
struct SteadyStatePlan {
  std::int64_t micro_batches = 0;            ///< M, the workload's
  std::array<std::int64_t, 3> simulated{};  ///< M0, M0 + step, M0 + 2 step
  std::int64_t step = 1;                     ///< micro-batches one schedule period adds: 1, or pp when vp > 1
};

/// The plan, or nullopt when M is too small for three shorter simulations to pay
/// (M <= 3 M0 + 3 step, the micro-batches they simulate together) or extrapolation is off.
[[nodiscard]] std::optional<SteadyStatePlan> steady_state_plan(const TransformerSpec& w, const SteadyStateOptions& o);

/// `w` with `micro_batches` micro-batches per pipeline (its global batch changed).
[[nodiscard]] TransformerSpec with_micro_batches(const TransformerSpec& w, std::int64_t micro_batches);

/// True when a1 - a0 and a2 - a1 agree in every additive figure within `agreement` x a2's
/// iteration time `period`: the schedule repeats from a0 on.
[[nodiscard]] bool increments_agree(const TimelineAnalysis& a0, const TimelineAnalysis& a1, const TimelineAnalysis& a2,
                                    Seconds period, double agreement = 1e-9);

/// b + steps x (b - a), figure by figure (critical-path entries matched by label, sorted
/// longest first; times clamped at 0). `critical_events` is left empty: its indices belong
/// to a timeline, which the caller keeps or not.
[[nodiscard]] TimelineAnalysis extrapolate_analysis(const TimelineAnalysis& a, const TimelineAnalysis& b, double steps);

}  // namespace perfcast

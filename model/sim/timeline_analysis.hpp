#pragma once
/// \file timeline_analysis.hpp
/// Views computed from a finished timeline (never inside the simulation): per-rank busy
/// and idle times over each rank's own steady-state iteration, a split of that iteration
/// into compute, exposed communication per group, exposed copies and idle time, and the
/// critical path aggregated by op type.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/graph/execution_graph.hpp"
#include "model/sim/simulator.hpp"

namespace perfcast {

/// Which parallelism a collective serves, from its op name and kind (rules in
/// communication_group_of). kOther: a collective no rule names (e.g. imported traces).
enum class CommGroup { kTensor = 0, kPipeline = 1, kData = 2, kEmbedding = 3, kContext = 4, kOther = 5 };
inline constexpr int kCommGroupCount = 6;
/// "tp", "pp", "dp", "ep" (embedding / expert all-to-all), "cp" (context parallelism's
/// key/value ring), "other".
[[nodiscard]] std::string_view comm_group_name(CommGroup g);
[[nodiscard]] CommGroup communication_group_of(const Op& op, const GraphCollective& c);

/// One rank over its own steady-state iteration: the window [end of iteration L-1, end of
/// iteration L] of that rank (L = the last simulated iteration), `period` seconds long.
/// The events of iteration L are folded into the window modulo `period` (a periodic
/// schedule repeats them every period), so work the rank issued early (a batch copy
/// prefetched during the previous iteration) counts once, as it does in steady state.
/// Split of the period: compute_busy + sum(exposed_by_group) + exposed_copy + gpu_idle
/// == period (up to rounding).
struct RankBreakdown {
  int rank = 0;
  Seconds period = 0;              ///< this rank's iteration, s
  Seconds compute_busy = 0;        ///< union of compute-stream kernels
  Seconds communication_busy = 0;  ///< union of collectives
  Seconds copy_busy = 0;           ///< union of copies on the copy stream
  Seconds exposed_communication = 0;  ///< communication while the compute stream is idle
  std::array<Seconds, kCommGroupCount> exposed_by_group{};  ///< the same, per CommGroup
  Seconds exposed_copy = 0;        ///< copies while neither compute nor communication runs
  Seconds host_busy = 0;           ///< host thread issuing ops
  Seconds host_bound_idle = 0;     ///< compute stream idle because launches came late
  Seconds gpu_idle = 0;            ///< no stream busy
  Seconds critical_path = 0;       ///< time this rank's events hold the critical path
};

struct CriticalPathEntry {
  std::string label;  ///< op type: the op name with each index (digits ending the name or a component) replaced by '#'; "host: " prefix for host time
  Seconds time = 0;   ///< time ops of that type contribute to the critical path in the window
  std::int64_t count = 0;  ///< events of that type on the path (64-bit: extrapolated steady states reach billions)
};

struct TimelineAnalysis {
  std::vector<RankBreakdown> ranks;
  std::vector<CriticalPathEntry> critical_path;  ///< longest first
  Seconds critical_path_total = 0;               ///< sums to about the iteration time
  std::vector<int> critical_events;              ///< Timeline::events indices on the path, ascending
};

/// "mb3.layer12.attention.tp_reduce" -> "mb#.layer#.attention.tp_reduce"; "batch_h2d" stays.
[[nodiscard]] std::string op_type_of(std::string_view name);
/// op_type_of(name) appended to `out`.
void append_op_type(std::string& out, std::string_view name);

[[nodiscard]] TimelineAnalysis analyze_timeline(const Timeline& t, const ExecutionGraph& g);

/// Ranks the text report always shows, whatever the world size.
struct NotableRanks {
  int slowest = 0;     ///< most busy GPU time (compute + exposed communication + exposed copies)
  int critical = 0;    ///< holds the critical path longest
};
[[nodiscard]] NotableRanks notable_ranks(const TimelineAnalysis& a);

}  // namespace perfcast

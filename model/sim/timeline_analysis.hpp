#pragma once
/// \file timeline_analysis.hpp
/// Views computed from a finished timeline (never inside the simulation): per-rank busy
/// and idle times in the steady-state window, and the critical path.

#include <string>
#include <vector>

#include "model/graph/execution_graph.hpp"
#include "model/sim/simulator.hpp"

namespace perfcast {

/// Times inside the steady-state window [Timeline::window_start, window_end].
struct RankBreakdown {
  int rank = 0;
  Seconds compute_busy = 0;        ///< union of compute-stream kernels
  Seconds communication_busy = 0;  ///< union of collectives
  Seconds copy_busy = 0;           ///< union of copies on the copy stream
  Seconds exposed_communication = 0;  ///< communication while the compute stream is idle
  Seconds host_busy = 0;           ///< host thread issuing ops
  Seconds host_bound_idle = 0;     ///< compute stream idle because launches came late
  Seconds gpu_idle = 0;            ///< no stream busy
};

struct CriticalPathEntry {
  std::string label;  ///< op name; "host: <op>" for host time
  Seconds time = 0;   ///< time the op contributes to the critical path in the window
  int count = 0;      ///< events of that label on the path
};

struct TimelineAnalysis {
  std::vector<RankBreakdown> ranks;
  std::vector<CriticalPathEntry> critical_path;  ///< longest first
  Seconds critical_path_total = 0;               ///< sums to about the iteration time
};

[[nodiscard]] TimelineAnalysis analyze_timeline(const Timeline& t, const ExecutionGraph& g);

}  // namespace perfcast

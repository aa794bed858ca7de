#pragma once
/// \file link_contention.hpp
/// Bandwidth sharing between transfers that overlap on the same link: a fluid model with
/// max-min fair rates (the flow-level model of SimGrid's LMM solver, docs/collectives.md
/// section 5.4, without its latency and TCP-window corrections).

#include <vector>

#include "core/units.hpp"

namespace perfcast {

/// One transfer. Alone it runs at speed 1 and takes `work` seconds; on each resource it
/// uses, it then takes `share` of that resource's capacity (0 < share <= 1; a copy bound
/// by the PCIe link uses 1, a collective whose network phase keeps the NIC busy 30% of its
/// time uses 0.3).
struct ContentionFlow {
  Seconds start = 0;
  Seconds work = 0;
  struct Use {
    int resource = 0;
    double share = 1.0;
  };
  std::vector<Use> uses;
};

/// Rates of the flows active together: max-min fair on bandwidth (progressive filling: every
/// flow's bandwidth on its most used resource rises at the same pace until a resource is
/// full or the flow reaches its solo speed). Returns speeds in (0, 1], one per flow.
[[nodiscard]] std::vector<double> max_min_speeds(const std::vector<const ContentionFlow*>& active);

/// Finish time of every flow when each progresses at its max-min speed among the flows
/// active at each moment (starts fixed). A flow that overlaps nothing finishes at
/// start + work.
[[nodiscard]] std::vector<Seconds> fluid_finish_times(const std::vector<ContentionFlow>& flows);

/// Whether any two flows that share a resource overlap in time at their solo durations.
[[nodiscard]] bool any_overlap(const std::vector<ContentionFlow>& flows);

}  // namespace perfcast

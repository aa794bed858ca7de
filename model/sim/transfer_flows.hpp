#pragma once
/// \file transfer_flows.hpp
/// The transfers of a simulated timeline as contention flows (internal to model/sim): the
/// input of the simulator's contention passes (link_contention.hpp).

#include <vector>

#include "model/sim/link_contention.hpp"
#include "model/sim/simulator.hpp"

namespace perfcast::sim {

/// The transfers of a timeline as contention flows, and the events each one drives.
struct FlowSet {
  std::vector<ContentionFlow> flows;
  std::vector<std::vector<int>> events;  ///< per flow
};

/// Host<->device copies (one flow each, filling their PCIe direction) and collectives
/// with NIC or PCIe traffic (one flow per instance, using each member rank's NIC and PCIe
/// at the shares their estimate gives), at their solo durations from the events' starts.
/// A NIC and a PCIe link are two resources each, one per direction: a point-to-point
/// transfer uses the sender's outgoing and the receiver's incoming side, any other
/// collective both sides of every member.
[[nodiscard]] FlowSet transfer_flows(const TimedGraph& tg, const std::vector<TimelineEvent>& events);

/// Whether any two transfers of `events` overlap in time on a shared resource at their
/// solo durations: exactly any_overlap(transfer_flows(tg, events).flows), without building
/// the flows. The spans are those transfer_flows gives each resource (a flow's span on
/// each resource it uses; the members of a collective instance add their own rank's
/// resources, so grouping them into one flow adds no span), and they are sorted by
/// (start, end) per resource and swept as any_overlap does. Most graphs have nothing that
/// shares a link, and this check is all their contention handling costs.
[[nodiscard]] bool transfers_overlap(const TimedGraph& tg, const std::vector<TimelineEvent>& events);

}  // namespace perfcast::sim

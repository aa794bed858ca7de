/// \file sim_rendezvous.cpp
/// Collectives in the simulator: a collective instance starts on every rank of its group
/// when the last member is ready (launch issued, stream free, inputs ready).

#include <algorithm>

#include <fmt/format.h>

#include "model/sim/sim_engine.hpp"

namespace perfcast::sim {

CollectiveRendezvous::CollectiveRendezvous(const TimedGraph& tg, EventLog& log, const DurationOverrides& overrides)
    : tg_(tg), g_(*tg.graph), log_(log), overrides_(overrides) {
  group_size_.reserve(g_.groups.size());
  // Mirrored ranks (symmetric simulation) do not arrive: their representative's arrival
  // stands for theirs.
  for (const auto& grp : g_.groups) {
    int simulated = 0;
    for (int r : grp.ranks) simulated += g_.simulated(r);
    group_size_.push_back(simulated);
  }
  arrivals_.resize(g_.groups.size());
}

std::string CollectiveRendezvous::collective_label(int c) const {
  for (const auto& prog : g_.ranks)
    for (const auto& op : prog.ops)
      if (op.collective && *op.collective == c) return op.name;
  return "?";
}

void CollectiveRendezvous::arrive(int rank, RankCursor& st, int collective, int event) {
  const GraphCollective& c = g_.collectives[static_cast<std::size_t>(collective)];
  const auto grp = static_cast<std::size_t>(c.group);
  const auto seq = static_cast<std::size_t>(st.coll_seq[grp]++);
  const auto& members = g_.groups[grp].ranks;
  const std::string& op_name = g_.ranks[static_cast<std::size_t>(rank)].ops[static_cast<std::size_t>(st.op)].name;
  if (std::find(members.begin(), members.end(), rank) == members.end()) {
    throw SimulationError(fmt::format("rank {} issues \"{}\" on group {}, which it is not a member of", rank, op_name, c.group));
  }
  if (group_size_[grp] == 1) {
    // The group's only simulated member (a mirrored group, or one rank): nobody to wait for,
    // so the event starts where it stands, as start_instance would set it, without keeping
    // an arrival record.
    const Seconds model = tg_.collectives[static_cast<std::size_t>(collective)].time;
    TimelineEvent& ev = log_.at(event);
    ev.end = ev.start + (overrides_.any() ? std::max(model, overrides_.of(static_cast<std::size_t>(event), model)) : model);
    return;
  }
  auto& group_arrivals = arrivals_[grp];
  if (seq >= group_arrivals.size()) group_arrivals.resize(seq + 1);
  Arrival& a = group_arrivals[seq];
  if (a.arrived == 0) {
    a.collective = collective;
    a.first_rank = rank;
    a.events.reserve(static_cast<std::size_t>(group_size_[grp]));
  } else if (a.collective != collective) {
    throw SimulationError(fmt::format(
        "collective mismatch: rank {} issues \"{}\" where rank {} issued \"{}\" (the same position in group {})", rank,
        op_name, a.first_rank, collective_label(a.collective), c.group));
  }
  a.arrived++;
  a.events.push_back(event);
  const Seconds ready = log_.at(event).start;
  if (ready > a.max_ready) {
    a.max_ready = ready;
    a.max_event = event;
  }
  if (a.arrived < group_size_[grp]) return;
  start_instance(a, collective);
}

void CollectiveRendezvous::start_instance(Arrival& a, int collective) {
  Seconds duration = tg_.collectives[static_cast<std::size_t>(collective)].time;
  if (overrides_.any()) {
    // Every member event of a contended instance carries the same stretched duration.
    const Seconds model = duration;
    for (int e : a.events) duration = std::max(duration, overrides_.of(static_cast<std::size_t>(e), model));
  }
  for (int e : a.events) {
    TimelineEvent& ev = log_.at(e);
    if (e != a.max_event) {
      ev.binding = Binding::kPeer;
      ev.cause = a.max_event;
      ev.host_delay = 0;
    }
    ev.start = a.max_ready;
    ev.end = a.max_ready + duration;
  }
  a.events = {};  // done: nobody arrives here again
}

}  // namespace perfcast::sim

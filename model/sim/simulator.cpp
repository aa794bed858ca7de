#include "model/sim/simulator.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>
#include <variant>

#include <fmt/format.h>

#include "model/sim/link_contention.hpp"

namespace perfcast {
namespace {

constexpr double kUnresolved = std::numeric_limits<double>::quiet_NaN();

struct Arrival {
  int collective = -1;       ///< ExecutionGraph::collectives index the first rank issued
  int first_rank = -1;
  int arrived = 0;
  Seconds max_ready = -std::numeric_limits<double>::infinity();
  int max_event = -1;        ///< event of the rank that arrived last in time
  std::vector<int> events;   ///< one per arrived rank
};

struct RankState {
  int iter = 0;
  int op = 0;
  Seconds host = 0;
  Binding host_binding = Binding::kNone;
  int host_cause = -1;
  std::array<int, kStreamCount> stream_last{-1, -1, -1};
  std::vector<int> op_last_event;  ///< current iteration, per op
  std::vector<int> coll_seq;       ///< per group: collectives issued so far
  int waiting_event = -1;          ///< host blocked on an unresolved event
  bool done = false;
};

class Engine {
 public:
  /// `durations`: per event index, a duration that replaces the model's (contention
  /// passes); NaN or absent: the model's.
  /// `storage`: a finished timeline whose buffers this run reuses (its contents are dropped).
  Engine(const TimedGraph& tg, const HostSpec& host, int iterations, const std::vector<Seconds>* durations = nullptr,
         Timeline storage = {})
      : tg_(tg), g_(*tg.graph), host_(host), iterations_(iterations), durations_(durations),
        events_(std::move(storage.events)), iteration_end_(std::move(storage.iteration_end)) {
    events_.clear();
    const std::size_t world = g_.ranks.size();
    states_.resize(world);
    for (std::size_t r = 0; r < world; ++r) {
      states_[r].op_last_event.assign(g_.ranks[r].ops.size(), -1);
      states_[r].coll_seq.assign(g_.groups.size(), 0);
      if (g_.ranks[r].ops.empty()) states_[r].done = true;
    }
    group_size_.reserve(g_.groups.size());
    for (const auto& grp : g_.groups) group_size_.push_back(grp.size());
    arrivals_.resize(g_.groups.size());
  }

  Timeline run() {
    std::size_t per_iteration = 0;
    for (const auto& prog : g_.ranks)
      for (const auto& op : prog.ops) per_iteration += 1 + std::max<std::size_t>(op.kernels.size(), 1);
    events_.reserve(per_iteration * static_cast<std::size_t>(iterations_));
    bool progress = true;
    while (progress) {
      progress = false;
      for (std::size_t r = 0; r < states_.size(); ++r) {
        while (step(static_cast<int>(r))) progress = true;
      }
    }
    for (std::size_t r = 0; r < states_.size(); ++r) {
      const RankState& st = states_[r];
      if (!st.done) {
        throw SimulationError(fmt::format(
            "deadlock: rank {} cannot go on at op \"{}\" of iteration {}; its collectives do not match the other "
            "ranks' (different order or group)",
            r, g_.ranks[r].ops[static_cast<std::size_t>(st.op)].name, st.iter));
      }
    }
    return finish();
  }

 private:
  /// Host time of an op without a measured one: backward (autograd) ops pay
  /// HostSpec::backward_op_overhead when set, every other op op_overhead.
  [[nodiscard]] Seconds host_op_overhead(const Op& op) const {
    if (op.phase == Phase::kBackward && !op.recompute && host_.backward_op_overhead) return *host_.backward_op_overhead;
    return host_.op_overhead;
  }

  const TimedGraph& tg_;
  const ExecutionGraph& g_;
  HostSpec host_;
  int iterations_;
  const std::vector<Seconds>* durations_;
  std::vector<RankState> states_;
  std::vector<int> group_size_;
  std::vector<TimelineEvent> events_;
  std::vector<std::vector<Seconds>> iteration_end_;  ///< storage for Timeline::iteration_end
  /// [group][n]: the n-th collective instance issued on that group (the same position in
  /// every member's sequence), while ranks arrive at it.
  std::vector<std::vector<Arrival>> arrivals_;

  /// Duration of event `e`: the contention pass's if it set one, else `model`.
  [[nodiscard]] Seconds duration_of(std::size_t e, Seconds model) const {
    if (durations_ == nullptr || e >= durations_->size() || std::isnan((*durations_)[e])) return model;
    return (*durations_)[e];
  }

  [[nodiscard]] bool resolved(int e) const { return e < 0 || !std::isnan(events_[static_cast<std::size_t>(e)].end); }
  [[nodiscard]] Seconds end_of(int e) const { return e < 0 ? 0.0 : events_[static_cast<std::size_t>(e)].end; }

  int push(TimelineEvent ev) {
    events_.push_back(ev);
    return static_cast<int>(events_.size()) - 1;
  }

  void wait_host(RankState& st, int e) {
    const Seconds end = end_of(e);
    if (end > st.host) {
      st.host = end;
      st.host_binding = Binding::kDependency;
      st.host_cause = e;
    }
  }

  void advance(RankState& st, int rank) {
    if (++st.op == static_cast<int>(g_.ranks[static_cast<std::size_t>(rank)].ops.size())) {
      st.op = 0;
      std::fill(st.op_last_event.begin(), st.op_last_event.end(), -1);
      if (++st.iter == iterations_) st.done = true;
    }
  }

  /// Start of a GPU event from its three constraints, with the binding one recorded.
  void place(TimelineEvent& ev, Seconds launch, int seg, int stream_last, Seconds deps_end, int dep_event) {
    const Seconds stream_free = end_of(stream_last);
    ev.launch = launch;
    ev.start = launch;
    ev.binding = Binding::kHost;
    ev.cause = seg;
    if (stream_free > ev.start) {
      ev.start = stream_free;
      ev.binding = Binding::kStream;
      ev.cause = stream_last;
    }
    if (dep_event >= 0 && deps_end > ev.start) {
      ev.start = deps_end;
      ev.binding = Binding::kDependency;
      ev.cause = dep_event;
    }
    ev.host_delay = std::max(0.0, launch - std::max(stream_free, dep_event >= 0 ? deps_end : 0.0));
    if (ev.binding != Binding::kHost) ev.host_delay = 0;
  }

  bool step(int rank) {
    RankState& st = states_[static_cast<std::size_t>(rank)];
    if (st.done) return false;
    if (st.waiting_event >= 0) {
      if (!resolved(st.waiting_event)) return false;
      wait_host(st, st.waiting_event);
      st.waiting_event = -1;
      advance(st, rank);
      return true;
    }
    const Op& op = g_.ranks[static_cast<std::size_t>(rank)].ops[static_cast<std::size_t>(st.op)];
    const OpTiming& timing = tg_.ops[static_cast<std::size_t>(rank)][static_cast<std::size_t>(st.op)];
    const auto s = static_cast<std::size_t>(op.stream);
    if (!resolved(st.stream_last[s])) return false;
    Seconds deps_end = 0;
    int dep_event = -1;
    for (int d : op.deps) {
      const int e = st.op_last_event[static_cast<std::size_t>(d)];
      if (!resolved(e)) return false;
      if (e >= 0 && (dep_event < 0 || end_of(e) > deps_end)) {
        deps_end = end_of(e);
        dep_event = e;
      }
    }

    // Host segment: the op's Python/dispatcher cost and its launches.
    TimelineEvent seg;
    seg.rank = rank;
    seg.iteration = st.iter;
    seg.op = st.op;
    seg.lane = Lane::kHost;
    seg.start = st.host;
    seg.binding = st.host_binding;
    seg.cause = st.host_cause;
    const int seg_idx = push(seg);
    st.host += timing.host_time.value_or(host_op_overhead(op));

    int last = -1;
    if (op.collective) {
      st.host += host_.launch_overhead;
      TimelineEvent ev;
      ev.rank = rank;
      ev.iteration = st.iter;
      ev.op = st.op;
      ev.lane = Lane::kComm;
      place(ev, st.host, seg_idx, st.stream_last[s], deps_end, dep_event);
      ev.end = kUnresolved;  // set when every rank of the group has arrived
      last = push(ev);
      arrive(rank, *op.collective, last);
    } else {
      for (std::size_t k = 0; k < op.kernels.size(); ++k) {
        const Estimate& est = timing.kernels[k];
        st.host += host_.launch_overhead * est.launches;
        TimelineEvent ev;
        ev.rank = rank;
        ev.iteration = st.iter;
        ev.op = st.op;
        ev.kernel = static_cast<int>(k);
        ev.lane = lane_of(op.stream);
        place(ev, st.host, seg_idx, st.stream_last[s], k == 0 ? deps_end : 0.0, k == 0 ? dep_event : -1);
        ev.end = ev.start + duration_of(events_.size(), est.time);
        last = push(ev);
        st.stream_last[s] = last;
      }
    }
    if (last >= 0) st.stream_last[s] = last;
    // An op without GPU work passes its inputs on: its consumers wait for them.
    st.op_last_event[static_cast<std::size_t>(st.op)] = last >= 0 ? last : dep_event;
    events_[static_cast<std::size_t>(seg_idx)].end = st.host;
    st.host_binding = Binding::kStream;
    st.host_cause = seg_idx;

    if (op.host_waits) {
      if (!resolved(last)) {
        st.waiting_event = last;
        return true;
      }
      wait_host(st, last);
    }
    advance(st, rank);
    return true;
  }

  /// Name of the first op that issues collective `c` (for messages).
  std::string collective_label(int c) const {
    for (const auto& prog : g_.ranks)
      for (const auto& op : prog.ops)
        if (op.collective && *op.collective == c) return op.name;
    return "?";
  }

  void arrive(int rank, int collective, int event) {
    const GraphCollective& c = g_.collectives[static_cast<std::size_t>(collective)];
    RankState& st = states_[static_cast<std::size_t>(rank)];
    const auto grp = static_cast<std::size_t>(c.group);
    const auto seq = static_cast<std::size_t>(st.coll_seq[grp]++);
    const auto& members = g_.groups[grp].ranks;
    if (std::find(members.begin(), members.end(), rank) == members.end()) {
      throw SimulationError(fmt::format("rank {} issues \"{}\" on group {}, which it is not a member of", rank,
                                        g_.ranks[static_cast<std::size_t>(rank)].ops[static_cast<std::size_t>(st.op)].name,
                                        c.group));
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
          g_.ranks[static_cast<std::size_t>(rank)].ops[static_cast<std::size_t>(st.op)].name, a.first_rank,
          collective_label(a.collective), c.group));
    }
    a.arrived++;
    a.events.push_back(event);
    const Seconds ready = events_[static_cast<std::size_t>(event)].start;
    if (ready > a.max_ready) {
      a.max_ready = ready;
      a.max_event = event;
    }
    if (a.arrived < group_size_[grp]) return;
    Seconds duration = tg_.collectives[static_cast<std::size_t>(collective)].time;
    if (durations_ != nullptr) {
      // Every member event of a contended instance carries the same stretched duration.
      const Seconds model = duration;
      for (int e : a.events) duration = std::max(duration, duration_of(static_cast<std::size_t>(e), model));
    }
    for (int e : a.events) {
      TimelineEvent& ev = events_[static_cast<std::size_t>(e)];
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

  Timeline finish() {
    Timeline t;
    t.world = static_cast<int>(states_.size());
    t.iterations = iterations_;
    t.iteration_end = std::move(iteration_end_);
    t.iteration_end.resize(states_.size());
    for (auto& ends : t.iteration_end) ends.assign(static_cast<std::size_t>(iterations_), 0.0);
    for (const auto& e : events_) {
      auto& slot = t.iteration_end[static_cast<std::size_t>(e.rank)][static_cast<std::size_t>(e.iteration)];
      slot = std::max(slot, e.end);
    }
    // A host that runs ahead keeps later iterations' ends ordered.
    for (auto& ends : t.iteration_end)
      for (std::size_t k = 1; k < ends.size(); ++k) ends[k] = std::max(ends[k], ends[k - 1]);
    for (const auto& ends : t.iteration_end) {
      t.window_start = std::max(t.window_start, ends[ends.size() - 2]);
      t.window_end = std::max(t.window_end, ends.back());
    }
    t.iteration_time = t.window_end - t.window_start;
    t.events = std::move(events_);
    return t;
  }
};

}  // namespace

Lane lane_of(Stream s) {
  switch (s) {
    case Stream::kCompute: return Lane::kCompute;
    case Stream::kComm: return Lane::kComm;
    case Stream::kCopy: return Lane::kCopy;
  }
  return Lane::kCompute;
}

std::string_view lane_name(Lane l) {
  switch (l) {
    case Lane::kHost: return "host";
    case Lane::kCompute: return "compute";
    case Lane::kComm: return "communication";
    case Lane::kCopy: return "copy";
  }
  return "?";
}

namespace {

/// Resources of one rank: its NIC share and the two directions of its PCIe link.
enum LinkResource { kNic = 0, kPcieToDevice = 1, kPcieToHost = 2 };
constexpr int kResourcesPerRank = 3;

/// The transfers of a timeline as contention flows, and the events each one drives.
struct FlowSet {
  std::vector<ContentionFlow> flows;
  std::vector<std::vector<int>> events;  ///< per flow
};

FlowSet transfer_flows(const TimedGraph& tg, const std::vector<TimelineEvent>& events) {
  const ExecutionGraph& g = *tg.graph;
  FlowSet fs;
  // Collective instances: member events share collective, iteration and start.
  std::map<std::tuple<int, int, Seconds>, std::size_t> instance;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const TimelineEvent& ev = events[i];
    if (ev.lane == Lane::kHost) continue;
    const Op& op = g.ranks[static_cast<std::size_t>(ev.rank)].ops[static_cast<std::size_t>(ev.op)];
    if (ev.kernel >= 0) {
      const auto* copy = std::get_if<MemcpyDesc>(&op.kernels[static_cast<std::size_t>(ev.kernel)]);
      if (copy == nullptr || copy->kind == CopyKind::kDeviceToDevice) continue;
      const Estimate& est =
          tg.ops[static_cast<std::size_t>(ev.rank)][static_cast<std::size_t>(ev.op)].kernels[static_cast<std::size_t>(ev.kernel)];
      // A host<->device copy runs at the PCIe link's achievable rate: it fills it.
      const int res = ev.rank * kResourcesPerRank + (copy->kind == CopyKind::kHostToDevice ? kPcieToDevice : kPcieToHost);
      fs.flows.push_back(ContentionFlow{ev.start, est.time, {{res, 1.0}}});
      fs.events.push_back({static_cast<int>(i)});
    } else if (op.collective) {
      const CollectiveEstimate& est = tg.collectives[static_cast<std::size_t>(*op.collective)];
      if (est.time <= 0 || (est.nic_busy <= 0 && est.pcie_busy <= 0)) continue;
      const auto key = std::make_tuple(*op.collective, ev.iteration, ev.start);
      auto [it, fresh] = instance.try_emplace(key, fs.flows.size());
      if (fresh) {
        fs.flows.push_back(ContentionFlow{ev.start, est.time, {}});
        fs.events.emplace_back();
      }
      ContentionFlow& f = fs.flows[it->second];
      const double nic = std::min(1.0, est.nic_busy / est.time);
      const double pcie = std::min(1.0, est.pcie_busy / est.time);
      const int base = ev.rank * kResourcesPerRank;
      if (nic > 0) f.uses.push_back({base + kNic, nic});
      if (pcie > 0) {
        f.uses.push_back({base + kPcieToDevice, pcie});
        f.uses.push_back({base + kPcieToHost, pcie});
      }
      fs.events[it->second].push_back(static_cast<int>(i));
    }
  }
  return fs;
}

/// Whether any two transfers of `events` overlap in time on a shared resource at their
/// solo durations: exactly any_overlap(transfer_flows(tg, events).flows), without building
/// the flows. The spans are those transfer_flows gives each resource (a flow's span on
/// each resource it uses; the members of a collective instance add their own rank's
/// resources, so grouping them into one flow adds no span), and they are sorted by
/// (start, end) per resource and swept as any_overlap does. Most graphs have nothing that
/// shares a link, and this check is all their contention handling costs.
bool transfers_overlap(const TimedGraph& tg, const std::vector<TimelineEvent>& events) {
  const ExecutionGraph& g = *tg.graph;
  struct Span {
    int resource;
    Seconds start, end;
  };
  std::vector<Span> spans;
  for (const TimelineEvent& ev : events) {
    if (ev.lane == Lane::kHost) continue;
    const Op& op = g.ranks[static_cast<std::size_t>(ev.rank)].ops[static_cast<std::size_t>(ev.op)];
    const int base = ev.rank * kResourcesPerRank;
    if (ev.kernel >= 0) {
      const auto* copy = std::get_if<MemcpyDesc>(&op.kernels[static_cast<std::size_t>(ev.kernel)]);
      if (copy == nullptr || copy->kind == CopyKind::kDeviceToDevice) continue;
      const Seconds work =
          tg.ops[static_cast<std::size_t>(ev.rank)][static_cast<std::size_t>(ev.op)].kernels[static_cast<std::size_t>(ev.kernel)].time;
      if (work <= 0) continue;
      spans.push_back({base + (copy->kind == CopyKind::kHostToDevice ? kPcieToDevice : kPcieToHost), ev.start, ev.start + work});
    } else if (op.collective) {
      const CollectiveEstimate& est = tg.collectives[static_cast<std::size_t>(*op.collective)];
      if (est.time <= 0 || (est.nic_busy <= 0 && est.pcie_busy <= 0)) continue;
      const Seconds end = ev.start + est.time;
      if (std::min(1.0, est.nic_busy / est.time) > 0) spans.push_back({base + kNic, ev.start, end});
      if (std::min(1.0, est.pcie_busy / est.time) > 0) {
        spans.push_back({base + kPcieToDevice, ev.start, end});
        spans.push_back({base + kPcieToHost, ev.start, end});
      }
    }
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return std::tie(a.resource, a.start, a.end) < std::tie(b.resource, b.start, b.end);
  });
  Seconds end = -std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < spans.size(); ++i) {
    if (i > 0 && spans[i].resource != spans[i - 1].resource) end = -std::numeric_limits<double>::infinity();
    if (spans[i].start < end) return true;
    end = std::max(end, spans[i].end);
  }
  return false;
}

}  // namespace

Timeline simulate(const TimedGraph& graph, const HostSpec& host, const SimulationOptions& options) {
  return simulate(graph, host, options, Timeline{});
}

Timeline simulate(const TimedGraph& graph, const HostSpec& host, const SimulationOptions& options, Timeline&& recycled) {
  if (options.iterations < 2) throw std::invalid_argument("simulate: at least 2 iterations are needed for a steady-state period");
  Timeline t = Engine(graph, host, options.iterations, nullptr, std::move(recycled)).run();
  if (!options.contention) return t;
  if (!transfers_overlap(graph, t.events)) return t;  // nothing shares a link: solo speeds hold
  std::vector<Seconds> durations;
  for (int pass = 0; pass < options.contention_passes; ++pass) {
    const FlowSet fs = transfer_flows(graph, t.events);
    const std::vector<Seconds> finish = fluid_finish_times(fs.flows);
    std::vector<Seconds> next(t.events.size(), std::numeric_limits<double>::quiet_NaN());
    for (std::size_t f = 0; f < fs.flows.size(); ++f)
      for (int e : fs.events[f]) next[static_cast<std::size_t>(e)] = finish[f] - fs.flows[f].start;
    bool same = durations.size() == next.size();
    for (std::size_t e = 0; same && e < next.size(); ++e) {
      const bool a = std::isnan(next[e]), b = std::isnan(durations[e]);
      same = a == b && (a || std::abs(next[e] - durations[e]) <= 1e-12 + 1e-9 * std::abs(next[e]));
    }
    if (same) break;  // a fixed point: the durations reproduce the starts that made them
    durations = std::move(next);
    t = Engine(graph, host, options.iterations, &durations).run();
  }
  return t;
}

}  // namespace perfcast

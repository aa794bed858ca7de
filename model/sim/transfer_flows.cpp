/// \file transfer_flows.cpp
/// Timeline transfers as contention flows, and the quick check whether any overlap.

#include "model/sim/transfer_flows.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <tuple>
#include <unordered_map>
#include <variant>

namespace perfcast::sim {
namespace {

/// Resources of one rank: the two directions of its NIC and of its PCIe link (InfiniBand, RoCE,
/// EFA and PCIe links are full duplex: a rank sending at line rate can receive at line rate too).
enum LinkResource { kNicSend = 0, kNicReceive = 1, kPcieToDevice = 2, kPcieToHost = 3 };
constexpr int kResourcesPerRank = 4;

/// Which directions of `rank`'s NIC and PCIe link a collective loads. A point-to-point
/// transfer (a 2-rank all-to-allv whose bytes go one way, as the pipeline and context-parallel
/// sends are built) loads the sender's outgoing side (NIC send; PCIe device-to-host, the GPU's
/// memory read by the NIC) and the receiver's incoming side (NIC receive; PCIe host-to-device)
/// only. Every other collective sends and receives alike on each member (ring, tree and
/// all-to-all steps), so loads both sides at the same share: two such collectives contend
/// exactly as on one shared link.
struct LinkSides {
  bool send = true, receive = true;
};

LinkSides link_sides(const ExecutionGraph& g, int collective, int rank) {
  const GraphCollective& c = g.collectives[static_cast<std::size_t>(collective)];
  const auto& members = g.groups[static_cast<std::size_t>(c.group)].ranks;
  if (c.desc.kind != CollectiveKind::kAllToAllV || members.size() != 2 || c.desc.pair_bytes.size() != 4) return {};
  const std::size_t me = members[0] == rank ? 0 : 1, peer = 1 - me;
  const double sent = c.desc.pair_bytes[me * 2 + peer], received = c.desc.pair_bytes[peer * 2 + me];
  if ((sent > 0) == (received > 0)) return {};  // both ways (an exchange), or neither
  return {sent > 0, received > 0};
}

/// A collective instance: its collective, iteration and start (members share all three).
struct InstanceKey {
  int collective = 0, iteration = 0;
  Seconds start = 0;
  bool operator==(const InstanceKey& o) const { return collective == o.collective && iteration == o.iteration && start == o.start; }
};

struct InstanceKeyHash {
  std::size_t operator()(const InstanceKey& k) const {
    const std::size_t h = std::hash<int>{}(k.collective) * 0x9e3779b97f4a7c15ULL ^ std::hash<int>{}(k.iteration);
    return h * 0x9e3779b97f4a7c15ULL ^ std::hash<double>{}(k.start);
  }
};

/// Per rank and op, whether the op can load a PCIe link or a NIC (a host<->device copy; a
/// collective with NIC or PCIe traffic), marked once: most events belong to neither and are
/// skipped unread. Empty when no op can.
std::vector<std::vector<char>> ops_that_load_links(const TimedGraph& tg) {
  const ExecutionGraph& g = *tg.graph;
  std::vector<std::vector<char>> may_load(g.ranks.size());
  bool any = false;
  for (std::size_t r = 0; r < g.ranks.size(); ++r) {
    const auto& ops = g.ranks[r].ops;
    may_load[r].assign(ops.size(), 0);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      bool loads = false;
      if (ops[i].collective) {
        const CollectiveEstimate& est = tg.collectives[static_cast<std::size_t>(*ops[i].collective)];
        loads = est.time > 0 && (est.nic_busy > 0 || est.pcie_busy > 0);
      }
      for (const auto& k : ops[i].kernels) {
        const auto* copy = std::get_if<MemcpyDesc>(&k);
        loads = loads || (copy != nullptr && copy->kind != CopyKind::kDeviceToDevice);
      }
      may_load[r][i] = loads ? 1 : 0;
      any = any || loads;
    }
  }
  if (!any) may_load.clear();
  return may_load;
}

}  // namespace

FlowSet transfer_flows(const TimedGraph& tg, const std::vector<TimelineEvent>& events) {
  const ExecutionGraph& g = *tg.graph;
  FlowSet fs;
  // Collective instances: member events share collective, iteration and start.
  std::unordered_map<InstanceKey, std::size_t, InstanceKeyHash> instance;
  const auto may_load = ops_that_load_links(tg);
  if (may_load.empty()) return fs;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const TimelineEvent& ev = events[i];
    if (ev.lane == Lane::kHost || !may_load[static_cast<std::size_t>(ev.rank)][static_cast<std::size_t>(ev.op)]) continue;
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
      const InstanceKey key{*op.collective, ev.iteration, ev.start};
      auto [it, fresh] = instance.try_emplace(key, fs.flows.size());
      if (fresh) {
        fs.flows.push_back(ContentionFlow{ev.start, est.time, {}});
        fs.events.emplace_back();
      }
      ContentionFlow& f = fs.flows[it->second];
      const double nic = std::min(1.0, est.nic_busy / est.time);
      const double pcie = std::min(1.0, est.pcie_busy / est.time);
      const int base = ev.rank * kResourcesPerRank;
      const LinkSides sides = link_sides(g, *op.collective, ev.rank);
      if (nic > 0 && sides.send) f.uses.push_back({base + kNicSend, nic});
      if (nic > 0 && sides.receive) f.uses.push_back({base + kNicReceive, nic});
      if (pcie > 0 && sides.receive) f.uses.push_back({base + kPcieToDevice, pcie});
      if (pcie > 0 && sides.send) f.uses.push_back({base + kPcieToHost, pcie});
      fs.events[it->second].push_back(static_cast<int>(i));
    }
  }
  return fs;
}

bool transfers_overlap(const TimedGraph& tg, const std::vector<TimelineEvent>& events) {
  const ExecutionGraph& g = *tg.graph;
  struct Span {
    int resource;
    Seconds start, end;
  };
  std::vector<Span> spans;
  const auto may_load = ops_that_load_links(tg);
  if (may_load.empty()) return false;
  for (const TimelineEvent& ev : events) {
    if (ev.lane == Lane::kHost || !may_load[static_cast<std::size_t>(ev.rank)][static_cast<std::size_t>(ev.op)]) continue;
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
      const LinkSides sides = link_sides(g, *op.collective, ev.rank);
      if (std::min(1.0, est.nic_busy / est.time) > 0) {
        if (sides.send) spans.push_back({base + kNicSend, ev.start, end});
        if (sides.receive) spans.push_back({base + kNicReceive, ev.start, end});
      }
      if (std::min(1.0, est.pcie_busy / est.time) > 0) {
        if (sides.receive) spans.push_back({base + kPcieToDevice, ev.start, end});
        if (sides.send) spans.push_back({base + kPcieToHost, ev.start, end});
      }
    }
  }
  // Bucketed by resource (a counting sort), then each resource's spans by start: the same
  // order as one sort by (resource, start, end), at a fraction of its comparisons (the
  // sharding search checks every plan it simulates).
  const std::size_t resources = g.ranks.size() * kResourcesPerRank;
  std::vector<std::size_t> first(resources + 1, 0);
  for (const Span& sp : spans) ++first[static_cast<std::size_t>(sp.resource) + 1];
  for (std::size_t r = 0; r < resources; ++r) first[r + 1] += first[r];
  std::vector<Span> by_resource(spans.size());
  std::vector<std::size_t> next(first.begin(), first.end() - 1);
  for (const Span& sp : spans) by_resource[next[static_cast<std::size_t>(sp.resource)]++] = sp;
  for (std::size_t r = 0; r < resources; ++r) {
    const auto begin = by_resource.begin() + static_cast<std::ptrdiff_t>(first[r]);
    const auto stop = by_resource.begin() + static_cast<std::ptrdiff_t>(first[r + 1]);
    if (stop - begin < 2) continue;
    std::sort(begin, stop, [](const Span& a, const Span& b) { return std::tie(a.start, a.end) < std::tie(b.start, b.end); });
    Seconds end = -std::numeric_limits<double>::infinity();
    for (auto it = begin; it != stop; ++it) {
      if (it->start < end) return true;
      end = std::max(end, it->end);
    }
  }
  return false;
}

}  // namespace perfcast::sim

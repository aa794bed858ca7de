#include "topology/collective.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace perfcast {
namespace {

// NCCL tuning constants (docs/collectives.md section 1.3), microseconds, LL / LL128 / Simple.
struct ProtocolConstants {
  const char* name;
  double base_us;
  double nvlink_hop_us;
  double pcie_hop_us;
  double net_hop_us;
  double bw_fraction;  ///< share of the Simple busBw the protocol reaches (section 1.4, 1.6)
};
constexpr ProtocolConstants kRingProtocols[] = {
    {"LL", 6.6, 0.6, 1.0, 2.7, 0.5},       // LL: 8-byte lines with 4 bytes of flag, 50%
    {"LL128", 14.0, 1.9, 2.5, 4.0, 0.92},  // LL128: 120/128 payload, NCCL's 0.92 factor
    {"Simple", 8.4, 3.4, 5.7, 14.0, 1.0},
};

/// Ring busBw reached on NVLink as a share of per-direction line rate: H100 ring busBw
/// 360-370 GB/s of 450 (docs/collectives.md section 3), so 0.82.
constexpr double kNvlinkRingEfficiency = 0.82;
/// PCIe: NCCL models Gen5 x16 at 48 of 63 GB/s (section 1.2/3), so 0.76.
constexpr double kPcieEfficiency = 0.76;
/// Network: 0.9-0.96 of NIC line rate (section 0); 0.92 taken.
constexpr double kNetworkEfficiency = 0.92;
/// All-to-all latency grows with the peer count: 11.75 us at 8 GPUs and 28.2 us at 32
/// (section 4), a line a + b*n through both points.
constexpr double kA2aBaseUs = 6.27;
constexpr double kA2aPerRankUs = 0.685;

struct GroupShape {
  int n = 0;
  int nodes = 0;           ///< distinct nodes spanned
  int max_per_node = 0;    ///< most ranks of the group on one node
  bool crosses_sockets = false;  ///< PCIe: some node has group ranks under two CPUs
};

GroupShape shape_of(const SystemSpec& s, const RankGroup& g) {
  GroupShape sh;
  sh.n = g.size();
  std::vector<int> per_node(static_cast<std::size_t>(s.nodes), 0);
  std::set<std::pair<int, int>> sockets;
  for (int r : g.ranks) {
    const int node = s.node_of(r);
    per_node[static_cast<std::size_t>(node)]++;
    sockets.insert({node, s.socket_of(r)});
  }
  for (int c : per_node) {
    if (c > 0) sh.nodes++;
    sh.max_per_node = std::max(sh.max_per_node, c);
  }
  std::set<int> nodes_with_sockets;
  for (const auto& [node, sock] : sockets) {
    if (!nodes_with_sockets.insert(node).second) sh.crosses_sockets = true;
  }
  return sh;
}

}  // namespace

std::string_view collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllToAll: return "all_to_all";
    case CollectiveKind::kAllToAllV: return "all_to_allv";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kReduce: return "reduce";
  }
  return "?";
}

AlphaBetaCollectiveModel::AlphaBetaCollectiveModel(const SystemSpec& system) : system_(&system) {}

BytesPerSecond AlphaBetaCollectiveModel::a2a_intra_bandwidth(const RankGroup& group) const {
  const SystemSpec& s = *system_;
  if (s.fabric == IntraFabric::kNvSwitch) return s.fabric_bandwidth * kNvlinkRingEfficiency;
  BytesPerSecond bw = s.fabric_bandwidth * kPcieEfficiency;
  if (s.pcie.cpu_interconnect_bandwidth <= 0) return bw;
  // All-to-all: each rank sends the share of its bytes that goes to peers under the other
  // CPU over the CPU link, which every rank of its socket (in this node) shares.
  std::vector<int> per_socket(static_cast<std::size_t>(s.pcie.cpus * s.nodes), 0);
  for (int r : group.ranks) per_socket[static_cast<std::size_t>(s.node_of(r) * s.pcie.cpus + s.socket_of(r))]++;
  for (int r : group.ranks) {
    const int here = per_socket[static_cast<std::size_t>(s.node_of(r) * s.pcie.cpus + s.socket_of(r))];
    int same_node = 0;
    for (int q : group.ranks) same_node += s.node_of(q) == s.node_of(r) ? 1 : 0;
    const int remote = same_node - here;  // peers under other CPUs of this node
    if (remote <= 0 || same_node <= 1) continue;
    const double cross_share = static_cast<double>(remote) / (same_node - 1);
    // Time per byte sent: max(1 / pcie, cross_share x here / cpu link).
    bw = std::min(bw, s.pcie.cpu_interconnect_bandwidth / (cross_share * here));
  }
  return bw;
}

BytesPerSecond AlphaBetaCollectiveModel::a2a_network_bandwidth_per_gpu() const {
  const SystemSpec& s = *system_;
  if (s.network.nics_per_node <= 0) return std::numeric_limits<double>::infinity();
  // One NIC per GPU at most: NCCL does not aggregate NICs for one GPU (collectives.md s.6).
  const double nic_share = std::min(1.0, static_cast<double>(s.network.nics_per_node) / s.gpus_per_node);
  return s.network.nic_bandwidth * nic_share * kNetworkEfficiency / s.network.oversubscription;
}

BytesPerSecond AlphaBetaCollectiveModel::ring_bus_bandwidth(const RankGroup& group, std::string* bottleneck) const {
  const SystemSpec& s = *system_;
  const GroupShape sh = shape_of(s, group);
  BytesPerSecond bw = std::numeric_limits<double>::infinity();
  std::string where = "none";
  if (sh.max_per_node > 1) {
    if (s.fabric == IntraFabric::kNvSwitch) {
      bw = s.fabric_bandwidth * kNvlinkRingEfficiency;
      where = "nvlink";
    } else {
      // A ring crosses the CPU link once per direction and channel: bound by the link.
      bw = s.fabric_bandwidth * kPcieEfficiency;
      where = "pcie";
      if (sh.crosses_sockets && s.pcie.cpu_interconnect_bandwidth > 0 && s.pcie.cpu_interconnect_bandwidth < bw) {
        bw = s.pcie.cpu_interconnect_bandwidth;
        where = "cpu-link";
      }
    }
  }
  if (sh.nodes > 1) {
    // Ring busBw ~ min(intra ring busBw, sum of the node's NIC bandwidth x eta)
    // (collectives.md section 0); with one rank per node, that rank's NIC share.
    const double nics_used = std::min<double>(s.network.nics_per_node, sh.max_per_node);
    const BytesPerSecond net = s.network.nic_bandwidth * nics_used * kNetworkEfficiency / s.network.oversubscription;
    if (net < bw) {
      bw = net;
      where = "network";
    }
  }
  if (!std::isfinite(bw)) bw = s.gpu.memory_bandwidth;  // one rank: a local copy
  if (bottleneck) *bottleneck = where;
  return bw;
}

CollectiveEstimate AlphaBetaCollectiveModel::ring(const CollectiveDesc& d, const RankGroup& g) const {
  const SystemSpec& s = *system_;
  const GroupShape sh = shape_of(s, g);
  const int n = sh.n;
  int steps = n - 1;
  int inter_steps = sh.nodes - 1;
  double factor = static_cast<double>(n - 1) / n;  // busBw = algBw x factor
  switch (d.kind) {
    case CollectiveKind::kAllReduce:
      steps = 2 * (n - 1);
      inter_steps = 2 * (sh.nodes - 1);
      factor = 2.0 * (n - 1) / n;
      break;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
      factor = 1.0;
      break;
    default: break;
  }
  CollectiveEstimate best;
  const BytesPerSecond bus = ring_bus_bandwidth(g, &best.bottleneck);
  best.time = std::numeric_limits<double>::infinity();
  best.algorithm = "ring";
  const bool pcie = s.fabric == IntraFabric::kPcie;
  for (const auto& p : kRingProtocols) {
    // Per-hop latency: NCCL's protocol constant, or the fabric's own if that is slower.
    const double hop = std::max(pcie ? p.pcie_hop_us : p.nvlink_hop_us, s.fabric_hop_latency * 1e6);
    const double alpha_us = p.base_us + (steps - inter_steps) * hop + inter_steps * std::max(p.net_hop_us, s.network.latency * 1e6);
    const double bw = bus * p.bw_fraction;
    const double t = alpha_us * 1e-6 + d.bytes * factor / bw;
    if (t < best.time) {
      best.time = t;
      best.protocol = p.name;
    }
  }
  best.bus_bandwidth = best.time > 0 ? d.bytes * factor / best.time : 0;
  best.time += s.host.collective_launch_overhead;
  return best;
}

CollectiveEstimate AlphaBetaCollectiveModel::all_to_all(const CollectiveDesc& d, const RankGroup& g) const {
  const SystemSpec& s = *system_;
  const int n = g.size();
  // A rank's link carries its sends in one direction and its receives in the other:
  // the load of the busier direction bounds it.
  const auto un = static_cast<std::size_t>(n);
  std::vector<double> intra_send(un, 0.0), inter_send(un, 0.0), intra_recv(un, 0.0), inter_recv(un, 0.0);
  double total = 0;
  for (std::size_t i = 0; i < un; ++i) {
    for (std::size_t j = 0; j < un; ++j) {
      if (i == j) continue;
      const double b = d.kind == CollectiveKind::kAllToAllV ? d.pair_bytes[i * un + j] : d.bytes / n;
      total += b;
      const bool same_node = s.node_of(g.ranks[i]) == s.node_of(g.ranks[j]);
      (same_node ? intra_send : inter_send)[i] += b;
      (same_node ? intra_recv : inter_recv)[j] += b;
    }
  }
  double max_intra = 0, max_inter = 0;
  for (std::size_t i = 0; i < un; ++i) {
    max_intra = std::max({max_intra, intra_send[i], intra_recv[i]});
    max_inter = std::max({max_inter, inter_send[i], inter_recv[i]});
  }
  const double t_intra = max_intra > 0 ? max_intra / a2a_intra_bandwidth(g) : 0.0;
  const double t_inter = max_inter > 0 ? max_inter / a2a_network_bandwidth_per_gpu() : 0.0;
  CollectiveEstimate e;
  e.algorithm = "pairwise";
  e.protocol = "Simple";
  e.bottleneck = t_inter > t_intra ? "network" : (s.fabric == IntraFabric::kPcie ? "pcie" : "nvlink");
  const double alpha = (kA2aBaseUs + kA2aPerRankUs * n) * 1e-6;
  const double wire = std::max(t_intra, t_inter);
  e.time = alpha + wire + s.host.collective_launch_overhead;
  // busBw of the most loaded rank: its bytes out over the time.
  const double per_rank = total / n;
  e.bus_bandwidth = wire > 0 ? per_rank / (alpha + wire) : 0;
  return e;
}

CollectiveEstimate AlphaBetaCollectiveModel::estimate(const CollectiveDesc& d, const RankGroup& g) const {
  if (g.size() <= 1) {
    CollectiveEstimate e;
    e.algorithm = "local";
    e.protocol = "none";
    e.bottleneck = "none";
    return e;
  }
  if (d.kind == CollectiveKind::kAllToAll || d.kind == CollectiveKind::kAllToAllV) return all_to_all(d, g);
  return ring(d, g);
}

}  // namespace perfcast

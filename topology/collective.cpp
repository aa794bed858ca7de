#include "topology/collective.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "topology/link_paths.hpp"

namespace perfcast {
namespace {

// NCCL tuning constants (src/graph/tuning.cc via docs/collectives.md section 1.3),
// microseconds, per protocol. bw_fraction: share of the Simple bandwidth the protocol
// reaches (LL: 8-byte lines with 4 bytes of flag, 50%; LL128: NCCL's 0.92 for the ring,
// the 120/128 payload share for the tree; section 1.4, 1.6).
// channel_bytes: bytes a channel needs before NCCL gives the collective another channel,
// threads per channel x bytes per thread (docs/collectives.md section 1.6: Simple 512 x 64,
// LL 512 x 8 x n for the ring, LL128 640 x 8; tree 640 threads).
struct ProtocolConstants {
  const char* name;
  double base_us;
  double nvlink_hop_us;
  double pcie_hop_us;
  double net_hop_us;
  double bw_fraction;
  double channel_bytes;  ///< per channel; the ring LL value is multiplied by n
};
constexpr ProtocolConstants kRingProtocols[] = {
    {"LL", 6.6, 0.6, 1.0, 2.7, 0.5, 512.0 * 8},
    {"LL128", 14.0, 1.9, 2.5, 4.0, 0.92, 640.0 * 8},
    {"Simple", 8.4, 3.4, 5.7, 14.0, 1.0, 512.0 * 64},
};
constexpr ProtocolConstants kTreeProtocols[] = {
    {"LL", 6.8, 0.6, 1.0, 5.0, 0.5, 640.0 * 8},
    {"LL128", 14.0, 1.25, 1.9, 8.5, 120.0 / 128.0, 640.0 * 8},
    {"Simple", 8.4, 4.0, 4.0, 14.0, 1.0, 640.0 * 64},
};
/// Channels NCCL runs a collective on at full size: 12 ring channels on DGX H100 and DGX
/// A100 NVSwitch (6 found x 2 duplicated, docs/collectives.md section 1.2 worked
/// examples); 16 NVLS channels on Hopper (section 1.6). Other fabrics: not modelled (1).
constexpr double kNvswitchRingChannels = 12;
constexpr double kNvlsChannels = 16;
/// NCCL caps tree all-reduce bandwidth at 0.92 of the graph's busBw (section 1.4).
constexpr double kTreeEfficiency = 0.92;
/// NVLS and NVLSTree: no base latency, 25 us intra-node hardware latency; NVLSTree's
/// network latency 20.9 us (section 1.3).
constexpr double kNvlsLatencyUs = 25.0;
constexpr double kNvlsTreeNetUs = 20.9;
/// NVLS all-reduce algBw is about 0.6 x the per-direction NVLink line rate and roughly flat
/// in n (sections 0 and 4: "about 0.6x line rate as algBw for NVLS all-reduce"). Each GPU
/// sends its whole vector into the switch once and receives the reduced vector once, so
/// its link carries S per direction instead of the ring's 2(n-1)/n S.
constexpr double kNvlsAllReduceEfficiency = 0.6;
/// NVLS all-gather / reduce-scatter: NCCL's Hopper NVLS efficiency 0.85 on the ring rate
/// (section 1.4, nvlsEfficiency); no in-switch saving on the bytes per link.
constexpr double kNvlsEfficiency = 0.85;
/// All-to-all latency grows with the peer count: 11.75 us at 8 GPUs and 28.2 us at 32
/// (section 4), a line a + b*n through both points.
constexpr double kA2aBaseUs = 6.27;
constexpr double kA2aPerRankUs = 0.685;

struct GroupShape {
  int n = 0;
  int nodes = 0;                 ///< distinct nodes spanned
  int max_per_node = 0;          ///< most ranks of the group on one node
  int min_per_node = 0;          ///< fewest ranks of the group on a node it spans
  bool crosses_sockets = false;  ///< PCIe: some node has group ranks under two CPUs
  int min_mesh_links = 0;        ///< NVLink mesh: fewest links a rank has to other group ranks
};

/// NVLink mesh: NVLinks from rank r to the other group ranks of its node.
int mesh_links_in_group(const SystemSpec& s, const RankGroup& g, int r) {
  int links = 0;
  for (int q : g.ranks) links += q != r ? s.mesh_links(r, q) : 0;
  return links;
}

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
  sh.min_per_node = std::numeric_limits<int>::max();
  for (int c : per_node) {
    if (c > 0) {
      sh.nodes++;
      sh.min_per_node = std::min(sh.min_per_node, c);
    }
    sh.max_per_node = std::max(sh.max_per_node, c);
  }
  std::set<int> nodes_with_sockets;
  for (const auto& [node, sock] : sockets) {
    if (!nodes_with_sockets.insert(node).second) sh.crosses_sockets = true;
  }
  if (s.fabric == IntraFabric::kNvlinkMesh) {
    sh.min_mesh_links = std::numeric_limits<int>::max();
    for (int r : g.ranks) sh.min_mesh_links = std::min(sh.min_mesh_links, mesh_links_in_group(s, g, r));
  }
  return sh;
}

/// Steps of a ring and its bus factor (busBw = algBw x factor), nccl-tests convention.
struct RingSteps {
  int steps = 0;
  int inter_steps = 0;
  double factor = 1.0;
};

RingSteps ring_steps(CollectiveKind kind, int n, int nodes) {
  RingSteps r{n - 1, nodes - 1, static_cast<double>(n - 1) / n};
  switch (kind) {
    case CollectiveKind::kAllReduce:
      r.steps = 2 * (n - 1);
      r.inter_steps = 2 * (nodes - 1);
      r.factor = 2.0 * (n - 1) / n;
      break;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce: r.factor = 1.0; break;
    default: break;
  }
  return r;
}

/// NCCL's channel scale-down (enqueue.cc, docs/collectives.md section 1.6): a collective
/// of S bytes runs on nc(S) = clamp(S / channel_bytes, 1, channels) channels, each moving
/// 1 / channels of the full bandwidth. Returns the bytes the full-bandwidth formula must
/// charge so that time = bytes_charged x F / busBw: S x channels / nc(S), which is
/// S x channels below one channel's threshold, then flat at channel_bytes x channels (a
/// new channel for every channel_bytes more), then S. Continuous and never decreasing.
double channel_limited_bytes(double bytes, double channel_bytes, double channels) {
  if (channels <= 1) return bytes;
  return std::min(bytes * channels, std::max(bytes, channel_bytes * channels));
}

/// Ring channels at full size on the system's fabric (1: no scale-down modelled).
double ring_channels(const SystemSpec& s) { return s.fabric == IntraFabric::kNvSwitch ? kNvswitchRingChannels : 1.0; }

struct Choice {
  Seconds time = std::numeric_limits<double>::infinity();  ///< without the launch overhead
  const char* protocol = "";
};

/// Ring of n ranks over `nodes` nodes at busBw `bus`: min over protocols of
/// base + (steps - inter) x intra hop + inter x network hop + bytes x factor / (bus x share).
/// Hop latencies: NCCL's protocol constant, or the system's own if that is slower.
Choice ring_choice(const SystemSpec& s, CollectiveKind kind, double bytes, int n, int nodes, BytesPerSecond bus) {
  const RingSteps st = ring_steps(kind, n, nodes);
  const bool pcie = s.fabric == IntraFabric::kPcie;
  Choice best;
  for (const auto& p : kRingProtocols) {
    const double hop = std::max(pcie ? p.pcie_hop_us : p.nvlink_hop_us, s.fabric_hop_latency * 1e6);
    const double net = std::max(p.net_hop_us, s.network.latency * 1e6);
    const double alpha_us = p.base_us + (st.steps - st.inter_steps) * hop + st.inter_steps * net;
    const double per_channel = p.channel_bytes * (std::string_view(p.name) == "LL" ? n : 1);
    const double charged = channel_limited_bytes(bytes, per_channel, ring_channels(s));
    const double t = alpha_us * 1e-6 + charged * st.factor / (bus * p.bw_fraction);
    if (t < best.time) best = {t, p.name};
  }
  return best;
}

/// Intra-node ring busBw of a group shape, bytes/s (+inf with one rank per node).
BytesPerSecond intra_ring_bandwidth(const SystemSpec& s, const GroupShape& sh, std::string* where) {
  if (sh.max_per_node <= 1) return std::numeric_limits<double>::infinity();
  if (s.fabric == IntraFabric::kNvSwitch) {
    if (where) *where = "nvlink";
    return s.fabric_bandwidth * kNvlinkEfficiency;
  }
  if (s.fabric == IntraFabric::kNvlinkMesh) {
    // NCCL lays several rings over the mesh; a rank pushes ring traffic only through its
    // links to other group ranks (an upper bound: the rings may not use every link).
    if (where) *where = "nvlink";
    const double links = sh.min_mesh_links;
    return links > 0 ? links * nvlink_per_link_bandwidth(s) : pcie_bandwidth_per_gpu(s);
  }
  // A ring crosses the CPU link once per direction and channel: bound by the link.
  BytesPerSecond bw = s.fabric_bandwidth * kPcieEfficiency;
  if (where) *where = "pcie";
  if (sh.crosses_sockets && s.pcie.cpu_interconnect_bandwidth > 0 && s.pcie.cpu_interconnect_bandwidth < bw) {
    bw = s.pcie.cpu_interconnect_bandwidth;
    if (where) *where = "cpu-link";
  }
  return bw;
}

/// NICs a node drives for the group (one per rank at most) and their total rate, bytes/s.
int nics_used(const SystemSpec& s, const GroupShape& sh) { return std::max(1, std::min(s.network.nics_per_node, sh.max_per_node)); }
BytesPerSecond node_network_bandwidth(const SystemSpec& s, const GroupShape& sh) {
  return nics_used(s, sh) * network_bandwidth_per_nic(s);
}

int ceil_log2(int x) {
  int k = 0;
  while ((1 << k) < x) ++k;
  return k;
}

CollectiveEstimate finish(const SystemSpec& s, CollectiveEstimate e, double bytes, double factor) {
  e.bus_bandwidth = e.time > 0 ? bytes * factor / e.time : 0;
  e.time += s.host.collective_launch_overhead;
  return e;
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
  if (s.fabric == IntraFabric::kNvSwitch) return s.fabric_bandwidth * kNvlinkEfficiency;
  if (s.fabric == IntraFabric::kNvlinkMesh) {
    // Uniform all-to-all over a mesh: bytes to a peer without a direct link cross two
    // links (relayed), so a rank's links carry (1 + relayed share) of its bytes.
    BytesPerSecond bw = std::numeric_limits<double>::infinity();
    for (int r : group.ranks) {
      int peers = 0, relayed = 0;
      for (int q : group.ranks) {
        if (q == r || s.node_of(q) != s.node_of(r)) continue;
        ++peers;
        if (s.mesh_links(r, q) == 0) ++relayed;
      }
      if (peers == 0) continue;
      const int links = mesh_links_in_group(s, group, r);
      const double rate = links > 0 ? links * nvlink_per_link_bandwidth(s) : pcie_bandwidth_per_gpu(s);
      bw = std::min(bw, rate / (1.0 + static_cast<double>(relayed) / peers));
    }
    return std::isfinite(bw) ? bw : s.fabric_bandwidth * kNvlinkEfficiency;
  }
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
  return network_bandwidth_per_gpu(*system_);
}

BytesPerSecond AlphaBetaCollectiveModel::ring_bus_bandwidth(const RankGroup& group, std::string* bottleneck) const {
  const SystemSpec& s = *system_;
  const GroupShape sh = shape_of(s, group);
  std::string where = "none";
  BytesPerSecond bw = intra_ring_bandwidth(s, sh, &where);
  if (sh.nodes > 1) {
    // Ring busBw ~ min(intra ring busBw, sum of the node's NIC bandwidth x eta)
    // (collectives.md section 0); with one rank per node, that rank's NIC share.
    const BytesPerSecond net = node_network_bandwidth(s, sh);
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
  CollectiveEstimate e;
  e.algorithm = "ring";
  const BytesPerSecond bus = ring_bus_bandwidth(g, &e.bottleneck);
  const Choice c = ring_choice(s, d.kind, d.bytes, sh.n, sh.nodes, bus);
  e.time = c.time;
  e.protocol = c.protocol;
  const double factor = ring_steps(d.kind, sh.n, sh.nodes).factor;
  if (sh.nodes > 1) {
    // Each of the node's NICs carries bytes x factor / NICs used per direction.
    const double per_nic = d.bytes * factor / nics_used(s, sh);
    e.nic_busy = per_nic / network_bandwidth_per_nic(s);
    e.pcie_busy = per_nic / pcie_bandwidth_per_gpu(s);
  }
  return finish(s, e, d.bytes, factor);
}

CollectiveEstimate AlphaBetaCollectiveModel::tree(const CollectiveDesc& d, const RankGroup& g) const {
  // Double binary tree across nodes, a chain inside each node (NCCL's TREE, all-reduce).
  // Per direction, a GPU of the chain moves 2S over its intra-node link (two trees, each
  // half the vector, reduce up and broadcast down). A node's NICs move S per direction
  // with 2 nodes (each node is the root of one tree and the leaf of the other) and 2S with
  // more (interior in one tree: 2 children and a parent; a leaf in the other).
  const SystemSpec& s = *system_;
  const GroupShape sh = shape_of(s, g);
  std::string intra_where = s.fabric == IntraFabric::kPcie ? "pcie" : "nvlink";
  const BytesPerSecond intra = intra_ring_bandwidth(s, sh, &intra_where);
  const BytesPerSecond net = node_network_bandwidth(s, sh);
  const double k = sh.nodes == 2 ? 1.0 : 2.0;
  const double intra_per_byte = std::isfinite(intra) ? 2.0 / intra : 0.0;
  const double net_per_byte = k / net;
  const bool pcie = s.fabric == IntraFabric::kPcie;
  CollectiveEstimate e;
  e.algorithm = "tree";
  e.bottleneck = net_per_byte >= intra_per_byte ? "network" : intra_where;
  e.time = std::numeric_limits<double>::infinity();
  for (const auto& p : kTreeProtocols) {
    const double hop = std::max(pcie ? p.pcie_hop_us : p.nvlink_hop_us, s.fabric_hop_latency * 1e6);
    const double nethop = std::max(p.net_hop_us, s.network.latency * 1e6);
    const double alpha_us = p.base_us + 2.0 * ((sh.max_per_node - 1) * hop + ceil_log2(sh.nodes) * nethop);
    const double charged = channel_limited_bytes(d.bytes, p.channel_bytes, ring_channels(s));
    const double t = alpha_us * 1e-6 +
                     charged * std::max(intra_per_byte, net_per_byte) / (p.bw_fraction * kTreeEfficiency);
    if (t < e.time) {
      e.time = t;
      e.protocol = p.name;
    }
  }
  const double per_nic = k * d.bytes / nics_used(s, sh);
  e.nic_busy = per_nic / network_bandwidth_per_nic(s);
  e.pcie_busy = per_nic / pcie_bandwidth_per_gpu(s);
  return finish(s, e, d.bytes, ring_steps(d.kind, sh.n, sh.nodes).factor);
}

CollectiveEstimate AlphaBetaCollectiveModel::nvls(const CollectiveDesc& d, const RankGroup& g) const {
  // In-switch reduction (NVLink SHARP) inside one node, Simple protocol only.
  const SystemSpec& s = *system_;
  const GroupShape sh = shape_of(s, g);
  CollectiveEstimate e;
  e.algorithm = "nvls";
  e.protocol = "Simple";
  e.bottleneck = "nvswitch";
  const BytesPerSecond alg = d.kind == CollectiveKind::kAllReduce
                                 ? s.fabric_bandwidth * kNvlsAllReduceEfficiency
                                 : s.fabric_bandwidth * kNvlinkEfficiency * kNvlsEfficiency;
  e.time = kNvlsLatencyUs * 1e-6 + channel_limited_bytes(d.bytes, kRingProtocols[2].channel_bytes, kNvlsChannels) / alg;
  return finish(s, e, d.bytes, ring_steps(d.kind, sh.n, sh.nodes).factor);
}

CollectiveEstimate AlphaBetaCollectiveModel::nvls_tree(const CollectiveDesc& d, const RankGroup& g) const {
  // NVLS inside each node (S per link direction), the tree of `tree()` across nodes.
  const SystemSpec& s = *system_;
  const GroupShape sh = shape_of(s, g);
  const double k = sh.nodes == 2 ? 1.0 : 2.0;
  const double intra_per_byte = 1.0 / (s.fabric_bandwidth * kNvlsAllReduceEfficiency);
  const double net_per_byte = k / node_network_bandwidth(s, sh);
  CollectiveEstimate e;
  e.algorithm = "nvls_tree";
  e.protocol = "Simple";
  e.bottleneck = net_per_byte >= intra_per_byte ? "network" : "nvswitch";
  const double alpha_us =
      kNvlsLatencyUs + 2.0 * ceil_log2(sh.nodes) * std::max(kNvlsTreeNetUs, s.network.latency * 1e6);
  e.time = alpha_us * 1e-6 + channel_limited_bytes(d.bytes, kRingProtocols[2].channel_bytes, kNvlsChannels) *
                                 std::max(intra_per_byte, net_per_byte);
  const double per_nic = k * d.bytes / nics_used(s, sh);
  e.nic_busy = per_nic / network_bandwidth_per_nic(s);
  e.pcie_busy = per_nic / pcie_bandwidth_per_gpu(s);
  return finish(s, e, d.bytes, ring_steps(d.kind, sh.n, sh.nodes).factor);
}

CollectiveEstimate AlphaBetaCollectiveModel::hierarchical(const CollectiveDesc& d, const RankGroup& g) const {
  // Intra-node ring reduce-scatter, inter-node ring over each rail (the ranks with the same
  // local index, one per node, all rails at once on their own NIC share), intra-node ring
  // all-gather (ASTRA-sim's multi-dimensional all-reduce, docs/collectives.md section 5.1).
  const SystemSpec& s = *system_;
  const GroupShape sh = shape_of(s, g);
  const int ppn = sh.max_per_node;
  const int nodes = sh.nodes;
  std::string intra_where = "nvlink";
  const BytesPerSecond intra = intra_ring_bandwidth(s, sh, &intra_where);
  const BytesPerSecond rail = network_bandwidth_per_gpu(s);
  const double shard = d.bytes / ppn;  // bytes each rail carries across nodes
  Seconds t_intra = 0;
  Choice inter;
  switch (d.kind) {
    case CollectiveKind::kAllReduce:
      t_intra = ring_choice(s, CollectiveKind::kReduceScatter, d.bytes, ppn, 1, intra).time +
                ring_choice(s, CollectiveKind::kAllGather, d.bytes, ppn, 1, intra).time;
      break;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      t_intra = ring_choice(s, d.kind, d.bytes, ppn, 1, intra).time;
      break;
    default: break;
  }
  inter = ring_choice(s, d.kind, shard, nodes, nodes, rail);
  const RingSteps inter_steps = ring_steps(d.kind, nodes, nodes);
  CollectiveEstimate e;
  e.algorithm = "hierarchical";
  e.protocol = inter.protocol;
  e.time = t_intra + inter.time;
  const double net_wire = shard * inter_steps.factor / rail;
  e.bottleneck = net_wire >= t_intra ? "network" : intra_where;
  e.nic_busy = net_wire;
  e.pcie_busy = shard * inter_steps.factor / pcie_bandwidth_per_gpu(s);
  return finish(s, e, d.bytes, ring_steps(d.kind, sh.n, nodes).factor);
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
  e.nic_busy = t_inter;
  e.pcie_busy = max_inter / pcie_bandwidth_per_gpu(s);
  // busBw of the most loaded rank: its bytes out over the time.
  const double per_rank = total / n;
  e.bus_bandwidth = wire > 0 ? per_rank / (alpha + wire) : 0;
  return e;
}

std::vector<CollectiveEstimate> AlphaBetaCollectiveModel::candidates(const CollectiveDesc& d, const RankGroup& g) const {
  std::vector<CollectiveEstimate> out;
  if (g.size() <= 1) return out;
  if (d.kind == CollectiveKind::kAllToAll || d.kind == CollectiveKind::kAllToAllV) {
    out.push_back(all_to_all(d, g));
    return out;
  }
  const SystemSpec& s = *system_;
  const GroupShape sh = shape_of(s, g);
  const bool reducing_or_gather = d.kind == CollectiveKind::kAllReduce || d.kind == CollectiveKind::kAllGather ||
                                  d.kind == CollectiveKind::kReduceScatter;
  const bool nvswitch_nvls = s.nvls && s.fabric == IntraFabric::kNvSwitch;
  out.push_back(ring(d, g));  // broadcast and reduce: ring only (NCCL, section 1.1)
  // Tree: all-reduce only; NCCL enables it inside one node too, but a chain never beats the
  // ring there (same bandwidth, more latency), so it is offered across nodes only.
  if (d.kind == CollectiveKind::kAllReduce && sh.nodes >= 2) out.push_back(tree(d, g));
  // NVLS: NVSwitch with in-switch reduction, one node, at least 2 ranks (section 1.1).
  if (reducing_or_gather && nvswitch_nvls && sh.nodes == 1 && sh.n >= 2) out.push_back(nvls(d, g));
  // NVLSTree: all-reduce, >= 2 nodes, more than one GPU per node (disabled on 1 node).
  if (d.kind == CollectiveKind::kAllReduce && nvswitch_nvls && sh.nodes >= 2 && sh.max_per_node >= 2) {
    out.push_back(nvls_tree(d, g));
  }
  // Hierarchical: >= 2 nodes with the same number (>= 2) of group ranks on each.
  if (reducing_or_gather && sh.nodes >= 2 && sh.max_per_node >= 2 && sh.min_per_node == sh.max_per_node) {
    out.push_back(hierarchical(d, g));
  }
  return out;
}

CollectiveEstimate AlphaBetaCollectiveModel::estimate(const CollectiveDesc& d, const RankGroup& g) const {
  if (g.size() <= 1) {
    CollectiveEstimate e;
    e.algorithm = "local";
    e.protocol = "none";
    e.bottleneck = "none";
    return e;
  }
  std::vector<CollectiveEstimate> all = candidates(d, g);
  std::size_t best = 0;
  for (std::size_t i = 1; i < all.size(); ++i)
    if (all[i].time < all[best].time) best = i;
  return std::move(all[best]);
}

}  // namespace perfcast

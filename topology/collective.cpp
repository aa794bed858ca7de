#include "topology/collective.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "topology/link_paths.hpp"
#include "topology/nccl_tests_parser.hpp"
#include "topology/nccl_tuning.hpp"

namespace perfcast {
namespace {

// Inside one NVLink domain: perfcast's link model (v3). NCCL tuning constants
// (src/graph/tuning.cc via docs/collectives.md section 1.3), microseconds, per protocol.
// bw_fraction: share of the Simple bandwidth the protocol reaches (LL: 8-byte lines with 4
// bytes of flag, 50%; LL128: NCCL's 0.92 for the ring, the 120/128 payload share for the
// tree; section 1.4, 1.6). channel_bytes: bytes a channel needs before NCCL gives the
// collective another channel, threads per channel x bytes per thread (docs/collectives.md
// section 1.6: Simple 512 x 64, LL 512 x 8 x n for the ring, LL128 640 x 8; tree 640 threads).
struct ProtocolConstants {
  const char* name;
  double base_us;
  double nvlink_hop_us;
  double pcie_hop_us;
  double bw_fraction;
  double channel_bytes;  ///< per channel; the ring LL value is multiplied by n
};
constexpr ProtocolConstants kRingProtocols[] = {
    {"LL", 6.6, 0.6, 1.0, 0.5, 512.0 * 8},
    {"LL128", 14.0, 1.9, 2.5, 0.92, 640.0 * 8},
    {"Simple", 8.4, 3.4, 5.7, 1.0, 512.0 * 64},
};
constexpr ProtocolConstants kTreeProtocols[] = {
    {"LL", 6.8, 0.6, 1.0, 0.5, 640.0 * 8},
    {"LL128", 14.0, 1.25, 1.9, 120.0 / 128.0, 640.0 * 8},
    {"Simple", 8.4, 4.0, 4.0, 1.0, 640.0 * 64},
};
/// Channels NCCL runs a collective on at full size: 12 ring channels on DGX H100 and DGX
/// A100 NVSwitch (6 found x 2 duplicated, docs/collectives.md section 1.2 worked
/// examples); 16 NVLS channels on Hopper (section 1.6). Other fabrics: not modelled (1).
constexpr double kNvswitchRingChannels = 12;
constexpr double kNvlsChannels = 16;
/// NCCL caps tree all-reduce bandwidth at 0.92 of the graph's busBw (section 1.4).
constexpr double kTreeEfficiency = 0.92;
/// NVLS: 25 us intra-node hardware latency (section 1.3).
constexpr double kNvlsLatencyUs = 25.0;
/// NVLS all-reduce algBw is about 0.6 x the per-direction NVLink line rate and roughly flat
/// in n (sections 0 and 4). Each GPU sends its whole vector into the switch once and
/// receives the reduced vector once.
constexpr double kNvlsAllReduceEfficiency = 0.6;
/// NVLS all-gather / reduce-scatter: NCCL's Hopper NVLS efficiency 0.85 on the ring rate
/// (section 1.4, nvlsEfficiency); no in-switch saving on the bytes per link.
constexpr double kNvlsEfficiency = 0.85;
/// NCCL's NVLS efficiency on Blackwell, 0.74 (tuning.cc nvlsEfficiency): the Hopper-measured
/// NVLS factors above are scaled by 0.74 / 0.85 there.
constexpr double kNvlsEfficiencyBlackwell = 0.74;

/// The NVLS factors' scale for the system's GPU generation (1 on Hopper).
double nvls_generation_scale(const SystemSpec& s) {
  return nccl_arch(s.gpu) >= NcclArch::kBlackwell ? kNvlsEfficiencyBlackwell / kNvlsEfficiency : 1.0;
}

/// NVLS algorithm bandwidth inside one NVLink domain, bytes/s: all-reduce at 0.6 x the
/// per-direction NVLink rate, all-gather / reduce-scatter at the ring rate x 0.85.
BytesPerSecond nvls_domain_bandwidth(const SystemSpec& s, CollectiveKind kind) {
  const double base = kind == CollectiveKind::kAllReduce ? s.fabric_bandwidth * kNvlsAllReduceEfficiency
                                                         : s.fabric_bandwidth * kNvlinkEfficiency * kNvlsEfficiency;
  return base * nvls_generation_scale(s);
}
/// All-to-all latency grows with the peer count: 11.75 us at 8 GPUs and 28.2 us at 32
/// (section 4), a line a + b*n through both points.
constexpr double kA2aBaseUs = 6.27;
constexpr double kA2aPerRankUs = 0.685;
/// NCCL's point-to-point chunk over the network, bytes (section 1.7): one network message
/// per chunk and peer.
constexpr double kNetP2pChunkBytes = 128.0 * 1024;

struct GroupShape {
  int n = 0;
  int nodes = 0;                 ///< NVLink domains spanned (NCCL nodes)
  int max_per_node = 0;          ///< most ranks of the group in one domain
  int min_per_node = 0;          ///< fewest ranks of the group in a domain it spans
  bool crosses_sockets = false;  ///< PCIe: some node has group ranks under two CPUs
  int min_mesh_links = 0;        ///< NVLink mesh: fewest links a rank has to other group ranks
  int first_host = 0, last_host = 0;  ///< lowest and highest host (node) index of the group
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
  const int domains = std::max(1, s.world_size() / s.domain_size());
  std::vector<int> per_domain(static_cast<std::size_t>(domains), 0);
  std::set<std::pair<int, int>> sockets;
  sh.first_host = std::numeric_limits<int>::max();
  for (int r : g.ranks) {
    per_domain[static_cast<std::size_t>(s.domain_of(r))]++;
    sockets.insert({s.node_of(r), s.socket_of(r)});
    sh.first_host = std::min(sh.first_host, s.node_of(r));
    sh.last_host = std::max(sh.last_host, s.node_of(r));
  }
  sh.min_per_node = std::numeric_limits<int>::max();
  for (int c : per_domain) {
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
/// charge so that time = bytes_charged x F / busBw: S x channels / nc(S). Continuous and
/// never decreasing.
double channel_limited_bytes(double bytes, double channel_bytes, double channels) {
  if (channels <= 1) return bytes;
  return std::min(bytes * channels, std::max(bytes, channel_bytes * channels));
}

bool reduce_scatter_kind(CollectiveKind k) { return k == CollectiveKind::kAllGather || k == CollectiveKind::kReduceScatter; }

/// Ring channels at full size on the system's fabric (1: no scale-down modelled).
double ring_channels(const SystemSpec& s) { return s.fabric == IntraFabric::kNvSwitch ? kNvswitchRingChannels : 1.0; }

/// Ring of n ranks inside one NVLink domain at busBw `bus`, protocol `p`:
/// base + steps x hop + bytes charged x factor / (bus x share). Hop latencies: NCCL's
/// protocol constant, or the system's own if that is slower.
Seconds ring_time(const SystemSpec& s, CollectiveKind kind, double bytes, int n, BytesPerSecond bus, const ProtocolConstants& p) {
  const RingSteps st = ring_steps(kind, n, 1);
  const bool pcie = s.fabric == IntraFabric::kPcie;
  const double hop = std::max(pcie ? p.pcie_hop_us : p.nvlink_hop_us, s.fabric_hop_latency * 1e6);
  const double alpha_us = p.base_us + st.steps * hop;
  const double per_channel = p.channel_bytes * (std::string_view(p.name) == "LL" ? n : 1);
  const double charged = channel_limited_bytes(bytes, per_channel, ring_channels(s));
  return alpha_us * 1e-6 + charged * st.factor / (bus * p.bw_fraction);
}

/// Intra-domain ring busBw of a group shape, bytes/s (+inf with one rank per domain).
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

/// NICs a domain drives for the group (one per rank at most).
int nics_used(const SystemSpec& s, const GroupShape& sh) {
  return std::max(1, std::min(s.network.nics_per_node * s.nodes_per_domain(), sh.max_per_node));
}

int ceil_log2(int x) {
  int k = 0;
  while ((1 << k) < x) ++k;
  return k;
}

/// Network hops on the critical path of an algorithm across `nodes` NCCL nodes.
int network_hops(NcclAlgo a, CollectiveKind kind, int nodes) {
  switch (a) {
    case NcclAlgo::kRing: return kind == CollectiveKind::kAllReduce ? 2 * (nodes - 1) : nodes - 1;
    case NcclAlgo::kTree:
    case NcclAlgo::kNvlsTree: return 2 * ceil_log2(nodes);
    case NcclAlgo::kPat: return ceil_log2(nodes);
    default: return 2;  // CollNet, NVLS: up to the switch and back
  }
}

/// Bytes one NIC of the group moves in one direction, for the contention model.
double bytes_per_nic(NcclAlgo a, CollectiveKind kind, double bytes, int n, int nodes, int nics) {
  double per_node = 0;
  switch (a) {
    case NcclAlgo::kRing: per_node = bytes * ring_steps(kind, n, nodes).factor; break;
    case NcclAlgo::kTree:
    case NcclAlgo::kNvlsTree: per_node = (nodes == 2 ? 1.0 : 2.0) * bytes; break;
    case NcclAlgo::kPat: per_node = bytes * (nodes - 1) / nodes; break;
    default: per_node = bytes; break;
  }
  return per_node / nics;
}

CollectiveEstimate finish(const SystemSpec& s, CollectiveEstimate e, double bytes, double factor) {
  e.bus_bandwidth = e.time > 0 ? bytes * factor / e.time : 0;
  e.time += s.host.collective_launch_overhead;
  return e;
}

/// The fastest protocol of `algo` at `bytes` in NCCL's table (-1 when it cannot run).
int best_protocol(const NcclTopo& t, const NcclTable& table, CollectiveKind kind, double bytes, NcclAlgo algo) {
  int best = -1;
  double best_time = std::numeric_limits<double>::infinity();
  for (int p = 0; p < kNcclProtos; ++p) {
    NcclCost c;
    if (nccl_cost(t, table, kind, bytes, algo, static_cast<NcclProto>(p), &c) && c.time_us < best_time) {
      best_time = c.time_us;
      best = p;
    }
  }
  return best;
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

/// Switch points per communicator shape (NCCL's tuning inputs), collective and forced
/// algorithm.
struct AlphaBetaCollectiveModel::SwitchCache {
  std::mutex mu;
  std::map<std::tuple<int, int, int, double, int, std::string>, std::vector<std::pair<double, std::pair<int, int>>>> points;
};

AlphaBetaCollectiveModel::AlphaBetaCollectiveModel(const SystemSpec& system)
    : system_(&system), switch_cache_(std::make_shared<SwitchCache>()) {}

std::vector<std::pair<double, std::pair<int, int>>> AlphaBetaCollectiveModel::switches(const RankGroup& g, CollectiveKind kind,
                                                                                        const std::string& algorithm) const {
  const NcclTopo t = nccl_topo(*system_, g);
  // NCCL's choice depends on the communicator's shape only (the system is fixed).
  const auto key = std::make_tuple(static_cast<int>(kind), t.ranks, t.nodes, t.ppn, static_cast<int>(t.collnet), algorithm);
  {
    std::lock_guard<std::mutex> lock(switch_cache_->mu);
    auto it = switch_cache_->points.find(key);
    if (it != switch_cache_->points.end()) return it->second;
  }
  const NcclTable table = nccl_table(t, kind);
  NcclAlgo a{};
  const bool named = !algorithm.empty() && nccl_algo_from_name(algorithm, &a);
  std::vector<std::pair<double, std::pair<int, int>>> out;
  for (const auto& sw : nccl_switches(t, table, kind, 1099511627776.0, named ? &a : nullptr))
    out.push_back({sw.bytes, {static_cast<int>(sw.algo_before), static_cast<int>(sw.proto_before)}});
  std::lock_guard<std::mutex> lock(switch_cache_->mu);
  switch_cache_->points.emplace(key, out);
  return out;
}

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
    // Ring busBw ~ min(intra ring busBw, sum of the domain's NIC bandwidth x eta)
    // (collectives.md section 0); with one rank per domain, that rank's NIC share.
    const BytesPerSecond net = nics_used(s, sh) * network_bandwidth_per_nic(s);
    if (net < bw) {
      bw = net;
      where = "nic";
    }
  }
  if (!std::isfinite(bw)) bw = s.gpu.memory_bandwidth;  // one rank: a local copy
  if (bottleneck) *bottleneck = where;
  return bw;
}

CollectiveEstimate AlphaBetaCollectiveModel::one_domain(const CollectiveDesc& d, const RankGroup& g, int algo, int proto) const {
  const SystemSpec& s = *system_;
  const GroupShape sh = shape_of(s, g);
  const auto a = static_cast<NcclAlgo>(algo);
  CollectiveEstimate e;
  e.algorithm = std::string(nccl_algo_name(a));
  e.protocol = std::string(nccl_proto_name(static_cast<NcclProto>(proto)));
  if (a == NcclAlgo::kNvls) {
    // In-switch reduction (NVLink SHARP), Simple protocol only.
    e.bottleneck = "nvlink";
    const BytesPerSecond alg = nvls_domain_bandwidth(s, d.kind);
    e.time = kNvlsLatencyUs * 1e-6 + channel_limited_bytes(d.bytes, kRingProtocols[2].channel_bytes, kNvlsChannels) / alg;
    return finish(s, e, d.bytes, ring_steps(d.kind, sh.n, 1).factor);
  }
  if (a == NcclAlgo::kTree) {
    // A chain through the domain's GPUs (NCCL's tree inside one node): 2S per direction
    // over each link (two trees, reduce up and broadcast down).
    e.bottleneck = s.fabric == IntraFabric::kPcie ? "pcie" : "nvlink";
    const BytesPerSecond intra = intra_ring_bandwidth(s, sh, &e.bottleneck);
    const ProtocolConstants& p = kTreeProtocols[proto];
    const double hop = std::max(s.fabric == IntraFabric::kPcie ? p.pcie_hop_us : p.nvlink_hop_us, s.fabric_hop_latency * 1e6);
    const double alpha_us = p.base_us + 2.0 * (sh.max_per_node - 1) * hop;
    const double charged = channel_limited_bytes(d.bytes, p.channel_bytes, ring_channels(s));
    e.time = alpha_us * 1e-6 + charged * 2.0 / intra / (p.bw_fraction * kTreeEfficiency);
    return finish(s, e, d.bytes, ring_steps(d.kind, sh.n, 1).factor);
  }
  e.algorithm = "ring";
  const BytesPerSecond bus = ring_bus_bandwidth(g, &e.bottleneck);
  e.time = ring_time(s, d.kind, d.bytes, sh.n, bus, kRingProtocols[proto]);
  return finish(s, e, d.bytes, ring_steps(d.kind, sh.n, 1).factor);
}

AlphaBetaCollectiveModel::Terms AlphaBetaCollectiveModel::terms(const CollectiveDesc& d, const RankGroup& g,
                                                                const std::string& algorithm, const std::string& protocol) const {
  const SystemSpec& s = *system_;
  Terms out;
  if (g.size() < 2 || d.kind == CollectiveKind::kAllToAll || d.kind == CollectiveKind::kAllToAllV) return out;
  const GroupShape sh = shape_of(s, g);
  out.domains = sh.nodes;
  if (sh.nodes < 2) return out;
  out.multi_domain = true;
  const NcclTopo raw = nccl_topo(s, g);
  const NcclTable raw_table = nccl_table(raw, d.kind);
  NcclAlgo forced_algo{};
  const bool forced = !algorithm.empty() && nccl_algo_from_name(algorithm, &forced_algo);
  NcclProto forced_proto{};
  bool proto_forced = false;
  for (int p = 0; p < kNcclProtos; ++p)
    if (!protocol.empty() && nccl_proto_name(static_cast<NcclProto>(p)) == protocol) {
      forced_proto = static_cast<NcclProto>(p);
      proto_forced = true;
    }
  const NcclCost choice =
      nccl_choice(raw, raw_table, d.kind, d.bytes, forced ? &forced_algo : nullptr, proto_forced ? &forced_proto : nullptr);
  // The same choice on the fabric as the group meets it: the NICs' rate divided by the
  // oversubscription of the tiers between its nodes.
  const double oversub = s.network.oversubscription_between(sh.first_host, sh.last_host);
  NcclTopo eff = raw;
  eff.nic_gbps = raw.nic_gbps / oversub;
  const NcclTable eff_table = oversub > 1 ? nccl_table(eff, d.kind) : raw_table;
  const int ai = static_cast<int>(choice.algo), pi = static_cast<int>(choice.proto);
  double bw = eff_table.bandwidth_gbps[ai][pi];
  if (bw <= 0) bw = choice.bandwidth_gbps;
  double latency_us = nccl_latency_us(eff, eff_table, d.kind, d.bytes, choice.algo, choice.proto);
  if (d.kind == CollectiveKind::kBroadcast || d.kind == CollectiveKind::kReduce) {
    // NCCL charges a pipelined broadcast / reduce one hop; its first chunk still crosses
    // every hop of the ring: n - N NVLink hops and N - 1 network hops (as inside one domain).
    latency_us += (sh.n - sh.nodes) * nccl_hop_latency_us(eff, choice.algo, choice.proto, false) +
                  (sh.nodes - 2) * nccl_hop_latency_us(eff, choice.algo, choice.proto, true);
  }
  // NCCL corrects its tree's mid-size bandwidth (and NVLS Tree's on Blackwell x86) by size:
  // the same correction here, interpolated between NCCL's power-of-two bins so that the time
  // stays continuous in size. Only where NCCL applies it, so that the time follows the
  // choice NCCL makes with it (a correction NCCL's choice does not see would make a switch
  // to another algorithm at more nodes look faster).
  const bool corrected = choice.algo == NcclAlgo::kTree ||
                         (choice.algo == NcclAlgo::kNvlsTree && raw.arch >= NcclArch::kBlackwell && !raw.arm_cpu);
  if (corrected && d.kind == CollectiveKind::kAllReduce) bw *= nccl_tree_correction_smooth(choice.proto, d.bytes);
  bool intra_capped = false;
  // A ring across domains also passes every byte through each GPU's NVLink inside a
  // domain: never faster than the intra-domain ring (NCCL's multi-node model counts the
  // NIC speed only).
  if (choice.algo == NcclAlgo::kRing && sh.max_per_node > 1) {
    std::string where;
    const double intra_bus = intra_ring_bandwidth(s, sh, &where) / 1e9;
    const int n = sh.n;
    const double steps = d.kind == CollectiveKind::kAllReduce ? 2.0 * (n - 1) : (reduce_scatter_kind(d.kind) ? n - 1.0 : n);
    const double cap = intra_bus * n / steps;
    if (std::isfinite(cap) && cap < bw) {
      bw = cap;
      intra_capped = true;
    }
  }
  // Every byte of NVLS crosses each GPU's NVLink into the switch and back: across domains
  // NVLS is never faster than inside one (NCCL's per-channel model is not bounded by the
  // NVLink rate, which matters for domains of many GPUs: GB200 NVL72 has 32 channels).
  const bool nvls_like = choice.algo == NcclAlgo::kNvls || choice.algo == NcclAlgo::kNvlsTree;
  bool nvlink_capped = intra_capped;
  if (nvls_like && s.fabric == IntraFabric::kNvSwitch) {
    const double cap = nvls_domain_bandwidth(s, d.kind) / 1e9;
    if (cap < bw) {
      bw = cap;
      nvlink_capped = true;
    }
  }
  out.algorithm = std::string(nccl_algo_name(choice.algo));
  out.protocol = std::string(nccl_proto_name(choice.proto));
  out.launch = s.host.collective_launch_overhead;
  out.latency = latency_us * 1e-6 +
                network_hops(choice.algo, d.kind, sh.nodes) * s.network.tier_latency_between(sh.first_host, sh.last_host);
  out.transfer = bw > 0 ? d.bytes / (bw * 1e9) : 0;
  // What bounds it: NVLink when NVLS's intra-node rate is below its network rate, else
  // the NIC path (PCIe where it is slower than the NIC), the spine where the tiers between
  // the nodes are oversubscribed.
  out.bottleneck = s.gpu.pcie_bandwidth < s.network.nic_bandwidth ? "pcie" : "nic";
  if (choice.algo == NcclAlgo::kNvlsTree || choice.algo == NcclAlgo::kNvls) {
    const NcclGraph gr = nccl_graph(eff, NcclPattern::kNvls);
    const double intra = gr.bw_intra * (raw.arch >= NcclArch::kBlackwell ? 0.74 : 0.85) * (gr.channels - 1) /
                         std::max(1, gr.channels) * 2.0;
    const double inter = gr.bw_inter * ((sh.nodes <= 2 && choice.algo == NcclAlgo::kNvlsTree) ? 2.0 : 1.0);
    if (intra < inter || nvlink_capped) out.bottleneck = "nvlink";
  }
  if (nvlink_capped) out.bottleneck = "nvlink";
  if (oversub > 1 && out.bottleneck != "nvlink") out.bottleneck = "spine";
  return out;
}

CollectiveEstimate AlphaBetaCollectiveModel::across_domains(const CollectiveDesc& d, const RankGroup& g, int algo, int proto) const {
  const SystemSpec& s = *system_;
  const GroupShape sh = shape_of(s, g);
  const Terms t = terms(d, g, std::string(nccl_algo_name(static_cast<NcclAlgo>(algo))),
                        std::string(nccl_proto_name(static_cast<NcclProto>(proto))));
  CollectiveEstimate e;
  e.algorithm = t.algorithm;
  e.protocol = t.protocol;
  e.bottleneck = t.bottleneck;
  e.time = t.latency + t.transfer;
  NcclAlgo a = NcclAlgo::kRing;
  if (!nccl_algo_from_name(t.algorithm, &a)) a = NcclAlgo::kRing;
  const double per_nic = bytes_per_nic(a, d.kind, d.bytes, sh.n, sh.nodes, nics_used(s, sh));
  e.nic_busy = per_nic / network_bandwidth_per_nic(s);
  e.pcie_busy = per_nic / pcie_bandwidth_per_gpu(s);
  return finish(s, e, d.bytes, ring_steps(d.kind, sh.n, sh.nodes).factor);
}

CollectiveEstimate AlphaBetaCollectiveModel::timed(const CollectiveDesc& d, const RankGroup& g, int algo, int proto) const {
  return shape_of(*system_, g).nodes > 1 ? across_domains(d, g, algo, proto) : one_domain(d, g, algo, proto);
}

CollectiveEstimate AlphaBetaCollectiveModel::all_to_all(const CollectiveDesc& d, const RankGroup& g) const {
  const SystemSpec& s = *system_;
  const int n = g.size();
  const auto un = static_cast<std::size_t>(n);
  // A rank's link carries its sends in one direction and its receives in the other: the
  // load of the busier direction bounds it. Bytes to another NVLink domain leave through a
  // NIC; on a rail-optimized fabric (PXN) through the NIC of the sender's local GPU on the
  // receiver's rail, reached over NVLink first. Bytes between nodes of different groups of
  // an oversubscribed tier count that many times (they share the uplinks).
  std::vector<double> intra_send(un, 0.0), inter_send(un, 0.0), intra_recv(un, 0.0), inter_recv(un, 0.0);
  std::vector<double> messages(un, 0.0);
  const int nics = std::max(1, s.network.nics_per_node);
  const bool pxn = s.network.rail_optimized && nics > 1;
  const bool tiers = !s.network.levels.empty() || s.network.oversubscription > 1;
  std::vector<int> domain(un), host(un), local(un), rail(un);
  for (std::size_t i = 0; i < un; ++i) {
    const int r = g.ranks[i];
    domain[i] = s.domain_of(r);
    host[i] = s.node_of(r);
    local[i] = r % s.gpus_per_node;
    rail[i] = local[i] * nics / s.gpus_per_node;
  }
  // PXN proxies: per (host, rail), the group index of the GPU that holds that rail's NIC
  // (local index rail x gpus_per_node / nics), or -1 when it is not in the group (the sender
  // itself then carries the bytes). One array read a pair: a search of the group for every
  // pair made a 128-rank all-to-all cost n^3, a hash lookup a pair most of its time.
  std::vector<std::int64_t> proxy_index;
  if (pxn) {
    const int hosts = *std::max_element(host.begin(), host.end()) + 1;
    proxy_index.assign(static_cast<std::size_t>(hosts) * static_cast<std::size_t>(nics), -1);
    for (std::size_t k = 0; k < un; ++k)
      for (int t = 0; t < nics; ++t)
        if (local[k] == t * s.gpus_per_node / nics)
          proxy_index[static_cast<std::size_t>(host[k]) * static_cast<std::size_t>(nics) + static_cast<std::size_t>(t)] =
              static_cast<std::int64_t>(k);
  }
  auto proxy_of = [&](std::size_t i, int target_rail) -> std::size_t {
    const std::int64_t k =
        proxy_index[static_cast<std::size_t>(host[i]) * static_cast<std::size_t>(nics) + static_cast<std::size_t>(target_rail)];
    return k < 0 ? i : static_cast<std::size_t>(k);
  };
  double total = 0, max_oversub = 1;
  for (std::size_t i = 0; i < un; ++i) {
    // Row i's own sends over NVLink, summed in a register (the same additions in the same
    // order as into intra_send[i]: a store and reload a pair was the loop's longest chain).
    double sent_intra = intra_send[i];
    for (std::size_t j = 0; j < un; ++j) {
      if (i == j) continue;
      const double b = d.kind == CollectiveKind::kAllToAllV ? d.pair_bytes[i * un + j] : d.bytes / n;
      if (b <= 0) continue;
      total += b;
      if (domain[i] == domain[j]) {
        sent_intra += b;
        intra_recv[j] += b;
        continue;
      }
      const double o = tiers ? s.network.oversubscription_between(host[i], host[j]) : 1.0;
      max_oversub = std::max(max_oversub, o);
      std::size_t nic = i;
      if (pxn && rail[i] != rail[j]) {
        nic = proxy_of(i, rail[j]);
        if (nic != i) {
          sent_intra += b;
          intra_recv[nic] += b;
        }
      }
      inter_send[nic] += b * o;
      inter_recv[j] += b * o;
      messages[nic] += std::ceil(b / kNetP2pChunkBytes);
    }
    intra_send[i] = sent_intra;
  }
  double max_intra = 0, max_inter = 0, max_messages = 0;
  for (std::size_t i = 0; i < un; ++i) {
    max_intra = std::max({max_intra, intra_send[i], intra_recv[i]});
    max_inter = std::max({max_inter, inter_send[i], inter_recv[i]});
    max_messages = std::max(max_messages, messages[i]);
  }
  // The NIC share of one GPU without the legacy fabric-wide oversubscription (the tiers'
  // oversubscription is in the bytes above).
  const double nic_rate = network_bandwidth_per_gpu(s) * (tiers ? s.network.oversubscription : 1.0);
  const double t_intra = max_intra > 0 ? max_intra / a2a_intra_bandwidth(g) : 0.0;
  const double t_inter = max_inter > 0 ? max_inter / nic_rate : 0.0;
  // Per-message cost: the NIC's message rate where the system gives one, else NCCL's own
  // network post overhead per message (1 us on Intel and other hosts, 2 us on AMD:
  // getNetOverhead in NCCL's src/graph/tuning.cc), on the GPU's share of a NIC.
  const double nic_share = std::min(1.0, static_cast<double>(nics) / s.gpus_per_node);
  const bool amd = s.cpu.model.find("AMD") != std::string::npos || s.cpu.model.find("EPYC") != std::string::npos;
  const double per_message = s.network.message_rate > 0 ? 1.0 / s.network.message_rate : (amd ? 2e-6 : 1e-6);
  const double t_messages = max_messages * per_message / nic_share;
  CollectiveEstimate e;
  e.algorithm = pxn && max_inter > 0 ? "pxn" : "pairwise";
  e.protocol = "Simple";
  e.bottleneck = s.fabric == IntraFabric::kPcie ? "pcie" : "nvlink";
  if (std::max(t_inter, t_messages) > t_intra) e.bottleneck = max_oversub > 1 ? "spine" : "nic";
  const double alpha = (kA2aBaseUs + kA2aPerRankUs * n) * 1e-6;
  const double wire = std::max({t_intra, t_inter, t_messages});
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
  const NcclTopo t = nccl_topo(*system_, g);
  const NcclTable table = nccl_table(t, d.kind);
  const int order[] = {static_cast<int>(NcclAlgo::kRing), static_cast<int>(NcclAlgo::kTree),
                       static_cast<int>(NcclAlgo::kNvls), static_cast<int>(NcclAlgo::kNvlsTree),
                       static_cast<int>(NcclAlgo::kCollNetDirect), static_cast<int>(NcclAlgo::kCollNetChain),
                       static_cast<int>(NcclAlgo::kPat)};
  for (int a : order) {
    const int p = best_protocol(t, table, d.kind, d.bytes, static_cast<NcclAlgo>(a));
    if (p >= 0) out.push_back(timed(d, g, a, p));
  }
  return out;
}

CollectiveEstimate AlphaBetaCollectiveModel::forced(const CollectiveDesc& d, const RankGroup& g, const std::string& algorithm) const {
  if (g.size() <= 1 || d.kind == CollectiveKind::kAllToAll || d.kind == CollectiveKind::kAllToAllV) return estimate(d, g);
  const NcclTopo t = nccl_topo(*system_, g);
  const NcclTable table = nccl_table(t, d.kind);
  NcclAlgo a{};
  const bool named = !algorithm.empty() && nccl_algo_from_name(algorithm, &a);
  const NcclCost c = nccl_choice(t, table, d.kind, d.bytes, named ? &a : nullptr);
  CollectiveEstimate e = timed(d, g, static_cast<int>(c.algo), static_cast<int>(c.proto));
  // Never faster than a smaller size: where NCCL's choice changed below these bytes, the
  // previous choice's time at the switch is a floor.
  bool raised = false;
  for (const auto& [bytes, before] : switches(g, d.kind, named ? algorithm : std::string())) {
    if (bytes > d.bytes) break;
    const double floor = timed({d.kind, bytes, {}}, g, before.first, before.second).time;
    if (floor > e.time) {
      e.time = floor;
      raised = true;
    }
  }
  // Spread over several NVLink domains, never faster than the same ranks inside one.
  if (const auto inside = one_domain_group(*system_, g)) {
    const double floor = forced(d, *inside, algorithm).time;
    if (floor > e.time) {
      e.time = floor;
      raised = true;
    }
  }
  if (raised) {
    const double run = e.time - system_->host.collective_launch_overhead;
    e.bus_bandwidth = run > 0 ? d.bytes * bus_factor(d.kind, g.size()) / run : 0;
  }
  return e;
}

std::optional<RankGroup> one_domain_group(const SystemSpec& s, const RankGroup& g) {
  if (g.size() < 2) return std::nullopt;
  const int first = s.domain_of(g.ranks.front());
  bool spread = false;
  for (int r : g.ranks) spread = spread || s.domain_of(r) != first;
  if (!spread) return std::nullopt;
  // As many ranks as fit in one domain, from the start of the first one.
  RankGroup inside;
  const int n = std::min(g.size(), s.domain_size());
  for (int i = 0; i < n; ++i) inside.ranks.push_back(first * s.domain_size() + i);
  return inside.size() >= 2 ? std::optional<RankGroup>(inside) : std::nullopt;
}

double line_rate_floor(const SystemSpec& s, const RankGroup& g, CollectiveKind kind, double bytes) {
  const bool reduce = kind == CollectiveKind::kAllReduce;
  if (!reduce && !reduce_scatter_kind(kind) && kind != CollectiveKind::kAllGather) return 0.0;
  const int n = g.size();
  if (n < 2) return 0.0;
  const auto nd = static_cast<double>(shape_of(s, g).nodes);
  const double per_gpu = reduce ? bytes : bytes * (n - 1) / n;
  double t = s.domain_size() > 1 && s.gpu.nvlink_bandwidth > 0 ? per_gpu / s.gpu.nvlink_bandwidth : 0.0;
  const double nics = s.network.nic_bandwidth * s.network.nics_per_node * s.nodes_per_domain();
  if (nd > 1 && nics > 0) t = std::max(t, (reduce ? bytes : bytes * (nd - 1) / nd) / nics);
  return t;
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
  return forced(d, g, "");
}

}  // namespace perfcast

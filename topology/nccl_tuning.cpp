#include "topology/nccl_tuning.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <set>
#include <vector>

#include "topology/link_paths.hpp"

namespace perfcast {
namespace {

// Constants of NCCL's tuning model, NVIDIA/nccl @ 5067397c src/graph/tuning.cc, in the
// order [algorithm][protocol] with algorithms tree, ring, collnet direct, collnet chain,
// nvls, nvls tree, pat and protocols LL, LL128, Simple. Microseconds and GB/s.
constexpr double kBaseLatency[kNcclAlgos][kNcclProtos] = {
    {6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {8.0, 8.0, 8.0}};
/// Per-hop hardware latency over NVLink, PCIe and the network.
constexpr double kNvlinkLatency[kNcclAlgos][kNcclProtos] = {
    {0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0}};
constexpr double kPcieLatency[kNcclAlgos][kNcclProtos] = {
    {1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0}};
constexpr double kNetLatency[kNcclAlgos][kNcclProtos] = {
    {5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9}, {0, 0, 14}};
/// LL bandwidth caps: one node by GPU generation; 2 and >= 3 nodes by CPU vendor (Intel,
/// AMD), as NCCL indexes them.
constexpr double kLLMaxOneNode[4] = {39.0, 87.7, 141.0, 282.0};
constexpr double kLLMaxMultiNode[2][2] = {{39.0, 20.4}, {22.5, 19.0}};  // [amd][nodes >= 3]
/// Per-channel caps [generation][1 node, 2 nodes, >= 3 nodes].
constexpr double kRingLL128PerChannel[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {40, 40, 40}};
constexpr double kTreeLL128PerChannel[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kTreePerChannel[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
constexpr double kNvlsTreePerChannel[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 80.0}};
/// NVLS efficiency by generation (0 before Hopper).
constexpr double kNvlsEfficiencyByArch[4] = {0.0, 0.0, 0.85, 0.74};
/// NCCL's "tree correction factor" [protocol][log2(bytes / 64)], 64 B to 256 MB: its tree
/// all-reduce bandwidth is scaled by it because trees reach less than the model at mid
/// sizes.
constexpr double kTreeCorrection[kNcclProtos][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};
/// Per-lane NVLink rate NCCL assumes, GB/s (src/graph/topo.h): SM70 and SM80 20, SM90
/// 20.6, SM100 40.1.
constexpr double kNvlinkLaneGbps[4] = {20.0, 20.0, 20.6, 40.1};
/// Per-channel speeds the channel search tries, GB/s (src/graph/search.cc): inside one node
/// and across nodes, before Hopper, Hopper, Blackwell.
const std::vector<double> kIntraSpeeds[3] = {{40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3},
                                             {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3},
                                             {90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18}};
const std::vector<double> kInterSpeeds[3] = {
    {48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12},
    {48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12},
    {96, 86, 80, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12}};
/// Most channels a ring or tree graph takes (NCCL: MAXCHANNELS / 2) and an NVLS graph (its
/// NVLS arity).
constexpr int kMaxGraphChannels = 32;
constexpr int kMaxNvlsChannels = 32;
/// Network post overhead per ring step across nodes, us: 1 on Intel, 2 on AMD, x3 for
/// Simple (getNetOverhead).
constexpr double kNetOverheadIntel = 1.0;
constexpr double kNetOverheadAmd = 2.0;

int arch_index(NcclArch a) { return static_cast<int>(a); }
int speed_list(NcclArch a) { return a == NcclArch::kBlackwell ? 2 : (a == NcclArch::kHopper ? 1 : 0); }
/// Column of the per-node-count tables: 1 node, 2 nodes, >= 3 nodes.
int node_column(int nodes) { return nodes <= 2 ? nodes - 1 : 2; }
int ilog2(double x) {
  int k = 0;
  while (x >= 2.0) {
    x /= 2.0;
    ++k;
  }
  return k;
}

int steps_of(CollectiveKind kind, int n) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return 2 * (n - 1);
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter: return n - 1;
    default: return n;
  }
}

bool reduce_scatter_like(CollectiveKind k) { return k == CollectiveKind::kAllGather || k == CollectiveKind::kReduceScatter; }

/// Whether NCCL runs `algo` for `kind` at all (before topology rules).
bool algo_runs_collective(NcclAlgo a, CollectiveKind kind) {
  if (kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce) return a == NcclAlgo::kRing;
  if (reduce_scatter_like(kind))
    return a == NcclAlgo::kPat || a == NcclAlgo::kRing || a == NcclAlgo::kNvls || a == NcclAlgo::kCollNetDirect;
  if (kind == CollectiveKind::kAllReduce) return a != NcclAlgo::kPat;
  return false;
}

/// The topology rules of the enable step: NVLS needs NVSwitch multicast and, across nodes,
/// CollNet; NVLS Tree needs several nodes; CollNet needs SHARP and several nodes (Direct
/// also NVSwitch); PAT one rank per node.
bool algo_available(const NcclTopo& t, NcclAlgo a) {
  switch (a) {
    case NcclAlgo::kNvls: return t.nvls && (t.nodes == 1 || t.collnet);
    case NcclAlgo::kNvlsTree: return t.nvls && t.nodes > 1;
    case NcclAlgo::kCollNetDirect: return t.collnet && t.nodes > 1 && t.nvswitch;
    case NcclAlgo::kCollNetChain: return t.collnet && t.nodes > 1;
    case NcclAlgo::kPat: return t.ppn == 1 && t.nodes > 1 && t.arch != NcclArch::kVolta;
    default: return true;
  }
}

}  // namespace

std::string_view nccl_algo_name(NcclAlgo a) {
  switch (a) {
    case NcclAlgo::kTree: return "tree";
    case NcclAlgo::kRing: return "ring";
    case NcclAlgo::kCollNetDirect: return "collnet_direct";
    case NcclAlgo::kCollNetChain: return "collnet_chain";
    case NcclAlgo::kNvls: return "nvls";
    case NcclAlgo::kNvlsTree: return "nvls_tree";
    case NcclAlgo::kPat: return "pat";
  }
  return "?";
}

std::string_view nccl_proto_name(NcclProto p) {
  switch (p) {
    case NcclProto::kLL: return "LL";
    case NcclProto::kLL128: return "LL128";
    case NcclProto::kSimple: return "Simple";
  }
  return "?";
}

bool nccl_algo_from_name(std::string_view name, NcclAlgo* out) {
  std::string n;
  for (char c : name)
    if (c != '_') n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (int i = 0; i < kNcclAlgos; ++i) {
    std::string ours;
    for (char c : nccl_algo_name(static_cast<NcclAlgo>(i)))
      if (c != '_') ours += c;
    if (n == ours) {
      *out = static_cast<NcclAlgo>(i);
      return true;
    }
  }
  return false;
}

NcclArch nccl_arch(const GpuSpec& gpu) {
  const std::string& n = gpu.name;
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  if (has("B200") || has("B300") || has("GB2") || has("GB3") || has("Blackwell")) return NcclArch::kBlackwell;
  if (has("H100") || has("H200") || has("H800") || has("H20") || has("GH200") || has("Hopper")) return NcclArch::kHopper;
  if (has("A100") || has("A800") || has("A30") || has("A40") || has("A10")) return NcclArch::kAmpere;
  if (has("V100")) return NcclArch::kVolta;
  // Unknown: by FP8 support (Hopper and later) or not.
  return gpu.peak_fp8 > 0 ? NcclArch::kHopper : NcclArch::kAmpere;
}

NcclTopo nccl_topo(const SystemSpec& s, const RankGroup& g) {
  NcclTopo t;
  t.arch = nccl_arch(s.gpu);
  t.ranks = std::max(1, g.size());
  std::set<int> domains;
  for (int r : g.ranks) domains.insert(s.domain_of(r));
  t.nodes = std::max<int>(1, static_cast<int>(domains.size()));
  t.ppn = static_cast<double>(t.ranks) / t.nodes;
  t.nvswitch = s.fabric == IntraFabric::kNvSwitch;
  t.nvlink_intra = s.fabric == IntraFabric::kNvSwitch || s.fabric == IntraFabric::kNvlinkMesh;
  t.nvls = s.nvls && t.nvswitch && t.arch >= NcclArch::kHopper && t.ranks >= 2;
  t.collnet = s.network.sharp;
  t.amd_cpu = s.cpu.model.find("AMD") != std::string::npos || s.cpu.model.find("EPYC") != std::string::npos;
  t.arm_cpu = s.cpu.model.find("Grace") != std::string::npos || s.cpu.model.find("Arm") != std::string::npos;
  t.nvlink_gbps = s.gpu.nvlink_links * kNvlinkLaneGbps[arch_index(t.arch)];
  if (t.nvlink_gbps <= 0) t.nvlink_gbps = s.gpu.nvlink_bandwidth * kNvlinkEfficiency / 1e9;
  t.pcie_gbps = s.gpu.pcie_bandwidth * kPcieEfficiency / 1e9;
  t.nic_gbps = s.network.nic_bandwidth / 1e9;
  t.nics_per_node = s.network.nics_per_node * s.nodes_per_domain();
  return t;
}

NcclGraph nccl_graph(const NcclTopo& t, NcclPattern pattern) {
  NcclGraph g;
  const int list = speed_list(t.arch);
  if (t.nodes == 1) {
    const std::vector<double>& speeds = kIntraSpeeds[list];
    const double max_bw = t.nvlink_intra ? t.nvlink_gbps : t.pcie_gbps;
    if (pattern == NcclPattern::kNvls) {
      // One channel per GPU (heads), the speed such that all channels fit the GPU's
      // NVLink, which NVLS gets n / (n - 1) times of (it does not return to the start).
      g.channels = std::min(kMaxNvlsChannels, t.ranks);
      const double total = max_bw * t.ranks / std::max(1, t.ranks - 1);
      double s = speeds.back();
      for (double v : speeds)
        if (v <= max_bw && v * g.channels <= total) {
          s = v;
          break;
        }
      g.bw_intra = g.bw_inter = s;
      return g;
    }
    double s = speeds.back();
    for (double v : speeds)
      if (v <= max_bw) {
        s = v;
        break;
      }
    g.channels = std::clamp(static_cast<int>(max_bw / s), 1, kMaxGraphChannels);
    g.bw_intra = g.bw_inter = s;
  } else {
    const std::vector<double>& speeds = kInterSpeeds[list];
    // A channel leaves the node through one NIC, reached over PCIe.
    const double max_bw = std::min(t.pcie_gbps, t.nic_gbps);
    double s = speeds.back();
    for (double v : speeds)
      if (v <= max_bw) {
        s = v;
        break;
      }
    g.bw_intra = g.bw_inter = s;
    if (pattern == NcclPattern::kNvls) {
      g.channels = std::min(kMaxNvlsChannels, static_cast<int>(std::lround(t.ppn)));
      return g;
    }
    const int per_nic = std::max(1, static_cast<int>(t.nic_gbps / s));
    g.channels = std::clamp(t.nics_per_node * per_nic, 1, kMaxGraphChannels);
    // Second pass of the search for trees on two nodes: the intra-node speed may rise up
    // to twice the network speed (each node is a root of one tree).
    if (pattern == NcclPattern::kTree && (t.nodes <= 2 || t.collnet)) {
      const double intra_total = t.nvlink_intra ? t.nvlink_gbps : t.pcie_gbps;
      for (double v : speeds)
        if (v <= 2 * g.bw_inter && v * g.channels <= intra_total) {
          g.bw_intra = std::max(g.bw_intra, v);
          break;
        }
    }
  }
  // Channel duplication: fast channels are split in two (not NVLS; not on Hopper and later
  // below 50 GB/s with more than 4 channels).
  if (g.bw_intra >= 25.0 && !(t.arch >= NcclArch::kHopper && g.bw_intra < 50.0 && g.channels > 4)) {
    const int dup = std::min(2 * g.channels, kMaxGraphChannels);
    const int factor = (dup + g.channels - 1) / g.channels;
    g.bw_intra /= factor;
    g.bw_inter /= factor;
    g.channels = dup;
  }
  return g;
}

namespace {

/// The power of two at or above v (v >= 1): NCCL's pow2Up.
int pow2_up(int v) { return static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(1, v)))); }

/// NCCL's chunk of one point-to-point step, bytes (src/init.cc: NCCL_P2P_NET_CHUNKSIZE 128 KiB,
/// doubled on Grace with Blackwell; NCCL_P2P_NVL_CHUNKSIZE 512 KiB; NCCL_P2P_PCI_CHUNKSIZE 128 KiB).
double p2p_chunk_bytes(const NcclTopo& t) {
  if (t.nodes > 1) return (t.arm_cpu && t.arch >= NcclArch::kBlackwell ? 2.0 : 1.0) * 128 * 1024;
  return t.nvlink_intra ? 512.0 * 1024 : 128.0 * 1024;
}

/// NCCL_P2P_PER_CHANNEL_NET_BW: GB/s one point-to-point channel drives on a network (src/graph/paths.cc).
constexpr double kP2pPerChannelNetGbps = 14;

}  // namespace

int pair_transfer_sms(const SystemSpec& system, const RankGroup& group, const CollectiveDesc& desc) {
  if (group.size() != 2) return 0;
  // An all-to-allv's larger direction; an all-to-all's share for the other rank (nccl-tests'
  // convention: `bytes` is what each rank sends in all).
  double bytes = desc.kind == CollectiveKind::kAllToAllV ? 0.0 : desc.bytes / 2;
  for (double b : desc.pair_bytes) bytes = std::max(bytes, b);
  if (!(bytes > 0)) return 0;
  const NcclTopo t = nccl_topo(system, group);
  const int comm_channels = std::min(pow2_up(std::max(1, nccl_graph(t, NcclPattern::kRing).channels)), kMaxGraphChannels);
  int per_peer = 2;  // PCIe peer
  if (t.nodes > 1) {
    const int nics = std::max(1, static_cast<int>(std::lround(static_cast<double>(system.network.nics_per_node) / system.gpus_per_node)));
    per_peer = std::max(nics, static_cast<int>(std::ceil(nics * t.nic_gbps / kP2pPerChannelNetGbps)));
  } else if (t.nvlink_intra) {
    const int links = t.nvswitch ? system.gpu.nvlink_links : 1;
    per_peer = 2 * std::max(1, links);
  }
  per_peer = std::min(pow2_up(per_peer), comm_channels);  // one peer: divUp(2, 8) = 1 round
  int start = per_peer;
  while (start * 2 > comm_channels && start > 1) start /= 2;
  const double chunk = p2p_chunk_bytes(t);
  const double min_part = t.nodes > 1 ? chunk / 2 : chunk / 8, max_part = t.nodes > 1 ? chunk : chunk * 32;
  int n = static_cast<int>(std::min<double>(start, std::ceil(bytes / min_part)));
  while (std::ceil(bytes / n) > max_part && n <= per_peer / 2) n *= 2;
  return n;
}

int nccl_kernel_sms(const SystemSpec& system, const RankGroup& group, const CollectiveDesc& desc, std::string_view algorithm) {
  if (group.size() < 2) return 0;
  if (desc.kind == CollectiveKind::kAllToAll || desc.kind == CollectiveKind::kAllToAllV) {
    if (group.size() == 2) return pair_transfer_sms(system, group, desc);
    // Point-to-point channels (src/graph/paths.cc, ncclTopoComputeP2pChannels): the
    // communicator's channels rounded up to a power of two, at most MAXCHANNELS; an
    // all-to-all's sends and receives to every peer spread over all of them.
    return std::min(pow2_up(nccl_graph(nccl_topo(system, group), NcclPattern::kRing).channels), kMaxGraphChannels);
  }
  NcclAlgo a{};
  if (!nccl_algo_from_name(algorithm, &a)) return 0;
  const NcclPattern pattern = a == NcclAlgo::kRing || a == NcclAlgo::kPat                          ? NcclPattern::kRing
                              : a == NcclAlgo::kNvls || a == NcclAlgo::kNvlsTree                   ? NcclPattern::kNvls
                                                                                                   : NcclPattern::kTree;
  return nccl_graph(nccl_topo(system, group), pattern).channels;
}

NcclTable nccl_table(const NcclTopo& t, CollectiveKind kind) {
  NcclTable table;
  const int n = t.ranks;
  const int nodes = t.nodes;
  const double ppn = t.ppn;
  const int gen = arch_index(t.arch);
  const int col = node_column(nodes);
  const double ll_max = nodes == 1 ? kLLMaxOneNode[gen] : kLLMaxMultiNode[t.amd_cpu ? 1 : 0][nodes >= 3 ? 1 : 0];
  const int nsteps = steps_of(kind, n);
  const NcclGraph ring = nccl_graph(t, NcclPattern::kRing);
  const NcclGraph tree = nccl_graph(t, NcclPattern::kTree);
  const NcclGraph nvls = t.nvls ? nccl_graph(t, NcclPattern::kNvls) : NcclGraph{};
  table.ring_channels = ring.channels;
  const bool intra_nvlink = t.nvlink_intra;
  for (int ai = 0; ai < kNcclAlgos; ++ai) {
    const auto a = static_cast<NcclAlgo>(ai);
    if (!algo_runs_collective(a, kind) || !algo_available(t, a)) continue;
    const bool collnet = a == NcclAlgo::kCollNetDirect || a == NcclAlgo::kCollNetChain;
    const bool nvls_like = a == NcclAlgo::kNvls || a == NcclAlgo::kNvlsTree;
    const NcclGraph& gr = nvls_like ? nvls : (a == NcclAlgo::kRing || a == NcclAlgo::kPat ? ring : tree);
    if (gr.channels == 0) continue;
    for (int pi = 0; pi < kNcclProtos; ++pi) {
      const auto p = static_cast<NcclProto>(pi);
      if ((nvls_like || collnet || a == NcclAlgo::kPat) && p != NcclProto::kSimple) continue;
      // LL128 by default only where every path is NVLink-class (and the NIC path on Hopper).
      if (p == NcclProto::kLL128 && !intra_nvlink) continue;
      double bw = (nodes <= 2 || collnet) ? gr.bw_intra : gr.bw_inter;
      if (nvls_like) {
        if (gr.channels < 2) continue;
        double intra = gr.bw_intra * kNvlsEfficiencyByArch[gen] * (gr.channels - 1) / gr.channels;
        intra *= kind == CollectiveKind::kAllReduce ? 2.0 : (ppn - 1) / ppn;
        const double inter = gr.bw_inter * ((nodes <= 2 && a == NcclAlgo::kNvlsTree) ? 2.0 : 1.0);
        bw = std::min(intra, inter);
        if (a == NcclAlgo::kNvlsTree) bw = std::min(bw, kNvlsTreePerChannel[gen][col]);
      }
      double bus = gr.channels * bw;
      if (a == NcclAlgo::kRing && p == NcclProto::kLL) bus = std::min(ll_max, bus * 0.5);
      if (a == NcclAlgo::kRing && p == NcclProto::kLL128) bus = std::min(bus * 0.92, gr.channels * kRingLL128PerChannel[gen][col]);
      if (a == NcclAlgo::kTree && kind == CollectiveKind::kAllReduce) bus = std::min(bus * 0.92, gr.channels * kTreePerChannel[gen][col]);
      if (a == NcclAlgo::kTree && p == NcclProto::kLL) bus = std::min(bus / 3.8, ll_max);
      if (a == NcclAlgo::kTree && p == NcclProto::kLL128)
        bus = std::min(bus * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), gr.channels * kTreeLL128PerChannel[gen][col]);
      if (a == NcclAlgo::kPat) bus *= 0.75;
      if (a == NcclAlgo::kCollNetDirect) {
        if (reduce_scatter_like(kind)) {
          bus = ppn * std::min(gr.bw_intra, gr.bw_inter * 0.9);
        } else {
          double ratio = ppn / gr.channels;  // GPUs per NIC head
          ratio -= (ratio - 1) / 2;
          bus /= ratio;
          if (t.arch >= NcclArch::kHopper) bus *= 0.85;
        }
      }
      // All-gather / reduce-scatter over CollNet or NVLS across nodes need SHARP's own
      // all-gather / reduce-scatter, which the CollNet plugin rarely offers: off.
      if ((a == NcclAlgo::kNvls || a == NcclAlgo::kCollNetDirect) && reduce_scatter_like(kind) && nodes > 1) bus = 0;
      // Bus bandwidth to algorithm bandwidth.
      if (!(a != NcclAlgo::kRing && reduce_scatter_like(kind))) {
        bus *= (a == NcclAlgo::kRing || nvls_like) ? static_cast<double>(n) / nsteps : 0.5;
      }
      const double intra_lat = intra_nvlink ? kNvlinkLatency[ai][pi] : kPcieLatency[ai][pi];
      // With one rank per node every hop is a network hop: NCCL uses the tree's network latency.
      const double inter_lat = ppn == 1 ? kNetLatency[0][pi] : kNetLatency[ai][pi];
      double lat = kBaseLatency[ai][pi];
      switch (a) {
        case NcclAlgo::kRing:
          if (kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce) {
            lat += nodes == 1 ? intra_lat : kNetLatency[ai][pi];
          } else {
            double overhead = 0;
            if (nodes > 1) overhead = (t.amd_cpu ? kNetOverheadAmd : kNetOverheadIntel) * (p == NcclProto::kSimple ? 3 : 1);
            const int inter_steps = nodes == 1 ? 0 : (kind == CollectiveKind::kAllReduce ? 2 * (nodes - 1) : nodes - 1);
            lat += (nsteps - inter_steps) * std::max(intra_lat, overhead) + inter_steps * inter_lat;
          }
          break;
        case NcclAlgo::kTree:
          if (kind == CollectiveKind::kAllReduce) lat += 2 * ((ppn - 1) * intra_lat + ilog2(nodes) * inter_lat);
          break;
        case NcclAlgo::kCollNetDirect:
          lat += 2 * (std::min(1.0, ppn - 1) * intra_lat + (ppn - 1) * 0.4) + inter_lat;
          break;
        case NcclAlgo::kCollNetChain: lat += 2 * (ppn - 1) * intra_lat + inter_lat; break;
        case NcclAlgo::kNvls: lat = intra_lat + (nodes > 1 ? inter_lat : 0); break;
        case NcclAlgo::kNvlsTree: lat += intra_lat + 2 * ilog2(nodes) * inter_lat; break;
        case NcclAlgo::kPat:
          if (reduce_scatter_like(kind)) lat += ilog2(nodes) * (inter_lat / 3.5) + n * 2.8;
          break;
      }
      table.latency_us[ai][pi] = lat;
      table.bandwidth_gbps[ai][pi] = std::max(0.0, bus);
    }
  }
  return table;
}

double nccl_tree_correction(NcclProto proto, double bytes) {
  if (bytes < 64) return 1.0;
  const int k = ilog2(bytes / 64.0);
  return k < 24 ? kTreeCorrection[static_cast<int>(proto)][k] : 1.0;
}

double nccl_tree_correction_smooth(NcclProto proto, double bytes) {
  if (bytes < 64) return kTreeCorrection[static_cast<int>(proto)][0];
  // Bin k holds [64 x 2^k, 64 x 2^(k+1)); its centre is at log2(bytes / 64) = k + 0.5.
  const double x = std::log2(bytes / 64.0) - 0.5;
  auto at = [&](int k) { return k < 0 ? kTreeCorrection[static_cast<int>(proto)][0] : (k < 24 ? kTreeCorrection[static_cast<int>(proto)][k] : 1.0); };
  const int k = static_cast<int>(std::floor(x));
  const double w = x - k;
  return at(k) * (1 - w) + at(k + 1) * w;
}

std::vector<NcclSwitch> nccl_switches(const NcclTopo& t, const NcclTable& table, CollectiveKind kind, double max_bytes,
                                      const NcclAlgo* forced_algo) {
  std::vector<NcclSwitch> out;
  auto same = [](const NcclCost& a, const NcclCost& b) { return a.algo == b.algo && a.proto == b.proto; };
  const double step = std::pow(2.0, 0.25);
  double lo = 8;
  NcclCost before = nccl_choice(t, table, kind, lo, forced_algo);
  while (lo < max_bytes) {
    const double hi = std::min(lo * step, max_bytes);
    const NcclCost after = nccl_choice(t, table, kind, hi, forced_algo);
    if (!same(before, after)) {
      double a = lo, b = hi;  // choice(a) == before, choice(b) != before
      while (b / a > 1 + 1e-6) {
        const double m = std::sqrt(a * b);
        (same(nccl_choice(t, table, kind, m, forced_algo), before) ? a : b) = m;
      }
      out.push_back({b, before.algo, before.proto});
      before = nccl_choice(t, table, kind, b, forced_algo);
      lo = b;
      continue;
    }
    lo = hi;
  }
  return out;
}

double nccl_hop_latency_us(const NcclTopo& t, NcclAlgo algo, NcclProto proto, bool network) {
  const int ai = static_cast<int>(algo), pi = static_cast<int>(proto);
  if (network) return kNetLatency[ai][pi];
  return t.nvlink_intra ? kNvlinkLatency[ai][pi] : kPcieLatency[ai][pi];
}

double nccl_latency_us(const NcclTopo& t, const NcclTable& table, CollectiveKind kind, double bytes, NcclAlgo algo,
                       NcclProto proto) {
  double lat = table.latency_us[static_cast<int>(algo)][static_cast<int>(proto)];
  if (algo == NcclAlgo::kRing && proto == NcclProto::kSimple && t.nodes > 1 && kind == CollectiveKind::kAllReduce &&
      bytes / (static_cast<double>(table.ring_channels) * t.ranks) >= 64)
    lat *= t.arch < NcclArch::kAmpere ? 1.9 : 1.4;
  return lat;
}

bool nccl_cost(const NcclTopo& t, const NcclTable& table, CollectiveKind kind, double bytes, NcclAlgo algo,
               NcclProto proto, NcclCost* out) {
  const int ai = static_cast<int>(algo), pi = static_cast<int>(proto);
  double bw = table.bandwidth_gbps[ai][pi];
  if (bw <= 0) return false;
  const double lat = nccl_latency_us(t, table, kind, bytes, algo, proto);
  const int k = bytes >= 64 ? ilog2(bytes / 64.0) : -1;
  if (algo == NcclAlgo::kTree && kind == CollectiveKind::kAllReduce && k >= 0 && k < 23) bw *= nccl_tree_correction(proto, bytes);
  if (algo == NcclAlgo::kNvlsTree && kind == CollectiveKind::kAllReduce && t.arch >= NcclArch::kBlackwell && !t.arm_cpu && k >= 0 &&
      k < 24)
    bw *= nccl_tree_correction(proto, bytes);
  *out = NcclCost{algo, proto, lat, bw, lat + bytes / (1000.0 * bw)};
  return true;
}

NcclCost nccl_choice(const NcclTopo& t, const NcclTable& table, CollectiveKind kind, double bytes,
                     const NcclAlgo* forced_algo, const NcclProto* forced_proto) {
  for (int pass = 0; pass < 2; ++pass) {
    NcclCost best;
    bool any = false;
    for (int ai = 0; ai < kNcclAlgos; ++ai) {
      if (pass == 0 && forced_algo && static_cast<int>(*forced_algo) != ai) continue;
      for (int pi = 0; pi < kNcclProtos; ++pi) {
        if (pass == 0 && forced_proto && static_cast<int>(*forced_proto) != pi) continue;
        NcclCost c;
        if (!nccl_cost(t, table, kind, bytes, static_cast<NcclAlgo>(ai), static_cast<NcclProto>(pi), &c)) continue;
        if (!any || c.time_us < best.time_us) best = c;
        any = true;
      }
    }
    if (any) return best;
    if (!forced_algo && !forced_proto) break;
  }
  return NcclCost{NcclAlgo::kRing, NcclProto::kSimple, 0, 0, 0};
}

}  // namespace perfcast

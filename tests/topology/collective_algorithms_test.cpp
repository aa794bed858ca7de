// Algorithms beyond the ring (tree, NVLS, NVLS-tree, hierarchical): hand-worked values
// from NCCL's constants (docs/collectives.md section 1.3) and the rules every candidate
// must keep. Bandwidths: NVLink 450 GB/s x 0.82 = 369 GB/s, one 400 Gb/s NIC 50 GB/s x
// 0.92 = 46 GB/s, launch overhead 20 us.
#include <catch2/catch.hpp>

#include <cmath>

#include "topology/collective.hpp"
#include "topology/link_paths.hpp"

using namespace perfcast;

namespace {
SystemSpec load(const char* name) { return load_system(std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/" + name); }
RankGroup first(int n) {
  RankGroup g;
  for (int i = 0; i < n; ++i) g.ranks.push_back(i);
  return g;
}
CollectiveEstimate candidate(const AlphaBetaCollectiveModel& m, CollectiveDesc d, const RankGroup& g, const std::string& algo) {
  for (auto& c : m.candidates(d, g))
    if (c.algorithm == algo) return c;
  FAIL("no candidate " << algo);
  return {};
}
constexpr double kNvl = 450e9 * 0.82;
constexpr double kNic = 50e9 * 0.92;
}  // namespace

TEST_CASE("4-GPU ring all-reduce on DGX A100 (no NVLS): hand-worked", "[collective][algorithms]") {
  const SystemSpec s = load("dgx_a100.json");
  const AlphaBetaCollectiveModel m(s);
  const auto e = m.estimate({CollectiveKind::kAllReduce, 1e9, {}}, first(4));
  // Simple: 8.4 + 2(4-1) x 3.4 us; busBw 300 GB/s x 0.82; bytes x 2(4-1)/4.
  CHECK(e.algorithm == "ring");
  CHECK(e.protocol == "Simple");
  CHECK(e.time == Approx(20e-6 + (8.4 + 6 * 3.4) * 1e-6 + 1e9 * 1.5 / (300e9 * 0.82)).epsilon(1e-9));
  CHECK(m.candidates({CollectiveKind::kAllReduce, 1e9, {}}, first(4)).size() == 1);  // no NVLS on A100
}

TEST_CASE("NVLS all-reduce on DGX H100: in-switch reduction beats the link rate", "[collective][algorithms]") {
  const SystemSpec s = load("dgx_h100.json");
  const AlphaBetaCollectiveModel m(s);
  const auto e = m.estimate({CollectiveKind::kAllReduce, 1e9, {}}, first(8));
  // 25 us NVLS latency; algBw 0.6 x 450 GB/s = 270 GB/s.
  CHECK(e.algorithm == "nvls");
  CHECK(e.time == Approx(20e-6 + 25e-6 + 1e9 / 270e9).epsilon(1e-9));
  // busBw = S x 2(n-1)/n over the time without launch: above the 450 GB/s link rate.
  CHECK(e.bus_bandwidth == Approx(1e9 * 1.75 / (25e-6 + 1e9 / 270e9)).epsilon(1e-9));
  CHECK(e.bus_bandwidth > 450e9);
  // Small messages stay on ring LL: 6.6 + 14 x 0.94 us < 25 us.
  const auto small = m.estimate({CollectiveKind::kAllReduce, 64e3, {}}, first(8));
  CHECK(small.algorithm == "ring");
  CHECK(small.protocol == "LL");
  // Switch point between ring LL and NVLS: 5.24 us = S (1.75 / (0.5 x 369 GB/s) - 1/270 GB/s), ~0.9 MB.
  const double switch_bytes = (25.0 - 6.6 - 14 * 0.94) * 1e-6 / (1.75 / (0.5 * kNvl) - 1 / 270e9);
  CHECK(m.estimate({CollectiveKind::kAllReduce, switch_bytes * 0.95, {}}, first(8)).algorithm == "ring");
  CHECK(m.estimate({CollectiveKind::kAllReduce, switch_bytes * 1.05, {}}, first(8)).algorithm == "nvls");
  // 3 GPUs: the ring's algBw 369 / (4/3) = 277 GB/s beats NVLS's 270 at large sizes.
  CHECK(m.estimate({CollectiveKind::kAllReduce, 1e9, {}}, first(3)).algorithm == "ring");
}

TEST_CASE("tree across 2 nodes: chain inside, binary tree across, hand-worked", "[collective][algorithms]") {
  const SystemSpec s = load("cluster_4x_dgx_h100.json");
  const AlphaBetaCollectiveModel m(s);
  const double S = 1e9;
  // 2 x 8 GPUs. Chain: 2S per direction over NVLink; NICs: S per direction over 8 x 46 GB/s
  // (2 nodes). Bound: 2 / 369 GB/s per byte, at 0.92 (NCCL's tree cap). Simple latency:
  // 8.4 + 2 x ((8-1) x 4.0 + log2(2) x 14) us.
  const auto t = candidate(m, {CollectiveKind::kAllReduce, S, {}}, first(16), "tree");
  CHECK(t.protocol == "Simple");
  CHECK(t.time == Approx(20e-6 + (8.4 + 2 * (7 * 4.0 + 14.0)) * 1e-6 + S * 2 / kNvl / 0.92).epsilon(1e-9));
  CHECK(t.bottleneck == "nvlink");
  // One rank per node (ranks 0 and 8): NIC-bound, S per direction.
  RankGroup pair{{0, 8}};
  const auto p = candidate(m, {CollectiveKind::kAllReduce, S, {}}, pair, "tree");
  CHECK(p.time == Approx(20e-6 + (8.4 + 2 * 14.0) * 1e-6 + S / kNic / 0.92).epsilon(1e-9));
  CHECK(p.bottleneck == "network");
  CHECK(p.nic_busy == Approx(S / kNic));
  // 4 nodes, one rank each: interior nodes move 2S; log2(4) = 2 network hops each way.
  RankGroup four{{0, 8, 16, 24}};
  const auto q = candidate(m, {CollectiveKind::kAllReduce, S, {}}, four, "tree");
  CHECK(q.time == Approx(20e-6 + (8.4 + 2 * 2 * 14.0) * 1e-6 + 2 * S / kNic / 0.92).epsilon(1e-9));
}

TEST_CASE("hierarchical all-reduce on 2 nodes: hand-worked", "[collective][algorithms]") {
  const SystemSpec s = load("cluster_4x_dgx_h100.json");
  const AlphaBetaCollectiveModel m(s);
  const double S = 1e9;
  const auto h = candidate(m, {CollectiveKind::kAllReduce, S, {}}, first(16), "hierarchical");
  // Intra reduce-scatter and all-gather over 8 GPUs, Simple: 8.4 + 7 x 3.4 us + S x 7/8 / 369 GB/s each.
  const double intra = (8.4 + 7 * 3.4) * 1e-6 + S * 7.0 / 8.0 / kNvl;
  // Inter all-reduce of S/8 over 2 nodes on each rail, Simple: 8.4 + 2 x 14 us + S/8 x 1 / 46 GB/s.
  const double inter = (8.4 + 2 * 14.0) * 1e-6 + S / 8 / kNic;
  CHECK(h.time == Approx(20e-6 + 2 * intra + inter).epsilon(1e-9));
  CHECK(h.nic_busy == Approx(S / 8 / kNic));
  // NVLS-tree: 25 + 2 x 1 x 20.9 us; max(1 / 270 GB/s, 1 / (8 x 46 GB/s)) per byte.
  const auto nt = candidate(m, {CollectiveKind::kAllReduce, S, {}}, first(16), "nvls_tree");
  CHECK(nt.time == Approx(20e-6 + (25 + 2 * 20.9) * 1e-6 + S / 270e9).epsilon(1e-9));
  CHECK(m.estimate({CollectiveKind::kAllReduce, S, {}}, first(16)).algorithm == "nvls_tree");
  // Uneven groups (8 + 1 ranks) get no hierarchical candidate.
  RankGroup uneven = first(9);
  for (const auto& c : m.candidates({CollectiveKind::kAllReduce, S, {}}, uneven)) CHECK(c.algorithm != "hierarchical");
}

TEST_CASE("broadcast and reduce: pipelined ring, bus factor 1", "[collective][algorithms]") {
  const SystemSpec s = load("dgx_a100.json");
  const AlphaBetaCollectiveModel m(s);
  for (auto kind : {CollectiveKind::kBroadcast, CollectiveKind::kReduce}) {
    const auto e = m.estimate({kind, 1e9, {}}, first(8));
    CHECK(e.algorithm == "ring");
    // Simple: 8.4 + 7 x 3.4 us + S / 246 GB/s.
    CHECK(e.time == Approx(20e-6 + (8.4 + 7 * 3.4) * 1e-6 + 1e9 / (300e9 * 0.82)).epsilon(1e-9));
  }
}

TEST_CASE("rules: monotone and continuous in size, one rank free, busBw bounded", "[collective][algorithms][rule]") {
  for (const char* name : {"dgx_h100.json", "hgx_h200.json", "dgx_a100.json", "pcie_8gpu.json", "cluster_4x_dgx_h100.json"}) {
    const SystemSpec s = load(name);
    const AlphaBetaCollectiveModel m(s);
    std::vector<int> sizes{2, 3, 4, 8};
    if (s.nodes > 1) sizes = {2, 8, 9, 16, 24, 32};
    for (int n : sizes) {
      for (auto kind : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
                        CollectiveKind::kBroadcast, CollectiveKind::kReduce, CollectiveKind::kAllToAll}) {
        double prev = 0;
        for (double bytes = 8; bytes <= 16e9; bytes *= 1.37) {
          INFO(name << " n=" << n << " " << collective_name(kind) << " " << bytes);
          const auto e = m.estimate({kind, bytes, {}}, first(n));
          CHECK(e.time >= prev);
          // Continuity: 0.1% more bytes never costs more than 0.1% more time.
          CHECK(m.estimate({kind, bytes * 1.001, {}}, first(n)).time <= e.time * 1.001 + 1e-15);
          prev = e.time;
          const bool in_switch = e.algorithm == "nvls" || e.algorithm == "nvls_tree";
          // A tree on 2 nodes moves S, not 2(n-1)/n S, per NIC direction: its busBw may pass
          // the NIC sum (docs/collectives.md section 0).
          const bool tree = e.algorithm == "tree";
          const double nic_sum = s.network.nics_per_node * s.network.nic_bandwidth;
          const double link = std::max(s.fabric_bandwidth, nic_sum);
          if (!in_switch && !tree) CHECK(e.bus_bandwidth <= link);
          if (in_switch) CHECK(e.bus_bandwidth <= 2 * s.fabric_bandwidth);
        }
      }
      CHECK(m.estimate({CollectiveKind::kAllReduce, 1e9, {}}, first(1)).time == 0);
    }
  }
}

TEST_CASE("rules: more nodes are never faster for the same bytes per GPU", "[collective][algorithms][rule]") {
  const SystemSpec s = load("cluster_4x_dgx_h100.json");
  const AlphaBetaCollectiveModel m(s);
  for (double per_gpu = 8; per_gpu <= 8e9; per_gpu *= 2.3) {
    double prev_ar = 0, prev_ag = 0, prev_rs = 0, prev_bc = 0;
    for (int nodes = 1; nodes <= 4; ++nodes) {
      const int n = 8 * nodes;
      INFO(per_gpu << " B per GPU on " << nodes << " nodes");
      const double ar = m.estimate({CollectiveKind::kAllReduce, per_gpu, {}}, first(n)).time;
      const double ag = m.estimate({CollectiveKind::kAllGather, per_gpu * n, {}}, first(n)).time;
      const double rs = m.estimate({CollectiveKind::kReduceScatter, per_gpu * n, {}}, first(n)).time;
      const double bc = m.estimate({CollectiveKind::kBroadcast, per_gpu, {}}, first(n)).time;
      CHECK(ar >= prev_ar);
      CHECK(ag >= prev_ag);
      CHECK(rs >= prev_rs);
      CHECK(bc >= prev_bc);
      prev_ar = ar;
      prev_ag = ag;
      prev_rs = rs;
      prev_bc = bc;
    }
  }
}

TEST_CASE("multi-node all-to-all: NIC-bound, busy times for the contention model", "[collective][algorithms]") {
  const SystemSpec s = load("cluster_4x_dgx_h100.json");
  const AlphaBetaCollectiveModel m(s);
  const double S = 16 * 4e6;  // 4 MB to each of 16 ranks on 2 nodes
  const auto e = m.estimate({CollectiveKind::kAllToAll, S, {}}, first(16));
  CHECK(e.bottleneck == "network");
  CHECK(e.nic_busy == Approx(8 * 4e6 / kNic));
  CHECK(e.pcie_busy == Approx(8 * 4e6 / (64e9 * 0.76)));
  // Inside one node nothing crosses a NIC.
  CHECK(m.estimate({CollectiveKind::kAllToAll, S, {}}, first(8)).nic_busy == 0);
}

TEST_CASE("NVLink mesh: ring over the group's links, all-to-all pays for relays", "[collective][mesh]") {
  auto doc = load_json_file(std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/dgx_a100.json");
  apply_override(doc, "intra_node.fabric", "\"nvlink_mesh\"");
  apply_override(doc, "intra_node.links",
                 "[[0,1,1,2,2,0,0,0],[1,0,2,1,0,2,0,0],[1,2,0,1,0,0,2,0],[2,1,1,0,0,0,0,2],"
                 "[2,0,0,0,0,1,1,2],[0,2,0,0,1,0,2,1],[0,0,2,0,1,2,0,1],[0,0,0,2,2,1,1,0]]");
  const SystemSpec s = parse_system(doc);
  const AlphaBetaCollectiveModel m(s);
  const double link = 25e9 * 0.82;  // A100: 300 GB/s over 12 links, at 0.82
  CHECK(m.ring_bus_bandwidth(first(8)) == Approx(6 * link));        // 6 links per GPU
  CHECK(m.ring_bus_bandwidth(RankGroup{{0, 3}}) == Approx(2 * link));  // the pair's 2 links
  CHECK(m.ring_bus_bandwidth(RankGroup{{0, 5}}) == Approx(32e9 * 0.76));  // no link: PCIe
  // All-to-all over 8: 3 of GPU 0's 7 peers are relayed: 6 links / (1 + 3/7).
  CHECK(m.a2a_intra_bandwidth(first(8)) == Approx(6 * link / (1 + 3.0 / 7)));
  // No NVLS on a mesh, and busBw stays under the GPU's NVLink rate.
  for (const auto& c : m.candidates({CollectiveKind::kAllReduce, 1e9, {}}, first(8))) CHECK(c.algorithm == "ring");
  CHECK(m.estimate({CollectiveKind::kAllReduce, 16e9, {}}, first(8)).bus_bandwidth <= 300e9);
}

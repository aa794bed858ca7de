// Algorithms beyond the ring (tree, NVLS, NVLS-tree, hierarchical): hand-worked values
// from NCCL's constants (docs/collectives.md section 1.3) and the rules every candidate
// must keep. Bandwidths: NVLink 450 GB/s x 0.82 = 369 GB/s, one 400 Gb/s NIC 50 GB/s x
// 0.92 = 46 GB/s, launch overhead 20 us.
#include <catch2/catch.hpp>

#include <cmath>

#include "topology/collective.hpp"
#include "topology/link_paths.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_topology_collective_algorithms_test {

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
  for (const auto& c : m.candidates({CollectiveKind::kAllReduce, 1e9, {}}, first(4))) CHECK(c.algorithm != "nvls");  // no NVLS on A100
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
  // NCCL switches from ring LL to NVLS where its own model's times meet (nccl_tuning_test.cpp):
  // 15 + S / 80.57 GB/s = 25 + S / 228.57 GB/s, about 1.245 MB.
  const double switch_bytes = 10.0 / (1 / (141.0 * 8 / 14) - 1 / (400.0 * 8 / 14)) * 1000;
  CHECK(m.estimate({CollectiveKind::kAllReduce, switch_bytes * 0.99, {}}, first(8)).algorithm == "ring");
  const auto after = m.estimate({CollectiveKind::kAllReduce, switch_bytes * 1.01, {}}, first(8));
  CHECK(after.algorithm == "nvls");
  // perfcast's NVLS time just above the switch is below its ring LL time just below it: the
  // ring's time at the switch holds (times never fall with size).
  const double ring_at_switch = 20e-6 + (6.6 + 14 * 0.94) * 1e-6 + switch_bytes * 1.75 / (0.5 * kNvl);
  CHECK(20e-6 + 25e-6 + switch_bytes * 1.01 / 270e9 < ring_at_switch);
  CHECK(after.time == Approx(ring_at_switch).epsilon(1e-6));
  // 3 GPUs: the ring's algBw 369 / (4/3) = 277 GB/s beats NVLS's 270 at large sizes.
  CHECK(m.estimate({CollectiveKind::kAllReduce, 1e9, {}}, first(3)).algorithm == "ring");
}

TEST_CASE("tree and NVLS tree across 2 nodes: NCCL's latency and bandwidth, hand-worked", "[collective][algorithms]") {
  const SystemSpec s = load("cluster_4x_dgx_h100.json");
  const AlphaBetaCollectiveModel m(s);
  const double S = 1e9;
  // NCCL's tree on 2 x 8 GPUs: 8 channels of 48 GB/s (one per NIC); all-reduce busBw
  // min(384 x 0.92, 8 x 41.4) = 331.2 GB/s, algBw x 0.5; Simple latency 8.4 + 2 x (7 x 4.0 +
  // 1 x 14) us; NCCL's tree correction, interpolated between its bins: at 1 GB 0.9 x (1 - w) + w,
  // w = log2(1e9 / 64) - 0.5 - 23.
  const double w = std::log2(S / 64) - 0.5 - 23;
  const double corr = 0.9 * (1 - w) + 1.0 * w;
  const auto t = candidate(m, {CollectiveKind::kAllReduce, S, {}}, first(16), "tree");
  CHECK(t.protocol == "Simple");
  CHECK(t.time == Approx(20e-6 + (8.4 + 2 * (7 * 4.0 + 14.0)) * 1e-6 + S / (331.2e9 * 0.5 * corr)).epsilon(1e-9));
  CHECK(t.bottleneck == "nic");
  // NVLS tree: 8 channels of min(48 x 0.85 x 7/8 x 2, 2 x 48, 57.7) = 57.7 GB/s, x 16/30;
  // latency 25 + 2 x 20.9 us. NVLS's intra-node rate (71.4 per channel) is below the network's
  // (96): NVLink-bound.
  const auto nt = candidate(m, {CollectiveKind::kAllReduce, S, {}}, first(16), "nvls_tree");
  // NCCL applies no tree correction to NVLS tree on Hopper: neither does the time.
  CHECK(nt.time == Approx(20e-6 + (25 + 2 * 20.9) * 1e-6 + S / (8 * 57.7e9 * 16 / 30)).epsilon(1e-9));
  CHECK(nt.bottleneck == "nvlink");
  CHECK(m.estimate({CollectiveKind::kAllReduce, S, {}}, first(16)).algorithm == "nvls_tree");
  CHECK(nt.nic_busy == Approx(S / 8 / kNic));
  // No perfcast-only algorithms: what NCCL can run, nothing else.
  for (const auto& c : m.candidates({CollectiveKind::kAllReduce, S, {}}, first(16)))
    CHECK((c.algorithm == "ring" || c.algorithm == "tree" || c.algorithm == "nvls_tree"));
  // Uneven groups (8 + 1 ranks) still get an estimate.
  CHECK(m.estimate({CollectiveKind::kAllReduce, S, {}}, first(9)).time > 0);
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
          // Continuity while NCCL keeps its choice: 0.1% more bytes never costs more than
          // 0.1% more time (where NCCL switches algorithm or protocol the time may step up).
          const auto more = m.estimate({kind, bytes * 1.001, {}}, first(n));
          if (more.algorithm == e.algorithm && more.protocol == e.protocol) CHECK(more.time <= e.time * 1.001 + 1e-15);
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
  CHECK(e.bottleneck == "nic");
  CHECK(e.algorithm == "pxn");
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
  for (const auto& c : m.candidates({CollectiveKind::kAllReduce, 1e9, {}}, first(8)))
    CHECK((c.algorithm == "ring" || c.algorithm == "tree"));
  CHECK(m.estimate({CollectiveKind::kAllReduce, 16e9, {}}, first(8)).bus_bandwidth <= 300e9);
}

}  // namespace perfcast_test_topology_collective_algorithms_test

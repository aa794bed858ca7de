// NCCL's tuning model as perfcast reproduces it (topology/nccl_tuning.hpp): channel counts,
// NCCL's latency and bandwidth of an algorithm, and the algorithm NCCL picks, worked by
// hand from the constants of NVIDIA/nccl src/graph/tuning.cc and search.cc.
#include <catch2/catch.hpp>

#include <cmath>

#include "topology/nccl_tuning.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_topology_nccl_tuning_test {

using namespace perfcast;

namespace {
SystemSpec load(const char* name) { return load_system(std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/" + name); }
RankGroup first(int n) {
  RankGroup g;
  for (int i = 0; i < n; ++i) g.ranks.push_back(i);
  return g;
}
/// `per_node` ranks on each of `nodes` nodes of 8 GPUs.
RankGroup spread(int nodes, int per_node, int gpus_per_node = 8) {
  RankGroup g;
  for (int node = 0; node < nodes; ++node)
    for (int j = 0; j < per_node; ++j) g.ranks.push_back(node * gpus_per_node + j);
  return g;
}
NcclCost choice(const SystemSpec& s, const RankGroup& g, double bytes, CollectiveKind kind = CollectiveKind::kAllReduce) {
  const NcclTopo t = nccl_topo(s, g);
  return nccl_choice(t, nccl_table(t, kind), kind, bytes);
}
}  // namespace

TEST_CASE("channel search outcome on DGX H100: 12 ring channels of 30 GB/s, 8 NVLS channels of 50", "[nccl_tuning]") {
  const SystemSpec s = load("dgx_h100.json");
  const NcclTopo t = nccl_topo(s, first(8));
  CHECK(t.arch == NcclArch::kHopper);
  CHECK(t.nvlink_gbps == Approx(18 * 20.6));
  // 6 channels of 60 GB/s fit 370.8 GB/s, duplicated to 12 of 30.
  const NcclGraph ring = nccl_graph(t, NcclPattern::kRing);
  CHECK(ring.channels == 12);
  CHECK(ring.bw_intra == Approx(30));
  // NVLS: one channel per GPU, 8 x 50 <= 370.8 x 8/7 (8 x 60 does not fit).
  const NcclGraph nvls = nccl_graph(t, NcclPattern::kNvls);
  CHECK(nvls.channels == 8);
  CHECK(nvls.bw_intra == Approx(50));
  // NCCL's NVLS all-reduce: 8 x min(50 x 0.85 x 7/8 x 2, 50) = 400 busBw, x 8/14 algBw; 25 us.
  const NcclTable table = nccl_table(t, CollectiveKind::kAllReduce);
  CHECK(table.bandwidth_gbps[static_cast<int>(NcclAlgo::kNvls)][2] == Approx(400.0 * 8 / 14));
  CHECK(table.latency_us[static_cast<int>(NcclAlgo::kNvls)][2] == Approx(25.0));
  // Ring LL: min(141, 360 x 0.5) x 8/14; 6.6 + 14 x 0.6 us.
  CHECK(table.bandwidth_gbps[static_cast<int>(NcclAlgo::kRing)][0] == Approx(141.0 * 8 / 14));
  CHECK(table.latency_us[static_cast<int>(NcclAlgo::kRing)][0] == Approx(6.6 + 14 * 0.6));
}

TEST_CASE("SMs NCCL's kernel holds: one CTA per channel of the algorithm's graph", "[nccl_tuning]") {
  const SystemSpec s = load("dgx_h100.json");
  // DGX H100, 8 GPUs: 12 ring channels and 8 NVLS channels (worked above).
  CHECK(nccl_kernel_sms(s, first(8), {CollectiveKind::kAllReduce, 1 << 20, {}}, "ring") == 12);
  CHECK(nccl_kernel_sms(s, first(8), {CollectiveKind::kReduceScatter, 1 << 20, {}}, "ring") == 12);
  CHECK(nccl_kernel_sms(s, first(8), {CollectiveKind::kAllReduce, 1 << 20, {}}, "nvls") == 8);
  CHECK(nccl_kernel_sms(s, first(8), {CollectiveKind::kAllReduce, 1 << 20, {}}, "NVLSTree") == 8);
  // An all-to-all holds the point-to-point channels: 12 rounded up to a power of two.
  CHECK(nccl_kernel_sms(s, first(8), {CollectiveKind::kAllToAll, 1 << 20, {}}, "pairwise") == 16);
  CHECK(nccl_kernel_sms(s, first(8), {CollectiveKind::kAllToAllV, 0, std::vector<double>(64, 1 << 14)}, "pairwise") == 16);
  // Nothing modelled for other names or one rank.
  CHECK(nccl_kernel_sms(s, first(8), {CollectiveKind::kAllReduce, 1 << 20, {}}, "local") == 0);
  CHECK(nccl_kernel_sms(s, first(1), {CollectiveKind::kAllReduce, 1 << 20, {}}, "ring") == 0);
  CHECK(nccl_kernel_sms(s, first(1), {CollectiveKind::kAllToAll, 1 << 20, {}}, "pairwise") == 0);
}

TEST_CASE("a transfer between two ranks holds the channels NCCL gives one send of its size, hand-worked", "[nccl_tuning]") {
  const SystemSpec s = load("dgx_h100.json");
  const auto send = [](double bytes) { return CollectiveDesc{CollectiveKind::kAllToAllV, 0, {0, bytes, 0, 0}}; };
  // Two GPUs of a DGX H100: NVLink peers, 2 x 18 links = 36 channels per peer, a power of two
  // (64) at most the pair communicator's point-to-point channels (its ring channels rounded up).
  const int p2p = std::min(32, [&] {
    int p = 1;
    while (p < nccl_graph(nccl_topo(s, first(2)), NcclPattern::kRing).channels) p *= 2;
    return p;
  }());
  // A send starts on p2p / 2 channels (both ranks fit p2p), one per 64 KiB (512 KiB chunk / 8).
  CHECK(pair_transfer_sms(s, first(2), send(12.0 * (1 << 20))) == p2p / 2);  // 12 MiB: 192 parts, capped
  CHECK(pair_transfer_sms(s, first(2), send(100 * 1024)) == 2);              // 100 KiB: 2 parts of 64 KiB
  CHECK(pair_transfer_sms(s, first(2), send(1000)) == 1);
  CHECK(pair_transfer_sms(s, first(2), send(0)) == 0);
  CHECK(nccl_kernel_sms(s, first(2), send(100 * 1024), "pairwise") == 2);
  // A 2-rank all-to-all of 200 KiB a rank (nccl-tests' convention) sends 100 KiB to the other.
  CHECK(pair_transfer_sms(s, first(2), {CollectiveKind::kAllToAll, 200 * 1024, {}}) == 2);
  CHECK(pair_transfer_sms(s, first(2), {CollectiveKind::kAllToAll, 24.0 * (1 << 20), {}}) == p2p / 2);
  // Across two DGX H100 nodes: one 400 Gb/s NIC per GPU (50 GB/s): max(1, ceil(50 / 14)) = 4
  // channels per peer; 64 KiB parts (128 KiB chunk / 2) up to 4, never above 4.
  SystemSpec two = load("cluster_4x_dgx_h100.json");
  const RankGroup across{{0, 8}};
  CHECK(pair_transfer_sms(two, across, send(12.0 * (1 << 20))) == 4);
  CHECK(pair_transfer_sms(two, across, send(100 * 1024)) == 2);
  // Monotone in bytes, never above the per-peer channels.
  int last = 0;
  for (double b = 1; b < 1e10; b *= 3) {
    const int n = pair_transfer_sms(s, first(2), send(b));
    CHECK(n >= last);
    CHECK(n <= p2p);
    last = n;
  }
  // Not a pair: none from this rule.
  CHECK(pair_transfer_sms(s, first(8), send(1 << 20)) == 0);
}

TEST_CASE("NCCL's choice on one H100 node: ring LL below ~1.25 MB, NVLS above", "[nccl_tuning]") {
  const SystemSpec s = load("dgx_h100.json");
  CHECK(choice(s, first(8), 64e3).algo == NcclAlgo::kRing);
  CHECK(choice(s, first(8), 64e3).proto == NcclProto::kLL);
  CHECK(choice(s, first(8), 16e6).algo == NcclAlgo::kNvls);
  // Equal times: 15 + S / 80.57 GB/s = 25 + S / 228.57 GB/s at S = 10 us / (1/80.57 - 1/228.57) GB/s.
  const double ll = 141.0 * 8 / 14, nvls = 400.0 * 8 / 14;
  const double cross = 10.0 / (1 / ll - 1 / nvls) * 1000;  // bytes
  CHECK(cross == Approx(1.245e6).epsilon(0.01));
  CHECK(choice(s, first(8), cross * 0.99).algo == NcclAlgo::kRing);
  CHECK(choice(s, first(8), cross * 1.01).algo == NcclAlgo::kNvls);
  const auto sw = nccl_switches(nccl_topo(s, first(8)), nccl_table(nccl_topo(s, first(8)), CollectiveKind::kAllReduce),
                                CollectiveKind::kAllReduce, 1e9);
  REQUIRE(!sw.empty());
  CHECK(sw.back().bytes == Approx(cross).epsilon(1e-4));
  CHECK(sw.back().algo_before == NcclAlgo::kRing);
}

TEST_CASE("4 H200 GPUs: NCCL runs a ring, not NVLS (4 NVLS channels reach less)", "[nccl_tuning]") {
  const SystemSpec s = load("hgx_h200.json");
  // NVLS: 4 channels of 60 (4 x 60 <= 370.8 x 4/3): 4 x min(60 x 0.85 x 3/4 x 2, 60) = 240 busBw,
  // algBw 240 x 4/6 = 160 GB/s; the ring's 360 x 4/6 = 240 GB/s.
  const NcclTopo t = nccl_topo(s, first(4));
  const NcclTable table = nccl_table(t, CollectiveKind::kAllReduce);
  CHECK(table.bandwidth_gbps[static_cast<int>(NcclAlgo::kNvls)][2] == Approx(160.0));
  CHECK(table.bandwidth_gbps[static_cast<int>(NcclAlgo::kRing)][2] == Approx(240.0));
  for (double bytes : {1e6, 64e6, 1e9, 16e9}) CHECK(choice(s, first(4), bytes).algo == NcclAlgo::kRing);
  CHECK(choice(s, first(8), 1e9).algo == NcclAlgo::kNvls);
}

TEST_CASE("two and four H100 nodes on NDR: NVLS Tree, then a ring for the largest sizes", "[nccl_tuning]") {
  const SystemSpec s = load("cluster_4x_dgx_h100.json");
  // Across nodes a channel leaves through one NIC at 48 GB/s (the top speed that
  // min(PCIe 48.6, NIC 50) allows): 8 channels, not duplicated (Hopper, < 50 GB/s, > 4).
  const NcclTopo t2 = nccl_topo(s, spread(2, 8));
  CHECK(t2.nodes == 2);
  const NcclGraph ring = nccl_graph(t2, NcclPattern::kRing);
  CHECK(ring.channels == 8);
  CHECK(ring.bw_inter == Approx(48));
  const NcclTable table2 = nccl_table(t2, CollectiveKind::kAllReduce);
  const int nt = static_cast<int>(NcclAlgo::kNvlsTree);
  // NVLS Tree per channel: min(48 x 0.85 x 7/8 x 2 = 71.4, 48 x 2 (2 nodes), cap 57.7) = 57.7;
  // 8 channels, x 16/30 algBw; latency 25 + 2 x log2(2) x 20.9 us.
  CHECK(table2.bandwidth_gbps[nt][2] == Approx(8 * 57.7 * 16 / 30));
  CHECK(table2.latency_us[nt][2] == Approx(25 + 2 * 20.9));
  CHECK(choice(s, spread(2, 8), 1e9).algo == NcclAlgo::kNvlsTree);
  // Four nodes: the cap is 45.5 and there is no x2: 8 x 45.5 x 32/62; the ring's 8 x 48 x
  // 32/62 is faster per byte and wins once its 2(n-1)-step latency (x1.4) is paid off.
  const NcclTopo t4 = nccl_topo(s, spread(4, 8));
  const NcclTable table4 = nccl_table(t4, CollectiveKind::kAllReduce);
  CHECK(table4.bandwidth_gbps[nt][2] == Approx(8 * 45.5 * 32 / 62));
  CHECK(table4.bandwidth_gbps[static_cast<int>(NcclAlgo::kRing)][2] == Approx(8 * 48.0 * 32 / 62));
  // Ring Simple latency: 8.4 + (62 - 6) x max(3.4, 1 x 3) + 6 x 14 us (Intel host), x1.4.
  CHECK(nccl_latency_us(t4, table4, CollectiveKind::kAllReduce, 1e9, NcclAlgo::kRing, NcclProto::kSimple) ==
        Approx((8.4 + 56 * 3.4 + 6 * 14) * 1.4));
  CHECK(choice(s, spread(4, 8), 64e6).algo == NcclAlgo::kNvlsTree);
  CHECK(choice(s, spread(4, 8), 16e9).algo == NcclAlgo::kRing);
}

TEST_CASE("two A100 nodes with 4 NICs: the tree's intra-node speed doubles (second search pass)", "[nccl_tuning]") {
  const SystemSpec s = load("aws_p4de.json");
  const NcclTopo t = nccl_topo(s, spread(2, 8));
  CHECK(t.arch == NcclArch::kAmpere);
  // 100 Gb/s NICs: 12.5 GB/s, speed 12; 4 channels. The tree graph's intra speed rises to 24.
  const NcclGraph tree = nccl_graph(t, NcclPattern::kTree);
  CHECK(tree.channels == 4);
  CHECK(tree.bw_inter == Approx(12));
  CHECK(tree.bw_intra == Approx(24));
  // Tree all-reduce on 2 nodes uses the intra speed: min(4 x 24 x 0.92, 4 x 23.6) x 0.5.
  const NcclTable table = nccl_table(t, CollectiveKind::kAllReduce);
  CHECK(table.bandwidth_gbps[static_cast<int>(NcclAlgo::kTree)][2] == Approx(std::min(4 * 24 * 0.92, 4 * 23.6) * 0.5));
  CHECK(choice(s, spread(2, 8), 2e9).algo == NcclAlgo::kTree);
}

TEST_CASE("CollNet with SHARP, PAT with one rank per node, LL128 off over PCIe", "[nccl_tuning]") {
  auto doc = load_json_file(std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/dgx_h100_superpod.json");
  const SystemSpec sharp = parse_system(doc);
  const NcclTopo t = nccl_topo(sharp, spread(8, 8));
  CHECK(t.collnet);
  const NcclTable table = nccl_table(t, CollectiveKind::kAllReduce);
  // CollNet Chain: 8 channels of 48 (bwIntra, as collnet uses) x 0.5; latency 2 x 7 x 2.8 + 30 us.
  CHECK(table.bandwidth_gbps[static_cast<int>(NcclAlgo::kCollNetChain)][2] == Approx(8 * 48 * 0.5));
  CHECK(table.latency_us[static_cast<int>(NcclAlgo::kCollNetChain)][2] == Approx(2 * 7 * 2.8 + 30));
  // NVLS across nodes is allowed with CollNet; all-gather over it is not (no SHARP all-gather).
  CHECK(table.bandwidth_gbps[static_cast<int>(NcclAlgo::kNvls)][2] > 0);
  CHECK(nccl_table(t, CollectiveKind::kAllGather).bandwidth_gbps[static_cast<int>(NcclAlgo::kNvls)][2] == 0);
  // PAT: all-gather with one rank per node only.
  const NcclTopo one = nccl_topo(sharp, spread(8, 1));
  CHECK(nccl_table(one, CollectiveKind::kAllGather).bandwidth_gbps[static_cast<int>(NcclAlgo::kPat)][2] > 0);
  CHECK(nccl_table(t, CollectiveKind::kAllGather).bandwidth_gbps[static_cast<int>(NcclAlgo::kPat)][2] == 0);
  // PCIe-only node: no LL128.
  const SystemSpec pcie = load("pcie_8gpu.json");
  const NcclTable pt = nccl_table(nccl_topo(pcie, first(8)), CollectiveKind::kAllReduce);
  CHECK(pt.bandwidth_gbps[static_cast<int>(NcclAlgo::kRing)][1] == 0);
  CHECK(pt.bandwidth_gbps[static_cast<int>(NcclAlgo::kRing)][2] > 0);
}

TEST_CASE("GB200 NVL72: 72 GPUs in one NVLink domain are one NCCL node", "[nccl_tuning]") {
  const SystemSpec s = load("gb200_nvl72.json");
  REQUIRE(s.domain_size() == 72);
  const NcclTopo t = nccl_topo(s, first(72));
  CHECK(t.arch == NcclArch::kBlackwell);
  CHECK(t.nodes == 1);
  CHECK(t.ppn == 72);
  CHECK(t.nics_per_node == 72);
  // NVLS inside the domain at large sizes.
  const NcclCost c = choice(s, first(72), 256e6);
  CHECK((c.algo == NcclAlgo::kNvls || c.algo == NcclAlgo::kRing));
  CHECK(c.algo != NcclAlgo::kNvlsTree);
}

TEST_CASE("tree correction: NCCL's bins, and the smooth version times use", "[nccl_tuning]") {
  // Simple: 0.5 in bins 11-14 (128 KiB - 2 MiB), 0.9 from 64 MB up to the last bin.
  CHECK(nccl_tree_correction(NcclProto::kSimple, 64.0 * (1 << 12)) == Approx(0.5));
  CHECK(nccl_tree_correction(NcclProto::kSimple, 8e9) == Approx(1.0));
  // The smooth factor equals the bin value at a bin's centre and never makes bytes / factor fall.
  CHECK(nccl_tree_correction_smooth(NcclProto::kSimple, 64.0 * std::pow(2.0, 12.5)) == Approx(0.5));
  for (int p = 0; p < 3; ++p) {
    double prev = 0;
    for (double b = 64; b < 1e11; b *= 1.01) {
      const double v = b / nccl_tree_correction_smooth(static_cast<NcclProto>(p), b);
      CHECK(v >= prev);
      prev = v;
    }
  }
}

}  // namespace perfcast_test_topology_nccl_tuning_test

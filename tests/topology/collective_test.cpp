#include <catch2/catch.hpp>

#include "topology/collective.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_topology_collective_test {

using namespace perfcast;

namespace {
SystemSpec load(const char* name) { return load_system(std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/" + name); }
RankGroup first(int n) {
  RankGroup g;
  for (int i = 0; i < n; ++i) g.ranks.push_back(i);
  return g;
}
}  // namespace

TEST_CASE("ring all-reduce on NVSwitch: hand-worked value at a large size", "[collective]") {
  const SystemSpec s = load("dgx_h100.json");
  const AlphaBetaCollectiveModel m(s);
  const double bytes = 1e9;
  // The ring candidate (NVLS is faster here; see collective_algorithms_test.cpp).
  const auto e = m.candidates({CollectiveKind::kAllReduce, bytes, {}}, first(8)).front();
  CHECK(e.algorithm == "ring");
  // Simple protocol wins: alpha = 8.4 + 14 * 3.4 = 56 us; busBw = 450 GB/s * 0.82 = 369 GB/s;
  // time = 20 us launch + 56 us + 1e9 * 2 * 7/8 / 369e9.
  const double expected = 20e-6 + 56e-6 + 1e9 * 1.75 / 369e9;
  CHECK(e.protocol == "Simple");
  CHECK(e.time == Approx(expected).epsilon(1e-9));
  CHECK(e.bottleneck == "nvlink");
}

TEST_CASE("small all-reduce picks LL: latency-bound", "[collective]") {
  const SystemSpec s = load("dgx_h100.json");
  const AlphaBetaCollectiveModel m(s);
  const auto e = m.estimate({CollectiveKind::kAllReduce, 1024, {}}, first(8));
  CHECK(e.protocol == "LL");
  // LL alpha = 6.6 + 14 * 0.94 (hop latency above NCCL's 0.6) us. 1 KiB is below one
  // channel's LL threshold (512 threads x 8 B x 8 ranks = 32 KiB), so NCCL runs it on one
  // of the 12 ring channels: 1/12 of the ring bandwidth.
  CHECK(e.time == Approx(20e-6 + (6.6 + 14 * 0.94) * 1e-6 + 1024 * 12 * 1.75 / (369e9 * 0.5)).epsilon(1e-9));
}

TEST_CASE("collective time never decreases with size and busBw stays under the link rate", "[collective][rule]") {
  for (const char* name : {"dgx_h100.json", "pcie_8gpu.json", "cluster_4x_dgx_h100.json", "dgx_a100.json"}) {
    const SystemSpec s = load(name);
    const AlphaBetaCollectiveModel m(s);
    for (auto kind : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
                      CollectiveKind::kAllToAll, CollectiveKind::kBroadcast}) {
      double prev = 0;
      for (double bytes = 8; bytes <= 8e9; bytes *= 1.7) {
        const auto e = m.estimate({kind, bytes, {}}, first(s.world_size()));
        INFO(name << " " << collective_name(kind) << " " << bytes);
        CHECK(e.time >= prev);
        prev = e.time;
        const double link = std::max(s.fabric_bandwidth, s.network.nic_bandwidth * s.network.nics_per_node);
        // In-switch reduction (NVLS) is the one exception (docs/collectives.md section 2).
        if (e.algorithm != "nvls" && e.algorithm != "nvls_tree") CHECK(e.bus_bandwidth <= link);
      }
    }
  }
}

TEST_CASE("PCIe across two CPUs: the ring is bound by the CPU link, not halved", "[collective]") {
  const SystemSpec s = load("pcie_8gpu.json");
  const AlphaBetaCollectiveModel m(s);
  // 4 GPUs under one CPU: PCIe Gen5 x16 at 0.76 = 48.6 GB/s. 5 or 8 GPUs cross the
  // 22 GB/s CPU link once per direction.
  CHECK(m.ring_bus_bandwidth(first(4)) == Approx(64e9 * 0.76));
  CHECK(m.ring_bus_bandwidth(first(5)) == Approx(22e9));
  CHECK(m.ring_bus_bandwidth(first(8)) == Approx(22e9));
  // All-to-all over 8: each GPU sends 4/7 of its bytes across, 4 GPUs share the link:
  // 22 / (4/7 x 4) = 9.625 GB/s. Over 5 (4 + 1): the lone GPU sends everything across
  // alone, the other four send 1/4 each: 22 / (1/4 x 4) = 22 GB/s.
  CHECK(m.a2a_intra_bandwidth(first(8)) == Approx(22e9 / (4.0 / 7 * 4)));
  CHECK(m.a2a_intra_bandwidth(first(5)) == Approx(22e9));
}

TEST_CASE("uneven all-to-allv is bound by the most loaded rank", "[collective]") {
  const SystemSpec s = load("dgx_h100.json");
  const AlphaBetaCollectiveModel m(s);
  // 4 ranks; rank 0 sends 100 MB to each peer, the others send 1 MB to each peer.
  std::vector<double> pairs(16, 1e6);
  for (int j = 0; j < 4; ++j) pairs[static_cast<std::size_t>(j)] = 100e6;
  for (int i = 0; i < 4; ++i) pairs[static_cast<std::size_t>(i * 4 + i)] = 0;
  const auto e = m.estimate({CollectiveKind::kAllToAllV, 0, pairs}, first(4));
  const double bw = 450e9 * 0.82;
  const double alpha = (6.27 + 0.685 * 4) * 1e-6;
  CHECK(e.time == Approx(20e-6 + alpha + 300e6 / bw).epsilon(1e-9));  // rank 0 sends 300 MB
  // The same total spread evenly is faster.
  std::vector<double> even(16, (300e6 + 9e6) / 12);
  for (int i = 0; i < 4; ++i) even[static_cast<std::size_t>(i * 4 + i)] = 0;
  CHECK(m.estimate({CollectiveKind::kAllToAllV, 0, even}, first(4)).time < e.time);
}

TEST_CASE("multi-node all-to-all goes through the NICs", "[collective]") {
  const SystemSpec s = load("cluster_4x_dgx_h100.json");
  const AlphaBetaCollectiveModel m(s);
  const double bytes = 32 * 8e6;  // 8 MB to each of 32 ranks
  const auto e = m.estimate({CollectiveKind::kAllToAll, bytes, {}}, first(32));
  CHECK(e.bottleneck == "nic");
  // 24 remote peers x 8 MB over one 400 Gb/s NIC at 0.92.
  const double alpha = (6.27 + 0.685 * 32) * 1e-6;
  CHECK(e.time == Approx(20e-6 + alpha + 24 * 8e6 / (50e9 * 0.92)).epsilon(1e-9));
}

}  // namespace perfcast_test_topology_collective_test

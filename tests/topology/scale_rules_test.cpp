// Rules every collective estimate keeps across scale, on every shipped multi-node system:
// time never decreases with size; never below what the bottleneck link allows at its line
// rate; more nodes are never faster per byte on the same fabric; oversubscription never
// helps; NVLink domains larger than a node keep their traffic off the NICs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "tests/sanitized.hpp"
#include "topology/collective_calibration.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_topology_scale_rules_test {

using namespace perfcast;

namespace {
std::string path(const char* name) { return std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/" + name; }
SystemSpec load_nodes(const char* name, int nodes) {
  auto doc = load_json_file(path(name));
  apply_override(doc, "nodes", std::to_string(nodes));
  return parse_system(doc);
}
/// `per_node` ranks on each of the first `nodes` nodes.
RankGroup spread(const SystemSpec& s, int nodes, int per_node) {
  RankGroup g;
  for (int node = 0; node < nodes; ++node)
    for (int j = 0; j < per_node; ++j) g.ranks.push_back(node * s.gpus_per_node + j);
  return g;
}

/// Under AddressSanitizer the all-to-all's pair-by-pair cost at 64 and 128 nodes (up to a
/// million rank pairs per size) made the topology tests take 10 minutes of CI's sanitizer
/// stage; there the all-to-all is checked up to 32 nodes, the other collectives at every
/// node count. The plain build checks everything.
constexpr int kMaxAllToAllNodes = test::kSanitized ? 32 : 1 << 20;

struct Shape {
  const char* system;
  int nodes;
};
constexpr Shape kSystems[] = {{"dgx_h100_superpod.json", 64}, {"cluster_4x_dgx_h100.json", 4}, {"aws_p5.json", 2},
                              {"aws_p4de.json", 2},           {"gcp_a3_mega.json", 2},         {"hgx_b200.json", 4},
                              {"gb200_nvl72.json", 36}};
}  // namespace

TEST_CASE("scale rules: monotone in size, never below the bottleneck's line rate", "[collective][rule][scale]") {
  for (const Shape& sh : kSystems) {
    const SystemSpec s = load_nodes(sh.system, sh.nodes);
    const auto model = make_collective_model(s);
    const int per_node = s.gpus_per_node;
    for (int nodes : {1, 2, sh.nodes}) {
      if (nodes % s.nodes_per_domain() != 0 && nodes > s.nodes_per_domain()) continue;
      for (int ppn : {1, per_node}) {
        const RankGroup g = spread(s, std::min(nodes, s.nodes), ppn);
        if (g.size() < 2) continue;
        for (auto kind : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
                          CollectiveKind::kBroadcast, CollectiveKind::kAllToAll}) {
          if (kind == CollectiveKind::kAllToAll && nodes > kMaxAllToAllNodes) continue;
          double prev = 0;
          for (double bytes = 8; bytes <= 32e9; bytes *= 1.37) {
            INFO(sh.system << " nodes=" << nodes << " ppn=" << ppn << " " << collective_name(kind) << " " << bytes);
            const auto e = model->estimate({kind, bytes, {}}, g);
            CHECK(std::isfinite(e.time));
            CHECK(e.time >= prev);
            prev = e.time;
            if (kind != CollectiveKind::kBroadcast && kind != CollectiveKind::kAllToAll)
              CHECK(e.time >= line_rate_floor(s, g, kind, bytes));  // hand-worked below
            CHECK(!e.bottleneck.empty());
          }
        }
      }
    }
  }
}

/// NCCL's choice is its own model's fastest; perfcast's time of that choice can be a little
/// slower than its time of the choice NCCL makes one node count up (at 4 H100 nodes NCCL runs a
/// ring whose NVLink-bound rate perfcast counts, at 8 an NVLS tree; the floor that keeps the
/// time monotone in size sits at switch sizes that move with the node count). Largest seen:
/// aws_p5 (calibrated at 2 nodes), 2.5 GB per GPU, ring on 4 nodes 13.93 ms, NVLS tree on 8
/// nodes 13.66 ms (-2.0%); 7.75 GB per GPU, ring on 8 nodes, NVLS tree on 16 (-1.6%): within 2.5%.
constexpr double kNodeRuleSlack = 0.025;

TEST_CASE("line-rate floor: hand-worked values, and calibrated times keep it", "[collective][rule][scale]") {
  // Two HGX B200 nodes: 8 NICs of 400 Gb/s (50 GB/s) a node, NVLink 900 GB/s a GPU.
  const SystemSpec s = load_nodes("hgx_b200.json", 2);
  const RankGroup one_a_node{{0, 8}};
  // All-reduce of 400 MB: each node's NICs carry 400 MB at 400 GB/s (1 ms); each GPU's
  // NVLink 400 MB at 900 GB/s (0.44 ms): 1 ms.
  CHECK(line_rate_floor(s, one_a_node, CollectiveKind::kAllReduce, 400e6) == Approx(1e-3).epsilon(1e-12));
  // All-gather of 400 MB over 2 domains: half leaves each node (0.5 ms); NVLink 200 MB (0.22 ms).
  CHECK(line_rate_floor(s, one_a_node, CollectiveKind::kAllGather, 400e6) == Approx(0.5e-3).epsilon(1e-12));
  // Inside one node: NVLink only, 400 MB at 900 GB/s.
  CHECK(line_rate_floor(s, RankGroup{{0, 1}}, CollectiveKind::kAllReduce, 400e6) == Approx(400e6 / 900e9).epsilon(1e-12));
  CHECK(line_rate_floor(s, one_a_node, CollectiveKind::kBroadcast, 400e6) == 0.0);
  // The shipped B200 fit was made on groups of 8 GPUs a node; on one GPU a node its scales
  // alone would move 500 MB faster than the NICs can (1.22 ms against 1.25 ms).
  const auto model = make_collective_model(s);
  for (double bytes : {5e8, 2.4e9}) {
    const auto e = model->estimate({CollectiveKind::kAllReduce, bytes, {}}, one_a_node);
    CHECK(e.time >= line_rate_floor(s, one_a_node, CollectiveKind::kAllReduce, bytes));
  }
}

TEST_CASE("scale rules: more nodes are never faster for the same bytes per GPU", "[collective][rule][scale]") {
  for (const char* name : {"dgx_h100_superpod.json", "aws_p5.json", "hgx_b200.json", "gcp_a3_mega.json"}) {
    const SystemSpec s = load_nodes(name, 128);
    const auto model = make_collective_model(s);  // calibrated where the system names a calibration
    const CollectiveModel& m = *model;
    for (double per_gpu = 1024; per_gpu <= 8e9; per_gpu *= 3.1) {
      double prev_ar = 0, prev_ag = 0, prev_rs = 0, prev_a2a = 0;
      for (int nodes : {1, 2, 3, 4, 8, 16, 32, 64, 128}) {
        const RankGroup g = spread(s, nodes, s.gpus_per_node);
        const int n = g.size();
        INFO(name << " " << per_gpu << " B per GPU on " << nodes << " nodes");
        const double ar = m.estimate({CollectiveKind::kAllReduce, per_gpu, {}}, g).time;
        const double ag = m.estimate({CollectiveKind::kAllGather, per_gpu * n, {}}, g).time;
        const double rs = m.estimate({CollectiveKind::kReduceScatter, per_gpu * n, {}}, g).time;
        CHECK(ar >= prev_ar * (1 - kNodeRuleSlack));
        CHECK(ag >= prev_ag * (1 - kNodeRuleSlack));
        CHECK(rs >= prev_rs * (1 - kNodeRuleSlack));
        // All-to-all with the same bytes to every peer: a rank's buffer grows with n.
        const double a2a = nodes <= kMaxAllToAllNodes ? m.estimate({CollectiveKind::kAllToAll, per_gpu / 64 * n, {}}, g).time
                                                      : prev_a2a;
        CHECK(a2a >= prev_a2a * (1 - 1e-12));
        prev_ar = ar;
        prev_ag = ag;
        prev_rs = rs;
        prev_a2a = a2a;
      }
    }
  }
}

TEST_CASE("scale rules: oversubscription never helps", "[collective][rule][scale]") {
  // Two scalable units (64 nodes) of the SuperPOD: traffic between them crosses the spine.
  auto doc = load_json_file(path("dgx_h100_superpod.json"));
  apply_override(doc, "nodes", "64");
  const SystemSpec full = parse_system(doc);
  for (double o : {1.5, 2.0, 4.0}) {
    auto over_doc = doc;
    apply_override(over_doc, "network.levels", "[{\"name\": \"leaf\", \"nodes\": 32, \"oversubscription\": " + std::to_string(o) +
                                                   "}, {\"name\": \"spine\", \"nodes\": 0}]");
    const SystemSpec over = parse_system(over_doc);
    const AlphaBetaCollectiveModel a(full), b(over);
    for (int nodes : {2, 32, 33, 64}) {
      const RankGroup g = spread(full, nodes, 8);
      for (auto kind : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kAllToAll}) {
        if (kind == CollectiveKind::kAllToAll && nodes > kMaxAllToAllNodes) continue;
        for (double bytes = 1e3; bytes <= 16e9; bytes *= 4.7) {
          INFO("oversubscription " << o << " on " << nodes << " nodes, " << collective_name(kind) << " " << bytes);
          const auto ea = a.estimate({kind, bytes, {}}, g);
          const auto eb = b.estimate({kind, bytes, {}}, g);
          CHECK(eb.time >= ea.time * (1 - 1e-12));
          // Inside one scalable unit the spine is not crossed: nothing changes.
          if (nodes <= 32) CHECK(eb.time == Approx(ea.time).epsilon(1e-12));
        }
      }
      // Large transfers across units are bound by the spine.
      if (nodes > 32) CHECK(b.estimate({CollectiveKind::kAllToAll, 16e9, {}}, g).bottleneck == "spine");
    }
  }
  // The fabric-wide oversubscription of files without levels also never helps.
  auto legacy = load_json_file(path("cluster_4x_dgx_h100.json"));
  const SystemSpec base = parse_system(legacy);
  apply_override(legacy, "network.oversubscription", "2");
  const SystemSpec halved = parse_system(legacy);
  const AlphaBetaCollectiveModel a(base), b(halved);
  for (double bytes = 1e3; bytes <= 16e9; bytes *= 4.7)
    for (auto kind : {CollectiveKind::kAllReduce, CollectiveKind::kAllToAll})
      CHECK(b.estimate({kind, bytes, {}}, spread(base, 4, 8)).time >= a.estimate({kind, bytes, {}}, spread(base, 4, 8)).time);
}

TEST_CASE("GB200 NVL72: a 72-GPU all-reduce stays inside one NVLink domain", "[collective][scale]") {
  const SystemSpec s = load_nodes("gb200_nvl72.json", 36);
  const AlphaBetaCollectiveModel m(s);
  RankGroup rack;
  for (int r = 0; r < 72; ++r) rack.ranks.push_back(r);
  for (double bytes : {1e6, 256e6, 8e9}) {
    const auto e = m.estimate({CollectiveKind::kAllReduce, bytes, {}}, rack);
    INFO(bytes << " " << e.algorithm << " " << e.bottleneck);
    CHECK(e.nic_busy == 0);
    CHECK(e.bottleneck == "nvlink");
    CHECK((e.algorithm == "nvls" || e.algorithm == "ring" || e.algorithm == "tree"));
  }
  // 72 ranks over 18 trays cross no NIC; the same 72 ranks over two racks do.
  RankGroup two_racks;
  for (int r = 0; r < 36; ++r) two_racks.ranks.push_back(r);
  for (int r = 72; r < 108; ++r) two_racks.ranks.push_back(r);
  const auto across = m.estimate({CollectiveKind::kAllReduce, 8e9, {}}, two_racks);
  CHECK(across.nic_busy > 0);
  CHECK(across.time >= m.estimate({CollectiveKind::kAllReduce, 8e9, {}}, rack).time);
}

TEST_CASE("per-message NIC cost: many small all-to-all messages are bound by the message rate", "[collective][scale]") {
  auto doc = load_json_file(path("dgx_h100_superpod.json"));
  apply_override(doc, "nodes", "16");
  const SystemSpec fast = parse_system(doc);
  apply_override(doc, "network.message_rate", "1e5");
  const SystemSpec slow = parse_system(doc);
  const AlphaBetaCollectiveModel a(fast), b(slow);
  const RankGroup g = spread(fast, 16, 8);  // 128 ranks
  // 4 KiB to each of 128 peers: 112 remote peers, one message each.
  const double bytes = 4096.0 * 128;
  const auto e = b.estimate({CollectiveKind::kAllToAll, bytes, {}}, g);
  // With PXN, a GPU's NIC sends for the 8 GPUs of its node to its rail's GPU on each of the
  // 15 other nodes: 8 x 15 = 120 messages per NIC share, at 1e5 messages/s.
  const double alpha = (6.27 + 0.685 * 128) * 1e-6;
  CHECK(e.time == Approx(20e-6 + alpha + 120 / 1e5).epsilon(1e-9));
  CHECK(e.bottleneck == "nic");
  CHECK(e.time > a.estimate({CollectiveKind::kAllToAll, bytes, {}}, g).time);
}

}  // namespace perfcast_test_topology_scale_rules_test

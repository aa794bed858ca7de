// Per-pair paths: link class, achievable bandwidth and hop latency, worked by hand from
// the shipped system files and the efficiency constants in topology/link_paths.hpp.
#include <catch2/catch.hpp>

#include "topology/link_paths.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_topology_link_paths_test {

using namespace perfcast;

namespace {
std::string systems() { return std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/"; }
SystemSpec with(const char* file, std::vector<std::pair<const char*, const char*>> sets) {
  auto doc = load_json_file(systems() + file);
  for (const auto& [path, value] : sets) apply_override(doc, path, value);
  return parse_system(doc);
}
}  // namespace

TEST_CASE("NVSwitch: every pair one hop at the NVLink ring rate", "[paths]") {
  const SystemSpec s = load_system(systems() + "dgx_h100.json");
  const PathInfo p = path_between(s, 0, 7);
  CHECK(p.link == LinkClass::kNvlink);
  CHECK(p.bandwidth == Approx(450e9 * 0.82));
  CHECK(p.latency == Approx(0.94e-6));
  CHECK(p.hops == 1);
  const PathInfo self = path_between(s, 3, 3);
  CHECK(self.link == LinkClass::kLocal);
  CHECK(self.latency == 0);
  CHECK_THROWS_AS(path_between(s, 0, 8), std::out_of_range);
}

TEST_CASE("PCIe: same switch, through the root complex, across CPUs", "[paths]") {
  // 8 GPUs, 4 switches (2 GPUs each), 2 CPUs (4 GPUs each).
  const SystemSpec s = with("pcie_8gpu.json", {{"intra_node.pcie.switches", "4"}});
  const PathInfo same_switch = path_between(s, 0, 1);
  CHECK(same_switch.link == LinkClass::kPcieSwitch);
  CHECK(same_switch.bandwidth == Approx(64e9 * 0.76));
  CHECK(same_switch.latency == Approx(1e-6));
  const PathInfo host = path_between(s, 1, 2);
  CHECK(host.link == LinkClass::kPcieHost);
  CHECK(host.bandwidth == Approx(64e9 * 0.76));
  CHECK(host.latency == Approx(2e-6));
  const PathInfo cross = path_between(s, 3, 4);
  CHECK(cross.link == LinkClass::kCpuLink);
  CHECK(cross.bandwidth == Approx(22e9));  // the CPU interconnect, below PCIe's 48.6 GB/s
  CHECK(cross.latency == Approx(3e-6));
  CHECK(cross.hops == 3);
}

TEST_CASE("network: rails, PXN hop, spine, oversubscription, PCIe bound", "[paths]") {
  const SystemSpec s = load_system(systems() + "cluster_4x_dgx_h100.json");
  // Same rail (local index 0 on nodes 0 and 1): one NIC each, 400 Gb/s at 0.92.
  const PathInfo rail = path_between(s, 0, 8);
  CHECK(rail.link == LinkClass::kNetwork);
  CHECK(rail.bandwidth == Approx(50e9 * 0.92));
  CHECK(rail.latency == Approx(3e-6));
  // Different rails: one NVLink hop to the GPU on the target's rail first.
  const PathInfo pxn = path_between(s, 0, 9);
  CHECK(pxn.latency == Approx(3e-6 + 0.94e-6));
  CHECK(pxn.hops == 2);

  // No rails, 2:1 oversubscribed, 0.5 us per switch: leaf-spine-leaf, half the rate.
  const SystemSpec flat = with("cluster_4x_dgx_h100.json", {{"network.rail_optimized", "false"},
                                                            {"network.switch_latency", "\"0.5us\""},
                                                            {"network.oversubscription", "2"}});
  const PathInfo spine = path_between(flat, 0, 8);
  CHECK(spine.latency == Approx(3e-6 + 2 * 0.5e-6));
  CHECK(spine.bandwidth == Approx(50e9 * 0.92 / 2));

  // Four GPUs share each of 2 NICs: a quarter NIC each.
  const SystemSpec few = with("cluster_4x_dgx_h100.json", {{"network.nics_per_node", "2"}});
  CHECK(network_bandwidth_per_gpu(few) == Approx(50e9 * 0.92 / 4));
  // An 800 Gb/s NIC behind a PCIe Gen5 x16 GPU link: bound by PCIe (64 GB/s x 0.76).
  const SystemSpec fast = with("cluster_4x_dgx_h100.json", {{"network.nic_bandwidth", "\"800Gb/s\""}});
  CHECK(network_bandwidth_per_nic(fast) == Approx(64e9 * 0.76));
}

TEST_CASE("network keys are strict", "[paths][config]") {
  auto error_of = [](const char* path, const char* value) {
    try {
      (void)with("cluster_4x_dgx_h100.json", {{path, value}});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("network.switch_latency", "\"-1us\""), Catch::Contains("/network/switch_latency"));
  CHECK_THAT(error_of("network.rail_optimized", "3"), Catch::Contains("/network/rail_optimized"));
  CHECK_THAT(error_of("network.rails", "true"), Catch::Contains("/network/rails: unknown key"));
}

namespace {
// A hybrid cube mesh (DGX-1 layout): two fully connected quads, GPU i wired to i + 4;
// 6 NVLinks per GPU. Put on an A100 (12 links, 300 GB/s: 25 GB/s a link, 20.5 at 0.82).
const char* kCubeMesh =
    "[[0,1,1,2,2,0,0,0],[1,0,2,1,0,2,0,0],[1,2,0,1,0,0,2,0],[2,1,1,0,0,0,0,2],"
    "[2,0,0,0,0,1,1,2],[0,2,0,0,1,0,2,1],[0,0,2,0,1,2,0,1],[0,0,0,2,2,1,1,0]]";
SystemSpec mesh() { return with("dgx_a100.json", {{"intra_node.fabric", "\"nvlink_mesh\""}, {"intra_node.links", kCubeMesh}}); }
}  // namespace

TEST_CASE("NVLink mesh: direct pairs by their link count, others relayed", "[paths][mesh]") {
  const SystemSpec s = mesh();
  CHECK(s.fabric == IntraFabric::kNvlinkMesh);
  CHECK(s.mesh_links(0, 3) == 2);
  const PathInfo two = path_between(s, 0, 3);
  CHECK(two.link == LinkClass::kNvlink);
  CHECK(two.bandwidth == Approx(2 * 25e9 * 0.82));
  CHECK(two.hops == 1);
  CHECK(two.latency == Approx(1e-6));
  // 0 and 5 share no link: relayed over GPU 1 (links 1 and 2) or GPU 4 (2 and 1): 1 link wide.
  const PathInfo relay = path_between(s, 0, 5);
  CHECK(relay.hops == 2);
  CHECK(relay.bandwidth == Approx(25e9 * 0.82));
  CHECK(relay.latency == Approx(2e-6));
}

TEST_CASE("NVLink mesh: the links matrix is checked", "[paths][mesh][config]") {
  auto error_of = [](std::vector<std::pair<const char*, const char*>> sets) {
    try {
      (void)with("dgx_a100.json", std::move(sets));
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const char* fabric = "\"nvlink_mesh\"";
  CHECK_THAT(error_of({{"intra_node.fabric", fabric}}), Catch::Contains("/intra_node/links: missing required key"));
  std::string asym = kCubeMesh;
  asym[4] = '2';  // GPU 0 -> 1: 2 links, GPU 1 -> 0: 1
  CHECK_THAT(error_of({{"intra_node.fabric", fabric}, {"intra_node.links", asym.c_str()}}),
             Catch::Contains("links must be symmetric"));
  std::string self = kCubeMesh;
  self[2] = '1';  // GPU 0 -> 0
  CHECK_THAT(error_of({{"intra_node.fabric", fabric}, {"intra_node.links", self.c_str()}}),
             Catch::Contains("/intra_node/links/0/0: a GPU has no NVLink to itself"));
  CHECK_THAT(error_of({{"intra_node.fabric", fabric}, {"intra_node.links", "[[0,1],[1,0]]"}}),
             Catch::Contains("/intra_node/links"));
  CHECK_THAT(error_of({{"intra_node.links", kCubeMesh}}), Catch::Contains("belongs to an \"nvlink_mesh\" fabric"));
}

}  // namespace perfcast_test_topology_link_paths_test

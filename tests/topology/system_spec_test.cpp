#include <catch2/catch.hpp>

#include "topology/system_spec.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_topology_system_spec_test {

using namespace perfcast;

namespace {
std::string systems() { return std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/"; }
}

TEST_CASE("shipped systems parse with their spec numbers", "[system]") {
  const SystemSpec dgx = load_system(systems() + "dgx_h100.json");
  CHECK(dgx.world_size() == 8);
  CHECK(dgx.fabric == IntraFabric::kNvSwitch);
  CHECK(dgx.fabric_bandwidth == Approx(450e9));
  CHECK(dgx.gpu.sm_count == 132);
  CHECK(dgx.gpu.peak(DType::kBf16) == Approx(989.4e12));
  CHECK(dgx.network.nic_bandwidth == Approx(50e9));

  const SystemSpec cluster = load_system(systems() + "cluster_4x_dgx_h100.json");
  CHECK(cluster.world_size() == 32);
  CHECK(cluster.node_of(17) == 2);

  const SystemSpec pcie = load_system(systems() + "pcie_8gpu.json");
  CHECK(pcie.fabric == IntraFabric::kPcie);
  CHECK(pcie.socket_of(3) == 0);
  CHECK(pcie.socket_of(4) == 1);

  const SystemSpec a100 = load_system(systems() + "a100_sxm.json");
  CHECK(a100.gpu.peak(DType::kFp8) == a100.gpu.peak_fp16);  // no fp8 on A100: falls back
}

TEST_CASE("system errors name the file and JSON path", "[system]") {
  auto doc = load_json_file(systems() + "dgx_h100.json");
  auto error_of = [&](const char* path, const char* value) {
    auto d = doc;
    apply_override(d, path, value);
    try {
      (void)parse_system(d);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("gpus_per_node", "0"), Catch::Contains("/gpus_per_node: expected an integer in [1, 1024], got 0"));
  CHECK_THAT(error_of("network.nic_bandwidth", "\"400Gb\""), Catch::Contains("/network/nic_bandwidth: expected a bandwidth"));
  CHECK_THAT(error_of("intra_node.fabrik", "\"x\""), Catch::Contains("/intra_node/fabrik: unknown key (did you mean \"fabric\"?)"));
  CHECK_THAT(error_of("gpu", "\"nonexistent.json\""), Catch::Contains("/gpu: cannot use \"nonexistent.json\""));
  CHECK_THAT(error_of("nodes", "2"), Catch::Contains("no error"));  // dgx_h100 has a network block
  CHECK_THAT(error_of("host", R"({"backward_op_overhead": "-3us"})"), Catch::Contains("/host/backward_op_overhead: expected a time such as \"5us\", got \"-3us\" (negative)"));
  CHECK_THAT(error_of("host", R"({"backward_op_overhead": 3})"), Catch::Contains("/host/backward_op_overhead: expected"));
  // A calibration path the system cannot look up (one name over NAME_MAX, 255 bytes) is a
  // configuration error at that key, not a filesystem exception.
  const std::string too_long = "\"" + std::string(300, 'a') + "\"";
  CHECK_THAT(error_of("kernel_calibration", too_long.c_str()), Catch::Contains("/kernel_calibration: cannot look up"));
  CHECK_THAT(error_of("collective_calibration", too_long.c_str()), Catch::Contains("/collective_calibration: cannot look up"));
  CHECK_THAT(error_of("kernel_calibration", "\"missing.json\""), Catch::Contains("/kernel_calibration: no such file"));
}

TEST_CASE("host: backward_op_overhead is optional and parsed with units", "[system]") {
  auto doc = load_json_file(systems() + "dgx_h100.json");
  CHECK_FALSE(parse_system(doc).host.backward_op_overhead.has_value());
  apply_override(doc, "host", R"({"op_overhead": "140us", "backward_op_overhead": "10us"})");
  const SystemSpec s = parse_system(doc);
  CHECK(s.host.op_overhead == Approx(140e-6));
  REQUIRE(s.host.backward_op_overhead.has_value());
  CHECK(*s.host.backward_op_overhead == Approx(10e-6));
}

}  // namespace perfcast_test_topology_system_spec_test

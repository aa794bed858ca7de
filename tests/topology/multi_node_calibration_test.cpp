// The sources' spread (topology/source_spread.hpp) by hand, and the shipped multi-node
// calibrations of the AWS systems against the tables they were fitted on.
#include <cmath>
#include <filesystem>

#include <catch2/catch.hpp>

#include "topology/collective_calibration.hpp"
#include "topology/measurement_table_csv.hpp"
#include "topology/source_spread.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_topology_multi_node_calibration_test {

using namespace perfcast;

namespace {
std::string src(const std::string& rel) { return std::string(PERFCAST_SOURCE_DIR) + "/" + rel; }
constexpr double kMiB = 1024.0 * 1024.0;

CollectiveSample sample(double bytes, double time_us, int ranks = 8, int nodes = 1) {
  return {CollectiveKind::kAllReduce, ranks, nodes, bytes, time_us * 1e-6, ""};
}

/// Ranks 0..7 of node 0 and 0..7 of node 1 of a 2-node system.
RankGroup two_nodes(const SystemSpec& s) {
  RankGroup g;
  for (int node = 0; node < 2; ++node)
    for (int j = 0; j < 8; ++j) g.ranks.push_back(node * s.gpus_per_node + j);
  return g;
}
}  // namespace

TEST_CASE("source spread by hand: the closest other source at each shared size", "[calibration][spread]") {
  // A: 64 KiB 50 us (no other source has it), 1 MiB 100 us, 2 MiB 200 us.
  // B: 1 MiB 110 us, 2 MiB 180 us; C: 1 MiB 95 us; D: 1 MiB 100 us on 16 ranks (another shape).
  const std::vector<CollectiveSample> a{sample(64 * 1024.0, 50), sample(kMiB, 100), sample(2 * kMiB, 200)};
  const std::vector<CollectiveSample> others{sample(kMiB, 110), sample(2 * kMiB, 180), sample(kMiB, 95), sample(kMiB, 100, 16, 2)};
  const SourceSpread sp = source_spread(a, others);
  CHECK(sp.shared_sizes == 2);
  CHECK(sp.shared_from_1MiB == 2);
  // 1 MiB: C is closest, 5%; 2 MiB: B, 10%. Geomean sqrt(0.05 x 0.10) = 7.071%, max 10%.
  CHECK(sp.geomean_from_1MiB == Approx(std::sqrt(0.05 * 0.10)).epsilon(1e-9));
  CHECK(sp.max_from_64KiB == Approx(0.10).epsilon(1e-9));
  // Minimax: |100 - 95| / 195 = 2.564%, |200 - 180| / 380 = 5.263%.
  CHECK(sp.minimax_geomean_from_1MiB == Approx(std::sqrt(5.0 / 195 * 20.0 / 380)).epsilon(1e-9));
  CHECK(sp.minimax_max_from_64KiB == Approx(20.0 / 380).epsilon(1e-9));
  // Nothing shared: an empty spread.
  CHECK(source_spread({sample(4 * kMiB, 10)}, others).shared_sizes == 0);
}

TEST_CASE("AWS p5 and p4de: the multi-node all-reduce follows the table it was fitted on", "[calibration][rule]") {
  struct Case {
    const char* system;
    const char* table;
    const char* only;  ///< text of the fitted source's env or GPU
  };
  for (const Case c : {Case{"configs/systems/aws_p5.json", "data/public-measurements/nccl_two_node_p5.csv", "Slurm"},
                       Case{"configs/systems/aws_p4de.json", "data/public-measurements/nccl_a100_dev.csv", "p4de"}}) {
    INFO(c.system);
    REQUIRE(std::filesystem::exists(src(c.table)));
    const SystemSpec s = load_system(src(c.system));
    REQUIRE(s.nodes == 2);
    const auto model = make_collective_model(s);
    const RankGroup g = two_nodes(s);
    std::vector<double> errors;
    for (const auto& log : parse_measurement_table_csv(src(c.table))) {
      if ((log.env + log.log.gpu).find(c.only) == std::string::npos) continue;
      for (const auto& smp : log.log.samples) {
        if (smp.bytes < kMiB) continue;
        const auto e = model->estimate({CollectiveKind::kAllReduce, smp.bytes, {}}, g);
        CHECK(e.basis == "calibrated");
        CHECK(e.bottleneck != "nvswitch");
        errors.push_back(e.time / smp.time_s - 1);
      }
    }
    REQUIRE(errors.size() >= 12);
    // In-sample: the fit's geomean from 1 MiB (the calibration file's fit block) is 1-3%.
    CHECK(geomean_abs(errors) < 0.05);
    // Monotone in size, and never faster than the spec-derived model's network bound allows:
    // at 1 GiB the bus bandwidth stays below the NVLink line rate x 2 (a 2-node tree's bound).
    double prev = 0;
    for (double b = 8; b < 8e9; b *= 1.7) {
      const double t = model->estimate({CollectiveKind::kAllReduce, b, {}}, g).time;
      CHECK(t >= prev);
      prev = t;
    }
    const double t1g = model->estimate({CollectiveKind::kAllReduce, 1024 * kMiB, {}}, g).time;
    CHECK(1024 * kMiB * 2 * 15 / 16 / t1g < 2 * s.gpu.nvlink_bandwidth);
  }
}

}  // namespace perfcast_test_topology_multi_node_calibration_test

// Golden predictions of every shipped system x workload pair, compared with tolerances.
// Regenerate after an intended model change with tests/update_golden.sh and review the diff.
#include <cmath>
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "model/predict/predict.hpp"
#include "model/report/report.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_golden_test {

using namespace perfcast;

namespace {

const char* kSystems[] = {"h100_sxm", "h200", "a100_sxm", "dgx_h100", "dgx_a100", "hgx_h200", "pcie_8gpu", "cluster_4x_dgx_h100"};
const char* kWorkloads[] = {"dlrm_default", "dlrm_mlperf", "dlrm_ddp"};

/// Compares numbers with a relative tolerance, everything else exactly; skips the
/// context block (dates, commits) and warnings.
void compare(const nlohmann::json& got, const nlohmann::json& want, const std::string& path) {
  INFO(path);
  if (want.is_number()) {
    REQUIRE(got.is_number());
    const double a = got.get<double>(), b = want.get<double>();
    CHECK(std::fabs(a - b) <= 1e-6 * std::max(std::fabs(a), std::fabs(b)) + 1e-15);
    return;
  }
  REQUIRE(got.type() == want.type());
  if (want.is_object()) {
    for (auto it = want.begin(); it != want.end(); ++it) {
      if (it.key() == "context" || it.key() == "warnings") continue;
      REQUIRE(got.contains(it.key()));
      compare(got[it.key()], it.value(), path + "/" + it.key());
    }
    CHECK(got.size() == want.size());
  } else if (want.is_array()) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) compare(got[i], want[i], path + "/" + std::to_string(i));
  } else {
    CHECK(got == want);
  }
}

}  // namespace

TEST_CASE("predict matches the golden files on every shipped pair", "[golden]") {
  const std::string root = PERFCAST_SOURCE_DIR;
  for (const char* s : kSystems) {
    for (const char* w : kWorkloads) {
      SECTION(std::string(s) + " x " + w) {
        PredictRequest r;
        r.system = root + "/configs/systems/" + s + ".json";
        r.workload = root + "/configs/workloads/" + w + ".json";
        const auto p = predict(r);
        const auto got = nlohmann::json::parse(render_json(*p));
        std::ifstream in(root + "/tests/golden/" + s + "__" + w + ".json");
        REQUIRE(in.good());
        const auto want = nlohmann::json::parse(in);
        compare(got, want, "");
        // Rule: never faster than the sum of one rank's compute kernels on the critical path.
        CHECK(p->timeline.iteration_time > 0);
        for (const auto& b : p->analysis.ranks) CHECK(b.compute_busy <= p->timeline.iteration_time * (1 + 1e-9));
        // Rule: each rank's split (compute, exposed communication per group, exposed
        // copies, idle) sums to its own iteration, and every rank has one.
        for (const auto& b : p->analysis.ranks) {
          double sum = b.compute_busy + b.exposed_copy + b.gpu_idle;
          for (double x : b.exposed_by_group) sum += x;
          CHECK(b.period > 0);
          CHECK(sum == Approx(b.period).epsilon(1e-9));
        }
      }
    }
  }
}

}  // namespace perfcast_test_model_golden_test

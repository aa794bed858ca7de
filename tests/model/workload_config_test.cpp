#include <catch2/catch.hpp>

#include "model/predict/predict.hpp"
#include "model/graph/sharding_plan.hpp"
#include "model/graph/workload_spec.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_workload_config_test {

using namespace perfcast;

namespace {
std::string src(const std::string& rel) { return std::string(PERFCAST_SOURCE_DIR) + "/" + rel; }

std::string error_of(const std::string& workload, std::vector<std::string> overrides, std::optional<std::string> plan = {}) {
  PredictRequest r;
  r.system = src("configs/systems/dgx_h100.json");
  r.workload = src(workload);
  r.overrides = std::move(overrides);
  if (plan) r.plan = src(*plan);
  try {
    (void)predict(r);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("shipped workloads parse", "[workload]") {
  const DlrmSpec mlperf = load_workload(src("configs/workloads/dlrm_mlperf.json"));
  CHECK(mlperf.tables.size() == 26);
  double rows = 0, lookups = 0;
  for (const auto& t : mlperf.tables) {
    rows += double(t.rows);
    lookups += t.pooling;
  }
  CHECK(rows == Approx(204.2e6).epsilon(1e-3));  // docs/sharding-planners.md section 5
  CHECK(lookups == 214);
  CHECK(mlperf.interaction_width() == 128 + 27 * 26 / 2);
  const DlrmSpec def = load_workload(src("configs/workloads/dlrm_default.json"));
  CHECK(def.tables.size() == 8);
  CHECK(def.tables[7].name == "table_7");
}

TEST_CASE("workload errors name the file and path", "[workload]") {
  CHECK_THAT(error_of("configs/workloads/dlrm_default.json", {"workload.embedding.tables[0].dim=32"}),
             Catch::Contains("/embedding/tables") && Catch::Contains("dot interaction"));
  CHECK_THAT(error_of("configs/workloads/dlrm_default.json", {"workload.batch_sise=4096"}),
             Catch::Contains("--set workload.batch_sise=4096: /batch_sise: unknown key (did you mean \"batch_size\"?) (in ") &&
                 Catch::Contains("dlrm_default.json after the override)"));
  CHECK_THAT(error_of("configs/workloads/dlrm_default.json", {"workload.embedding.tables[0].rows=-5"}),
             Catch::Contains("/embedding/tables/0/rows: expected an integer in [1,"));
  CHECK_THAT(error_of("configs/workloads/dlrm_default.json", {"workload.gradient_bucket=\"25MB/s\""}),
             Catch::Contains("/gradient_bucket: expected a size"));
  CHECK_THAT(error_of("configs/workloads/dlrm_default.json", {"workload.embedding.tables[0].distribution={\"kind\":\"zipf\"}"}),
             Catch::Contains("/embedding/tables/0/distribution/alpha: missing required key"));
  CHECK_THAT(error_of("configs/workloads/dlrm_default.json", {"sytem.nodes=2"}), Catch::Contains("did you mean \"system\""));
}

TEST_CASE("plans: TorchRec fields, validity checks", "[plan]") {
  CHECK(error_of("configs/workloads/dlrm_default.json", {}, "tests/data/plan_mixed.json") == "no error");
  CHECK_THAT(error_of("configs/workloads/dlrm_default.json", {"plan.tables.table_0.ranks=[9]"}, "tests/data/plan_mixed.json"),
             Catch::Contains("/tables/table_0/ranks/0: expected an integer in [0, 7], got 9"));
  CHECK_THAT(error_of("configs/workloads/dlrm_default.json", {"plan.tables.tabel_0={}"}, "tests/data/plan_mixed.json"),
             Catch::Contains("no table \"tabel_0\""));
}

TEST_CASE("what-if overrides change the prediction the expected way", "[predict][rule]") {
  PredictRequest r;
  r.system = src("configs/systems/dgx_h100.json");
  r.workload = src("configs/workloads/dlrm_default.json");
  const double base = predict(r)->timeline.iteration_time;
  r.overrides = {"workload.batch_size=4096"};
  const double big = predict(r)->timeline.iteration_time;
  CHECK(big > base);
  r.overrides = {"system.gpu=h200.json"};  // more HBM bandwidth, same compute
  CHECK(predict(r)->timeline.iteration_time <= base);
  r.overrides = {"system.nodes=2"};
  const auto two_nodes = predict(r);
  CHECK(two_nodes->system.world_size() == 16);
}

}  // namespace perfcast_test_model_workload_config_test

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "model/predict/predict.hpp"
#include "topology/system_spec.hpp"
#include "validation/validate_harness.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_validation_validate_harness_test {

using namespace perfcast;
using namespace perfcast::validation;

namespace {

const std::filesystem::path kSource(PERFCAST_SOURCE_DIR);

std::vector<nlohmann::json> lines_of(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace

TEST_CASE("validate harness: JSON lines and the geomean with a fake executor", "[validation]") {
  const SystemSpec s = load_system(kSource / "configs/systems/h100_sxm.json");
  HarnessOptions o;
  o.seed = 9;
  o.configs = 4;
  // The fake "measures" each config at predicted / (1 + e) for chosen errors e, and fails
  // config #2 (the harness records the failure and goes on).
  const std::vector<double> chosen{0.10, -0.05, 0.0, 0.02};
  int calls = 0;
  const MeasureFn fake = [&](const GeneratedConfig& c) {
    ++calls;
    if (c.index == 2) throw std::runtime_error("out of memory (fake)");
    const double predicted = predict_parsed(s, c.spec, c.plan)->timeline.iteration_time;
    Measured m;
    m.median_s = predicted / (1.0 + chosen[static_cast<std::size_t>(c.index)]);
    m.p10_s = 0.9 * m.median_s;
    m.p90_s = 1.1 * m.median_s;
    m.timer = "fake";
    m.gpu = "Fake GPU";
    return m;
  };
  Provenance prov{"", "", "", "2026-11-22T15:00:00Z", "abc123", "0.1"};
  std::ostringstream out;
  int progress = 0;
  const auto r = run_validation(s, o, fake, &out, prov, [&](const ConfigResult&, int done) { progress = done; });
  CHECK(calls == 4);
  CHECK(progress == 4);
  CHECK(r.failed == 1);
  REQUIRE(r.summary.count == 3);
  CHECK(r.summary.geomean_abs == Approx(std::cbrt(0.10 * 0.05 * 0.02)).epsilon(1e-9));  // 4.6416%
  CHECK(r.summary.max_abs == Approx(0.10));
  CHECK(r.summary.mean_signed == Approx((0.10 - 0.05 + 0.02) / 3));

  const auto lines = lines_of(out.str());
  REQUIRE(lines.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& j = lines[i];
    CHECK(j["schema"] == "perfcast.validation_result");
    CHECK(j["index"] == i);
    CHECK(j["seed"] == 9);
    CHECK(j["date"] == "2026-11-22T15:00:00Z");
    CHECK(j["commit"] == "abc123");
    CHECK(j["config"]["schema"] == "perfcast.workload");
    CHECK(j["config"] == r.results[i].config.workload_json);
    CHECK(j["predicted_s"].get<double>() == r.results[i].predicted_s);
    CHECK(j["predicted_s"].get<double>() > 0);
    if (i == 2) {
      CHECK(j["measured_s"].is_null());
      CHECK(j["error"].is_null());
      CHECK(j["failure"] == "out of memory (fake)");
      CHECK(j["gpu"] == "");  // no measurement, no device named
    } else {
      CHECK(j["gpu"] == "Fake GPU");
      CHECK(j["error"].get<double>() == Approx(chosen[i]).margin(1e-12));
      CHECK(j["error"].get<double>() == Approx(j["predicted_s"].get<double>() / j["measured_s"].get<double>() - 1));
      CHECK(j["measurement"]["p90_s"].get<double>() == Approx(1.1 * j["measured_s"].get<double>()));
      CHECK(j["measurement"]["iterations"] == o.iterations);
    }
  }

  // The same lines re-read from a file give the same summary.
  const auto file = std::filesystem::temp_directory_path() / "perfcast_validate_harness_test.jsonl";
  std::ofstream(file) << out.str() << "\n";
  const auto back = summarize_result_files({file});
  REQUIRE(back.size() == 1);
  CHECK(back[0].lines == 4);
  CHECK(back[0].failed == 1);
  CHECK(back[0].gpus == std::vector<std::string>{"Fake GPU", ""});
  CHECK(back[0].summary.geomean_abs == Approx(r.summary.geomean_abs));
  CHECK(render_file_summaries(back).find("4.64% geomean |error|") != std::string::npos);
  std::filesystem::remove(file);
}

TEST_CASE("validate harness: a dry run predicts and writes nothing", "[validation]") {
  const SystemSpec s = load_system(kSource / "configs/systems/h100_sxm.json");
  HarnessOptions o;
  o.configs = 2;
  std::ostringstream out;
  const auto r = run_validation(s, o, MeasureFn{}, &out, Provenance{});
  CHECK(out.str().empty());
  REQUIRE(r.results.size() == 2);
  for (const auto& c : r.results) {
    CHECK(c.predicted_s > 0);
    CHECK_FALSE(c.measured);
  }
  CHECK(r.summary.count == 0);
  CHECK(format_result(r.results[0]).find("predicted") != std::string::npos);
  // A run split with first_index repeats the same configs and predictions.
  o.first_index = 1;
  o.configs = 1;
  const auto second = run_validation(s, o, MeasureFn{}, nullptr, Provenance{});
  REQUIRE(second.results.size() == 1);
  CHECK(second.results[0].config.index == 1);
  CHECK(second.results[0].config.workload_json == r.results[1].config.workload_json);
  CHECK(second.results[0].predicted_s == r.results[1].predicted_s);
}

TEST_CASE("validate harness: result files with bad lines name file and line", "[validation]") {
  const auto file = std::filesystem::temp_directory_path() / "perfcast_validate_bad.jsonl";
  const std::string good = R"({"schema": "perfcast.validation_result", "schema_version": "1.0", "predicted_s": 0.0011, "measured_s": 0.001})";
  std::ofstream(file) << good << "\n\n" << R"({"schema": "perfcast.validation_result", "schema_version": "1.0", "measured_s": 0.001})" << "\n";
  CHECK_THROWS_WITH(summarize_result_files({file}), Catch::Contains("line 3") && Catch::Contains("predicted_s"));
  std::ofstream(file) << good << "\n{not json\n";
  CHECK_THROWS_AS(summarize_result_files({file}), ConfigError);
  std::ofstream(file) << R"({"schema": "perfcast.validation_result", "schema_version": "1.0", "predicted_s": 0.001, "measured_s": -1})" << "\n";
  CHECK_THROWS_WITH(summarize_result_files({file}), Catch::Contains("measured_s"));
  std::ofstream(file) << good << "\n";
  const auto ok = summarize_result_files({file});
  CHECK(ok[0].errors.size() == 1);
  CHECK(ok[0].errors[0] == Approx(0.10));
  std::filesystem::remove(file);
  CHECK_THROWS_AS(summarize_result_files({file}), ConfigError);  // missing file
}

TEST_CASE("validate harness: file-name-safe GPU names", "[validation]") {
  CHECK(safe_file_name("NVIDIA H100 80GB HBM3") == "nvidia_h100_80gb_hbm3");
  CHECK(safe_file_name("  A100-SXM4 (40GB) ") == "a100_sxm4_40gb");
  CHECK(safe_file_name("") == "unknown");
}

}  // namespace perfcast_test_validation_validate_harness_test

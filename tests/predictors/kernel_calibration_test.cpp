#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <catch2/catch.hpp>

#include "predictors/kernel_calibration.hpp"
#include "predictors/spec_predictors.hpp"
#include "topology/system_spec.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_predictors_kernel_calibration_test {

using namespace perfcast;

namespace {

GpuSpec h100() { return load_system(std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/h100_sxm.json").gpu; }

Measurement measured(const KernelDesc& k, double t) {
  Measurement m;
  m.kernel = k;
  m.timing = timing_stats({t, t, t}, "cupti");
  m.device.name = "synthetic GPU";
  return m;
}

}  // namespace

TEST_CASE("timing statistics: hand-worked values", "[measurement]") {
  const auto t = timing_stats({4e-6, 1e-6, 3e-6, 2e-6, 5e-6}, "cuda_events");
  CHECK(t.median == Approx(3e-6));
  CHECK(t.mean == Approx(3e-6));
  CHECK(t.p10 == Approx(1.4e-6));  // 1 + 0.4 x (2 - 1) us
  CHECK(t.stddev == Approx(std::sqrt(2.5) * 1e-6));
  CHECK(t.cv == Approx(std::sqrt(2.5) / 3));
  CHECK_THROWS(timing_stats({}, "cupti"));
}

TEST_CASE("identical samples have no spread, and the rounding noise older files wrote reads as 0", "[measurement]") {
  // 1.9 us three times: the mean differs from 1.9e-6 in its last bits, (x - mean)^2 is not 0.
  const auto t = timing_stats({1.9e-6, 1.9e-6, 1.9e-6}, "cupti");
  CHECK(t.stddev == 0);
  CHECK(t.cv == 0);
  const auto path = std::filesystem::temp_directory_path() / "perfcast_measurement_spread_test.jsonl";
  const std::string head = R"({"schema": "perfcast.measurement", "schema_version": "1.0", )"
                           R"("kernel": {"family": "gemm", "m": 64, "n": 64, "k": 64, "batch": 1, "dtype": "fp32"}, )"
                           R"("timing": {"timer": "cupti", "repetitions": 20, "median": "6us", "stddev": )";
  const std::string tail = R"(}, "device": {"name": "NVIDIA H200"}, "date": "2026-11-27", "commit": "faf104f"})";
  {
    std::ofstream out(path);
    out << head << R"("4.34519e-16us")" << tail << "\n";  // as perfcast profile wrote it up to faf104f
  }
  const auto back = read_measurements(path);
  REQUIRE(back.size() == 1);
  CHECK(back[0].timing.stddev == 0);
  {
    std::ofstream out(path);
    out << head << R"("-1us")" << tail << "\n";
  }
  CHECK_THROWS_WITH(read_measurements(path), Catch::Contains("line 1") && Catch::Contains("/timing/stddev"));
  {
    std::ofstream out(path);
    out << head << R"("4.34519e-16ns")" << tail << "\n";  // only the us form perfcast wrote is read as 0
  }
  CHECK_THROWS_WITH(read_measurements(path), Catch::Contains("outside the supported range"));
  std::filesystem::remove(path);
}

TEST_CASE("measurement lines round-trip and bad lines name their line", "[measurement]") {
  EmbeddingDesc e;
  e.batch = 512;
  e.pass = EmbeddingPass::kBackward;
  e.optimizer = EmbeddingOptimizer::kRowwiseAdagrad;
  e.tables = {{1000, 64, 20, IndexDistribution::zipf(1.1)}, {500, 32, 1, IndexDistribution::hot_set(0.1, 0.9)}};
  ElementwiseDesc plain{"scale", 1 << 20, 1, 16};
  plain.cold_l2 = true;
  plain.thread_per_element = true;
  const std::vector<KernelDesc> kernels = {GemmDesc{128, 256, 512, 4, DType::kBf16, true}, ElementwiseDesc{"relu", 1000, 1, 8},
                                           MemcpyDesc{1e6, CopyKind::kDeviceToHost}, e, plain};
  const auto path = std::filesystem::temp_directory_path() / "perfcast_measurement_test.jsonl";
  {
    std::ofstream out(path);
    for (const auto& k : kernels) out << measurement_to_jsonl(measured(k, 12.5e-6));
  }
  const auto back = read_measurements(path);
  REQUIRE(back.size() == kernels.size());
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    CHECK(back[i].kernel == kernels[i]);
    CHECK(back[i].timing.median == Approx(12.5e-6));
    CHECK(back[i].device.name == "synthetic GPU");
  }
  {
    std::ofstream out(path, std::ios::app);
    out << R"({"schema": "perfcast.measurement", "schema_version": "1.0", "kernel": {"family": "gemm", "m": 1}})" << "\n";
  }
  CHECK_THROWS_WITH(read_measurements(path), Catch::Contains("line 6") && Catch::Contains("/kernel/n: missing required key"));
  std::filesystem::remove(path);
}

TEST_CASE("GEMM calibration recovers known efficiencies and overhead", "[calibration]") {
  const GpuSpec g = h100();
  // Synthetic GPU: 62% of the bf16 peak, 80% of HBM, 4.5 us per kernel, 1% noise.
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> dim(1, 64);
  std::normal_distribution<double> noise(0, 0.01);
  std::vector<Measurement> ms;
  for (int i = 0; i < 600; ++i) {
    const GemmDesc d{dim(rng) * 64 + 8 * (i % 3), dim(rng) * 64, dim(rng) * 64, 1, DType::kBf16, false};
    const GemmWork w = gemm_work(d, g);
    const double t = 4.5e-6 + std::max(w.compute_at_peak / 0.62, w.memory_at_peak / 0.80);
    ms.push_back(measured(d, t * (1 + noise(rng))));
  }
  for (int i = 0; i < 100; ++i) {
    const ElementwiseDesc d{"add", (i + 1) * 100000, 1, 12};
    ms.push_back(measured(d, 3e-6 + d.elements * 12.0 / (g.memory_bandwidth * 0.9)));
  }
  const KernelCalibration cal = fit_kernel_calibration(ms, g);
  const FamilyFit* f = cal.find("gemm.bf16");
  REQUIRE(f);
  CHECK(f->compute_efficiency == Approx(0.62).epsilon(0.02));
  CHECK(f->overhead == Approx(4.5e-6).epsilon(0.1));
  CHECK(f->heldout_samples > 60);
  CHECK(f->heldout_geomean_abs_error < 0.02);  // the noise level
  const FamilyFit* e = cal.find("elementwise");
  REQUIRE(e);
  CHECK(e->memory_efficiency == Approx(0.9).epsilon(1e-3));
  CHECK(e->overhead == Approx(3e-6).epsilon(1e-3));
  // The calibrated predictor uses the fit, and says so; uncovered kernels fall back.
  const GemmDesc big{8192, 8192, 8192, 1, DType::kBf16, false};
  const Estimate est = predict_with_calibration(big, g, &cal);
  CHECK(est.calibrated);
  CHECK(est.time == Approx(f->overhead + gemm_work(big, g).compute_at_peak / f->compute_efficiency));
  CHECK_FALSE(predict_with_calibration(GemmDesc{64, 64, 64, 1, DType::kFp32, false}, g, &cal).calibrated);
  // JSON round trip.
  const KernelCalibration back =
      parse_kernel_calibration(JsonDocument{nlohmann::json::parse(kernel_calibration_to_json(cal)), "round-trip"});
  CHECK(back.find("gemm.bf16")->compute_efficiency == Approx(f->compute_efficiency));
  CHECK(calibration_file_name("NVIDIA H100 80GB HBM3") == "nvidia_h100_80gb_hbm3.json");
}

}  // namespace perfcast_test_predictors_kernel_calibration_test

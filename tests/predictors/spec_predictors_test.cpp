#include <catch2/catch.hpp>

#include "predictors/registry.hpp"
#include "predictors/embedding_predictor.hpp"
#include "predictors/spec_predictors.hpp"
#include "topology/system_spec.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_predictors_spec_predictors_test {

using namespace perfcast;

namespace {
GpuSpec h100() { return load_system(std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/h100_sxm.json").gpu; }
}

TEST_CASE("large GEMM: hand-worked compute-bound value", "[gemm]") {
  const GpuSpec g = h100();
  // 8192^3 bf16: 64 x 64 tiles of 128 = 4096 tiles, 132 SMs -> 32 waves;
  // per wave 2 * 128 * 128 * 8192 FLOP at 989.4e12 * 0.77 / 132 per SM.
  const auto e = predict_gemm(GemmDesc{8192, 8192, 8192, 1, DType::kBf16, false}, g);
  const double wave = 2.0 * 128 * 128 * 8192 / (989.4e12 * 0.77 / 132);
  CHECK(e.bound == "compute");
  CHECK(e.time == Approx(32 * wave + 2e-6).epsilon(1e-9));
}

TEST_CASE("GEMM rules: never faster than the roofline, monotone in size", "[gemm][rule]") {
  const GpuSpec g = h100();
  for (auto dt : {DType::kFp32, DType::kTf32, DType::kBf16}) {
    double prev = 0;
    for (std::int64_t n = 16; n <= 16384; n = n * 3 / 2 + 8) {
      const GemmDesc d{n, n, n, 1, dt, false};
      const auto e = predict_gemm(d, g);
      const double roofline = std::max(e.flops / g.peak(dt), e.dram_bytes / g.memory_bandwidth);
      CHECK(e.time >= roofline);
      CHECK(e.time >= prev);
      prev = e.time;
    }
  }
}

TEST_CASE("elementwise: memory-bound hand value", "[elementwise]") {
  const GpuSpec g = h100();
  const auto e = predict_elementwise(ElementwiseDesc{"relu", 1 << 28, 1, 8}, g);
  CHECK(e.bound == "memory");
  CHECK(e.time == Approx(8.0 * (1 << 28) / (3.35e12 * 0.89) + 2e-6));
}

TEST_CASE("H2D copy: PCIe hand value", "[memcpy]") {
  const auto e = predict_memcpy(MemcpyDesc{64e6, CopyKind::kHostToDevice}, h100());
  CHECK(e.time == Approx(64e6 / (64e9 * 0.76) + 2e-6));
}

TEST_CASE("embedding lookup: skew is faster, more rows never faster", "[embedding][rule]") {
  const GpuSpec g = h100();
  auto desc = [](std::int64_t rows, IndexDistribution d, EmbeddingPass pass) {
    EmbeddingDesc e;
    e.batch = 4096;
    e.pass = pass;
    for (int t = 0; t < 16; ++t) e.tables.push_back(EmbeddingTableDesc{rows, 128, 50, d});
    return e;
  };
  for (auto pass : {EmbeddingPass::kForward, EmbeddingPass::kBackward}) {
    const double uniform = predict_embedding(desc(10'000'000, IndexDistribution::uniform(), pass), g).time;
    const double zipf = predict_embedding(desc(10'000'000, IndexDistribution::zipf(1.1), pass), g).time;
    CHECK(zipf < uniform);
    // The backward from 100,000 rows (2 lookups a row): with fewer rows every row is looked up
    // 32 times or more and its long segments queue in FBGEMM's CTA-per-row kernel
    // (embedding_predictor_test.cpp, "long segments").
    double prev = 0;
    for (std::int64_t rows = pass == EmbeddingPass::kForward ? 1000 : 100'000; rows <= 100'000'000; rows *= 10) {
      const auto e = predict_embedding(desc(rows, IndexDistribution::uniform(), pass), g);
      CHECK(e.time >= prev);
      CHECK(e.time >= e.dram_bytes / g.memory_bandwidth);  // never faster than HBM
      prev = e.time;
    }
  }
}

TEST_CASE("embedding forward: uniform big table hand value", "[embedding]") {
  const GpuSpec g = h100();
  // One table, 1e8 rows, D 64 fp32, batch 1024, L 1: 1024 accesses, essentially all unique.
  EmbeddingDesc e;
  e.batch = 1024;
  e.tables.push_back(EmbeddingTableDesc{100'000'000, 64, 1, IndexDistribution::uniform()});
  const auto est = predict_embedding(e, g);
  const double unique = 1e8 * (1 - std::pow(1 - 1e-8, 1024));
  const double bytes = 1024 * 8 + 1025 * 8 + unique * 256 + (1024 - unique) * 0 + 1024 * 64 * 4;
  CHECK(est.dram_bytes == Approx(bytes).epsilon(1e-3));
  // 1,024 bags fill one wave of dependent loads (132 SMs x 45 warps): 1.9 us, against 0.181 us
  // of HBM time (540,680 B); their 6-norm is the wave time within 1e-6, plus the 2 us kernel floor.
  const double hbm = bytes / (3.35e12 * 0.89);
  CHECK(hbm == Approx(0.1813e-6).epsilon(1e-2));
  CHECK(est.bound == "latency");
  CHECK(est.time == Approx(kTbeFitted.wave_time + 2e-6).epsilon(1e-3));
}

TEST_CASE("every registry entry names a source", "[registry]") {
  for (const auto& e : builtin_registry()) {
    CHECK(!e.source.empty());
    CHECK(!e.description.empty());
  }
}

}  // namespace perfcast_test_predictors_spec_predictors_test

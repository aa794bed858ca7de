// Embedding tables in host memory (fused_uvm, fused_uvm_caching): hand-worked link times
// on an H100 (PCIe 5.0 x16, 64 GB/s per direction in configs/systems/h100_sxm.json), the
// cache prefetch in front of a cached table's lookup, and rule tests (never faster than
// HBM, monotone in the cache size, a faster host link never slower).
#include <cmath>

#include <catch2/catch.hpp>

#include "predictors/embedding_predictor.hpp"
#include "predictors/kernel_calibration.hpp"
#include "predictors/spec_predictors.hpp"
#include "topology/system_spec.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_predictors_host_memory_embedding_test {

using namespace perfcast;

namespace {

GpuSpec h100() { return load_system(std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/h100_sxm.json").gpu; }

/// One uniform table of 1e6 rows x 128 fp32 columns (512-byte rows), 1000 bags of one index.
EmbeddingDesc one_table(EmbeddingStorage storage, EmbeddingPass pass, double cache_rows = 0) {
  EmbeddingDesc d;
  d.batch = 1000;
  d.pass = pass;
  d.optimizer = EmbeddingOptimizer::kSgd;
  d.tables.push_back(EmbeddingTableDesc{1000000, 128, 1.0, IndexDistribution::uniform(), storage, cache_rows});
  return d;
}

/// Expected distinct rows of 1000 uniform draws over 1e6 rows: R (1 - (1 - 1/R)^n).
double unique_rows() { return 1e6 * (1 - std::pow(1 - 1e-6, 1000)); }

}  // namespace

TEST_CASE("fused_uvm forward: the unique rows cross PCIe at the fitted gather efficiency", "[embedding][host_memory]") {
  const GpuSpec gpu = h100();
  const Estimate e = predict_embedding(one_table(EmbeddingStorage::kHostUvm, EmbeddingPass::kForward), gpu);
  // Hand-worked: L2 holds 0.9 x 50 MB / 512 B = 87,890 rows, an LRU hit rate of 8.8% under
  // uniform lookups, so 912 of the 1000 lookups miss L2, fewer than the 999.5 unique rows:
  // every unique row is fetched once. 999.5 x 512 B / (0.42 x 64 GB/s) = 19.04 us, plus the
  // 2 us kernel floor.
  const double link = unique_rows() * 512 / (0.42 * 64e9);
  CHECK(e.time == Approx(link + 2e-6).epsilon(1e-9));
  CHECK(e.bound == "host_link");
  CHECK(e.host_link_bytes == Approx(unique_rows() * 512).epsilon(1e-9));
}

TEST_CASE("fused_uvm backward: unique rows read and written back over both directions", "[embedding][host_memory]") {
  const GpuSpec gpu = h100();
  EmbeddingDesc d = one_table(EmbeddingStorage::kHostUvm, EmbeddingPass::kBackward);
  d.batch = 100'000;  // enough rows for the link to bind over the backward's HBM-side work
  const Estimate e = predict_embedding(d, gpu);
  // SGD: no optimizer state. 95,163 unique rows of 100,000 uniform draws, each read and
  // written: 95,163 x 512 B each way at 0.605 x 64 GB/s = 1.258 ms, plus the floors of the 13
  // kernels of FBGEMM's backward (8, and a 3-pass onesweep sort of 20-bit keys: histogram,
  // exclusive sum, 3 passes) x 2 us.
  const double unique = 1e6 * (1 - std::pow(1 - 1e-6, 100'000));
  const double link = unique * 512 / (0.605 * 64e9);
  CHECK(link == Approx(1.258e-3).epsilon(1e-3));
  CHECK(e.bound == "host_link");
  CHECK(e.time == Approx(link + 13 * 2e-6).epsilon(1e-9));
  CHECK(e.launches == 13);
  CHECK(e.host_link_bytes == Approx(2 * unique * 512).epsilon(1e-9));
}

TEST_CASE("fused_uvm_caching forward: the prefetch of the misses runs before an HBM lookup", "[embedding][host_memory]") {
  const GpuSpec gpu = h100();
  const Estimate hbm = predict_embedding(one_table(EmbeddingStorage::kHbm, EmbeddingPass::kForward), gpu);
  const Estimate cached = predict_embedding(one_table(EmbeddingStorage::kHostUvmCaching, EmbeddingPass::kForward, 200000), gpu);
  // A 200,000-row cache over uniform lookups hits 20%: 800 misses (fewer than the unique
  // rows), each a 512-byte fill over PCIe and a 512-byte eviction back, at the update
  // efficiency: 800 x 512 / (0.605 x 64e9) = 10.58 us; the cache lookup sorts the 1000
  // indices (132 B each: linearize, 4 radix passes of 64-bit keys and 32-bit values, the
  // encoding) at CUB onesweep's share of HBM; two more kernels.
  const double fill = 800 * 512 / (0.605 * 64e9);
  const double sort = 1000 * 132.0 / (gpu.memory_bandwidth * kSortEfficiency);
  CHECK(cached.time - hbm.time == Approx(fill + sort + 2 * gpu.efficiency.min_kernel_time).epsilon(1e-9));
  CHECK(cached.launches == hbm.launches + 2);
  CHECK(cached.host_link_bytes == Approx(2 * 800 * 512.0).epsilon(1e-12));
  // The backward updates the cached rows in HBM; SGD has no state in host memory.
  const Estimate hbm_b = predict_embedding(one_table(EmbeddingStorage::kHbm, EmbeddingPass::kBackward), gpu);
  const Estimate cached_b = predict_embedding(one_table(EmbeddingStorage::kHostUvmCaching, EmbeddingPass::kBackward, 200000), gpu);
  CHECK(cached_b.time == Approx(hbm_b.time).epsilon(1e-12));
}

TEST_CASE("host-memory rules: never faster than HBM, monotone in cache size and link rate", "[embedding][host_memory]") {
  const GpuSpec gpu = h100();
  for (const auto pass : {EmbeddingPass::kForward, EmbeddingPass::kBackward}) {
    EmbeddingDesc d = one_table(EmbeddingStorage::kHbm, pass);
    d.tables[0].distribution = IndexDistribution::zipf(1.05);
    d.optimizer = EmbeddingOptimizer::kAdam;
    d.batch = 65536;
    const double hbm = predict_embedding(d, gpu).time;
    d.tables[0].storage = EmbeddingStorage::kHostUvm;
    const double uvm = predict_embedding(d, gpu).time;
    CHECK(uvm > hbm);
    d.tables[0].storage = EmbeddingStorage::kHostUvmCaching;
    double previous = 1e30;
    for (double rows : {1e3, 1e4, 1e5, 5e5, 1e6}) {
      d.tables[0].cache_rows = rows;
      const double t = predict_embedding(d, gpu).time;
      INFO("cache rows " << rows);
      CHECK(t >= hbm);
      CHECK(t <= previous);
      previous = t;
    }
    // Grace Hopper's NVLink-C2C (450 GB/s per direction) instead of PCIe: never slower.
    d.tables[0].storage = EmbeddingStorage::kHostUvm;
    d.host_to_device = d.device_to_host = 450e9;
    CHECK(predict_embedding(d, gpu).time < uvm);
  }
}

}  // namespace perfcast_test_predictors_host_memory_embedding_test

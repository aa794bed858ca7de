#include <cmath>
#include <random>

#include <catch2/catch.hpp>

#include "predictors/kernel_calibration.hpp"
#include "predictors/embedding_predictor.hpp"
#include "predictors/spec_predictors.hpp"
#include "topology/system_spec.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_predictors_embedding_predictor_test {

using namespace perfcast;

namespace {

GpuSpec h100() { return load_system(std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/h100_sxm.json").gpu; }

EmbeddingDesc lookup(std::int64_t batch, int tables, std::int64_t rows, std::int64_t dim, double pooling,
                     IndexDistribution d, EmbeddingPass pass) {
  EmbeddingDesc e;
  e.batch = batch;
  e.pass = pass;
  e.optimizer = EmbeddingOptimizer::kRowwiseAdagrad;
  for (int t = 0; t < tables; ++t) e.tables.push_back(EmbeddingTableDesc{rows, dim, pooling, d});
  return e;
}

Measurement measured(const KernelDesc& k, double t) {
  Measurement m;
  m.kernel = k;
  m.timing = timing_stats({t, t, t}, "cupti");
  m.device.name = "synthetic GPU";
  return m;
}

}  // namespace

TEST_CASE("embedding predictor: monotone in batch, pooling and dimension", "[embedding][rule]") {
  const GpuSpec g = h100();
  for (auto pass : {EmbeddingPass::kForward, EmbeddingPass::kBackward}) {
    for (const auto& dist : {IndexDistribution::uniform(), IndexDistribution::zipf(1.05)}) {
      INFO((pass == EmbeddingPass::kForward ? "forward " : "backward ") << dist.describe());
      double prev = 0;
      for (std::int64_t b = 64; b <= 262144; b *= 2) {
        const double t = predict_embedding(lookup(b, 8, 5'000'000, 128, 20, dist, pass), g).time;
        CHECK(t >= prev * (1 - 1e-12));
        prev = t;
      }
      prev = 0;
      for (double l = 1; l <= 512; l *= 2) {
        const double t = predict_embedding(lookup(4096, 8, 5'000'000, 128, l, dist, pass), g).time;
        CHECK(t >= prev * (1 - 1e-12));
        prev = t;
      }
      prev = 0;
      for (std::int64_t dim = 8; dim <= 1024; dim *= 2) {
        const double t = predict_embedding(lookup(4096, 8, 5'000'000, dim, 20, dist, pass), g).time;
        CHECK(t >= prev * (1 - 1e-12));
        prev = t;
      }
    }
  }
}

TEST_CASE("embedding predictor: never faster than HBM for the unique rows beyond L2", "[embedding][rule]") {
  const GpuSpec g = h100();
  for (auto pass : {EmbeddingPass::kForward, EmbeddingPass::kBackward}) {
    for (std::int64_t batch : {2048, 16384, 131072}) {
      const EmbeddingDesc d = lookup(batch, 16, 20'000'000, 128, 30, IndexDistribution::zipf(0.9), pass);
      const EmbeddingWork w = embedding_work(d, g);
      const double unique_bytes = w.unique_rows * 128 * 4;
      REQUIRE(unique_bytes > g.l2_cache);
      // Forward reads each unique row once; backward reads and writes it.
      const double floor = (pass == EmbeddingPass::kForward ? 1 : 2) * unique_bytes / g.memory_bandwidth;
      CHECK(predict_embedding(d, g).time >= floor);
    }
  }
}

TEST_CASE("embedding predictor: Zipf is faster than uniform at equal size", "[embedding][rule]") {
  const GpuSpec g = h100();
  for (auto pass : {EmbeddingPass::kForward, EmbeddingPass::kBackward}) {
    for (double alpha : {0.8, 1.05, 1.2}) {
      // D 256: the uniform lookup is HBM-bound (8.5 M unique 1 KiB rows), and skew makes it faster.
      const double u = predict_embedding(lookup(8192, 26, 10'000'000, 256, 40, IndexDistribution::uniform(), pass), g).time;
      const double z = predict_embedding(lookup(8192, 26, 10'000'000, 256, 40, IndexDistribution::zipf(alpha), pass), g).time;
      CHECK(z < u);
      // D 64: the forward is bound by its dependent loads (36 waves of 40-index bags, 1.34 ms,
      // against 0.73 ms of HBM time), which skew does not shorten: never slower.
      // The backward's hot rows (32 lookups or more) also form long segments, reduced one after
      // another by the CTA-per-row kernel: skew costs at most that chain there.
      const EmbeddingDesc zd = lookup(8192, 26, 10'000'000, 64, 40, IndexDistribution::zipf(alpha), pass);
      const double u64 = predict_embedding(lookup(8192, 26, 10'000'000, 64, 40, IndexDistribution::uniform(), pass), g).time;
      const double z64 = predict_embedding(zd, g).time;
      if (pass == EmbeddingPass::kForward) CHECK(z64 <= u64);
      if (pass == EmbeddingPass::kBackward) {
        const double chain = segment_chain_time(embedding_work(zd, g), kTbeFitted);
        CHECK(chain > 0);
        CHECK(z64 - chain < u64);
      }
    }
  }
  // A multi-table op is one kernel: one minimum kernel time, not one per table.
  const auto one = predict_embedding(lookup(16, 1, 1000, 16, 1, IndexDistribution::uniform(), EmbeddingPass::kForward), g);
  const auto many = predict_embedding(lookup(16, 64, 1000, 16, 1, IndexDistribution::uniform(), EmbeddingPass::kForward), g);
  CHECK(many.time < 2 * one.time);
}

TEST_CASE("embedding work terms: hand values of the waves and the sort", "[embedding]") {
  const GpuSpec g = h100();  // 132 SMs: 132 x 45 = 5940 warp slots
  const EmbeddingDesc d = lookup(1000, 12, 1'000'000, 64, 10, IndexDistribution::uniform(), EmbeddingPass::kBackward);
  const EmbeddingWork w = embedding_work(d, g);
  CHECK(w.bag_waves == 3);     // ceil(12000 / 5940)
  CHECK(w.row_rounds == 30);   // 3 waves x 10 rows
  CHECK(w.accesses == 120000);
  // 12 M rows: 24 key bits, 3 radix passes of 8 bits. Per index: read the 8-byte index, write
  // a 64-bit key and a 32-bit position (12 B), the histogram's read (8 B), 3 passes of a read
  // and a write of both (3 x 24 B), the run-length encoding's read (8 B); 16 B per unique row.
  CHECK(w.sort_passes == 3);
  CHECK(w.sort_bytes == Approx(120000 * (8 + 12 + 8 + 72 + 8.0) + w.unique_rows * 16));
  // linearize, run-length encoding (2), scan (2), find_long_segments, the two update kernels,
  // and onesweep's histogram, exclusive sum and 3 passes.
  CHECK(w.backward_kernels == 8 + 2 + 3);
}

TEST_CASE("embedding backward from what it does: gathered gradients and the unique rows' update, by hand", "[embedding]") {
  // One table of 1,000 rows x 64 fp32 columns (256 B rows), 4,096 bags of one index, SGD.
  // Unique rows: 1000 x (1 - (1 - 1/1000)^4096). The 4,096 x 64 x 4 B gradient (1 MiB) stays
  // in L2: every bag's gradient row is read from HBM once (4,096 reads of 256 B); each unique
  // row is read and written once (2 x 256 B).
  const GpuSpec g = h100();
  EmbeddingDesc d = lookup(4096, 1, 1000, 64, 1, IndexDistribution::uniform(), EmbeddingPass::kBackward);
  d.optimizer = EmbeddingOptimizer::kSgd;
  const EmbeddingWork w = embedding_work(d, g);
  const double unique = 1000 * (1 - std::pow(1 - 1.0 / 1000, 4096));
  CHECK(w.unique_rows == Approx(unique));
  CHECK(w.random_rows == Approx(4096 + 2 * unique));
  CHECK(w.random_bytes == Approx(4096 * 256.0 + 2 * unique * 256.0));
  CHECK(w.stream_bytes == Approx(4096 * 8.0 + 4097 * 8.0));  // indices and offsets
  // 4,096 indices: one single-tile sort kernel (10 bits, 2 passes are not launched).
  CHECK(w.backward_kernels == 8 + 1);
  // The time: 9 kernels at the sub-kernel time, the sort bytes at onesweep's share of HBM, and
  // the larger of the random traffic (with its per-row cost) and one wave of dependent loads.
  const TbeCoefficients k = kTbeFitted;
  const double bw = g.memory_bandwidth * g.efficiency.memory;
  const double random = (w.random_bytes + w.random_rows * k.backward_row_cost + w.stream_bytes) / bw;
  const double loads = std::ceil(4096 / (g.sm_count * k.backward_warps_per_sm)) * k.wave_time;
  // The fitted norm is the max of the two (p >= 1000).
  REQUIRE(k.backward_norm >= 1000);
  const double expected = 9 * k.subkernel_time + w.sort_bytes / (g.memory_bandwidth * kSortEfficiency) + std::max(random, loads);
  CHECK(predict_embedding(d, g).time == Approx(expected).epsilon(1e-9));
  // A separate optimizer writes each unique row's gradient (64 x 4 B + its 8-byte row) and
  // reads it back, in two more kernels.
  d.fused_optimizer = false;
  const EmbeddingWork u = embedding_work(d, g);
  CHECK(u.random_bytes - w.random_bytes == Approx(2 * unique * (256 + 8.0)));
  CHECK(u.backward_kernels == w.backward_kernels + 2);
  CHECK(predict_embedding(d, g).time > expected);
}

TEST_CASE("embedding backward: monotone in pooling, unique rows and dimension; never below the unique rows' HBM traffic",
          "[embedding][rule]") {
  const GpuSpec g = h100();
  for (const auto opt : {EmbeddingOptimizer::kSgd, EmbeddingOptimizer::kRowwiseAdagrad, EmbeddingOptimizer::kAdam}) {
    INFO(optimizer_name(opt));
    auto bwd = [&](std::int64_t rows, std::int64_t dim, double pooling, IndexDistribution dist) {
      EmbeddingDesc d = lookup(16384, 8, rows, dim, pooling, dist, EmbeddingPass::kBackward);
      d.optimizer = opt;
      const double t = predict_embedding(d, g).time;
      CHECK(t >= unique_row_update_floor(d, g));
      return t;
    };
    double prev = 0;
    for (double l = 1; l <= 256; l *= 2) {  // pooling
      const double t = bwd(2'000'000, 128, l, IndexDistribution::uniform());
      CHECK(t >= prev * (1 - 1e-12));
      prev = t;
    }
    prev = 0;
    for (std::int64_t dim = 8; dim <= 1024; dim *= 2) {  // dimension
      const double t = bwd(2'000'000, dim, 16, IndexDistribution::zipf(1.05));
      CHECK(t >= prev * (1 - 1e-12));
      prev = t;
    }
    // Less skew: more unique rows at the same lookups. Monotone once the CTA-per-row chain of
    // the hot rows' long segments (which skew lengthens) is set aside; that chain is tested below.
    prev = 0;
    for (double alpha : {1.6, 1.3, 1.1, 0.9, 0.6}) {
      EmbeddingDesc d = lookup(16384, 8, 2'000'000, 128, 16, IndexDistribution::zipf(alpha), EmbeddingPass::kBackward);
      d.optimizer = opt;
      const double t = bwd(2'000'000, 128, 16, IndexDistribution::zipf(alpha)) - segment_chain_time(embedding_work(d, g), kTbeFitted);
      CHECK(t >= prev * (1 - 1e-12));
      prev = t;
    }
    prev = 0;
    for (std::int64_t rows : {100'000, 1'000'000, 10'000'000, 100'000'000}) {  // uniform, no row looked up 32 times
      const double t = bwd(rows, 128, 16, IndexDistribution::uniform());
      CHECK(t >= prev * (1 - 1e-12));
      prev = t;
    }
  }
}

TEST_CASE("embedding backward: long segments are reduced in turn by the CTA-per-row kernel, by hand", "[embedding]") {
  // The HTA A100 trace's weighted table: 1,000 rows of 96 fp32, 61,072 lookups at batch 8,192.
  // Every row is looked up about 61 times (>= 32): 1,000 long segments. FBGEMM launches
  // ceil(61,072 / 1,024) = 60 CTAs; each reduces ceil(1,000 / 60) = 17 segments in turn, and
  // the 60 CTAs fit one wave (108 SMs x 2). 17 rounds x 7/3 x wave_time.
  GpuSpec a100 = h100();
  a100.sm_count = 108;
  EmbeddingDesc d = lookup(8192, 1, 1000, 96, 61072.0 / 8192, IndexDistribution::uniform(), EmbeddingPass::kBackward);
  d.weighted = true;
  const EmbeddingWork w = embedding_work(d, a100);
  CHECK(w.long_segments == Approx(1000));
  CHECK(w.segment_rounds == Approx(17));
  CHECK(segment_chain_time(w, kTbeFitted) == Approx(17 * 7.0 / 3 * kTbeFitted.wave_time));
  // 10,000 rows: 6 lookups a row, no long segment, no chain.
  d.tables[0].rows = 10'000;
  CHECK(embedding_work(d, a100).segment_rounds == 0);
  // 400 CTAs' worth of lookups (409,600) over 100 rows: 100 busy CTAs of one segment each, one round.
  d.tables[0].rows = 100;
  d.tables[0].pooling = 409'600.0 / 8192;
  CHECK(embedding_work(d, a100).segment_rounds == Approx(1));
  // More rows, all still long (409,600 lookups over 12,800 rows: 32 each): 32 segments per CTA,
  // and the 400 busy CTAs take two waves of 216: 64 rounds.
  d.tables[0].rows = 12'800;
  CHECK(embedding_work(d, a100).segment_rounds == Approx(64));
  // The forward has no such chain.
  d.pass = EmbeddingPass::kForward;
  CHECK(embedding_work(d, a100).segment_rounds == 0);
}

TEST_CASE("unpooled gather (batch_index_select_dim0): one fp16 output row per index, by hand", "[embedding]") {
  // 4 tables of 100 rows x 128 fp16 (256 B rows), 2,048 indices each, the output in fp16.
  const GpuSpec g = h100();
  EmbeddingDesc d = lookup(2048, 4, 100, 128, 1, IndexDistribution::uniform(), EmbeddingPass::kForward);
  d.weight_dtype = DType::kFp16;
  d.output_dtype = DType::kFp16;
  d.optimizer = EmbeddingOptimizer::kNone;
  for (auto& t : d.tables) t.sequence = true;
  const EmbeddingWork f = embedding_work(d, g);
  // Every table fits L2: each of the 100 rows is read once; indices, offsets and 2,048 output rows streamed.
  CHECK(f.random_rows == Approx(4 * 100 * (1 - std::pow(1 - 1.0 / 100, 2048))));
  CHECK(f.stream_bytes == Approx(4 * (2048 * 8.0 + 2049 * 8.0 + 2048 * 256.0)));
  d.pass = EmbeddingPass::kBackward;
  const EmbeddingWork b = embedding_work(d, g);
  // Each index reads its own gradient row; the gradient table (100 x 128 x 2 B) is zeroed and
  // its touched rows written; nothing else is updated.
  CHECK(b.stream_bytes == Approx(4 * (2048 * 8.0 + 2049 * 8.0 + 100 * 256.0)));
  CHECK(b.random_bytes == Approx(4 * (2048 * 256.0 + f.unique_rows / 4 * 256.0)));
  CHECK(predict_embedding(d, g).time > 0);
}

TEST_CASE("embedding backward: optimizer state traffic per unique row, by hand", "[embedding]") {
  // 1,000,000 rows x 64 fp32 columns, 12 tables x 1000 bags x 10 indices, uniform: the
  // optimizer state read and written per unique row is 0 (SGD), 2 x 4 B (row-wise Adagrad),
  // 2 x 64 x 4 B (Adagrad: one accumulator per element), 2 x 2 x 64 x 4 B (Adam: two moments).
  const GpuSpec g = h100();
  EmbeddingDesc d = lookup(1000, 12, 1'000'000, 64, 10, IndexDistribution::uniform(), EmbeddingPass::kBackward);
  d.optimizer = EmbeddingOptimizer::kSgd;
  const EmbeddingWork sgd = embedding_work(d, g);
  const std::pair<EmbeddingOptimizer, double> states[] = {
      {EmbeddingOptimizer::kRowwiseAdagrad, 8.0}, {EmbeddingOptimizer::kAdagrad, 512.0}, {EmbeddingOptimizer::kAdam, 1024.0}};
  for (const auto& [opt, bytes] : states) {
    d.optimizer = opt;
    INFO(optimizer_name(opt));
    CHECK(embedding_work(d, g).dram_bytes - sgd.dram_bytes == Approx(sgd.unique_rows * bytes));
    CHECK(embedding_optimizer_from_name(optimizer_name(opt)) == opt);
  }
}

TEST_CASE("embedding calibration recovers known efficiencies, latency and sort cost", "[calibration][embedding]") {
  const GpuSpec g = h100();
  // Synthetic GPU: 80% of HBM, 60% of L2, 0.2 us per dependent row round, the sort at 50%
  // of HBM, 6 us fixed; 1% noise. Shapes drawn like configs/sweeps/embedding.json.
  const double e_mem = 0.8, e_l2 = 0.6, round = 0.2e-6, e_sort = 0.5, t0 = 6e-6;
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(0, 0.01);
  std::uniform_real_distribution<double> u01(0, 1);
  const auto log_uniform = [&](double lo, double hi) { return std::exp(std::log(lo) + u01(rng) * (std::log(hi) - std::log(lo))); };
  const std::int64_t dims[] = {16, 32, 64, 128, 256};
  std::vector<Measurement> ms;
  for (int i = 0; i < 500; ++i) {
    for (auto pass : {EmbeddingPass::kForward, EmbeddingPass::kBackward}) {
      EmbeddingDesc d;
      d.pass = pass;
      d.batch = std::int64_t{1} << static_cast<int>(std::lround(std::log2(log_uniform(64, 65536))));
      const int tables = 1 + static_cast<int>(u01(rng) * 32);
      const IndexDistribution dist = u01(rng) < 0.5 ? IndexDistribution::uniform() : IndexDistribution::zipf(0.6 + 0.6 * u01(rng));
      for (int t = 0; t < tables; ++t)
        d.tables.push_back({static_cast<std::int64_t>(log_uniform(1e3, 1e8)), dims[static_cast<int>(u01(rng) * 5)],
                            std::round(log_uniform(1, 128)), dist});
      const EmbeddingWork w = embedding_work(d, g);
      double t = t0 + std::max({w.dram_bytes / g.memory_bandwidth / e_mem, w.l2_at_peak / e_l2, w.row_rounds * round});
      if (pass == EmbeddingPass::kBackward) t += w.sort_at_peak / e_sort;
      ms.push_back(measured(d, t * (1 + noise(rng))));
    }
  }
  const KernelCalibration cal = fit_kernel_calibration(ms, g);
  for (const char* fam : {"embedding_forward", "embedding_backward"}) {
    INFO(fam);
    const FamilyFit* f = cal.find(fam);
    REQUIRE(f);
    CHECK(f->memory_efficiency == Approx(e_mem).epsilon(0.03));
    CHECK(f->row_round_time == Approx(round).epsilon(0.05));
    CHECK(f->overhead == Approx(t0).epsilon(0.15));
    CHECK(f->heldout_samples > 50);
    CHECK(f->heldout_geomean_abs_error < 0.02);  // the noise level
  }
  CHECK(cal.find("embedding_backward")->sort_efficiency == Approx(e_sort).epsilon(0.1));
  // The calibrated predictor uses the fit by family and says so; JSON round trip keeps it.
  const EmbeddingDesc big = lookup(65536, 26, 10'000'000, 128, 30, IndexDistribution::uniform(), EmbeddingPass::kBackward);
  const Estimate est = predict_with_calibration(big, g, &cal);
  CHECK(est.calibrated);
  CHECK(est.predictor == "embedding_backward.calibrated");
  const KernelCalibration back =
      parse_kernel_calibration(JsonDocument{nlohmann::json::parse(kernel_calibration_to_json(cal)), "round-trip"});
  const FamilyFit* fb = back.find("embedding_backward");
  REQUIRE(fb);
  CHECK(fb->row_round_time == Approx(cal.find("embedding_backward")->row_round_time).epsilon(1e-4));
  CHECK(predict_with_calibration(big, g, &back).time == Approx(est.time).epsilon(1e-4));
}

}  // namespace perfcast_test_predictors_embedding_predictor_test

#include <catch2/catch.hpp>

#include "model/plan_search/plan_estimate.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_plan_estimate_test {

using namespace perfcast;

namespace {

ParallelismChoice choice(int pp, int vp, int dp, std::int64_t micro_batch) {
  return ParallelismChoice{.pp = pp, .dp = dp, .vp = vp, .micro_batch = micro_batch};
}

WorkloadMetrics metrics(double flops, double tokens_per_s, double mfu, Seconds compute, Seconds bubble) {
  WorkloadMetrics m;
  m.model_flops_per_iteration = flops;
  m.tokens_per_s = tokens_per_s;
  m.samples_per_s = tokens_per_s / 100;
  m.mfu = mfu;
  m.breakdown = {{"compute", compute}, {"pipeline bubble and waits", bubble}};
  return m;
}

}  // namespace

TEST_CASE("plan estimate: the micro-batch counts it simulates", "[plan][estimate]") {
  // 1F1B: M = 64 / (4 x 2) = 8 > 4, so 1 and 2 micro-batches, 7 increments of T(2) - T(1).
  const EstimateCounts f = estimate_counts(choice(4, 1, 4, 2), 64);
  CHECK(f.micro_batches == 8);
  CHECK(f.a == 1);
  CHECK(f.b == 2);
  CHECK(f.increments() == Approx(7.0));
  // Interleaved pp 4: multiples of pp, 4 and 8; M = 64, (64 - 4) / 4 = 15 increments.
  const EstimateCounts v = estimate_counts(choice(4, 2, 1, 1), 64);
  CHECK(v.a == 4);
  CHECK(v.b == 8);
  CHECK(v.increments() == Approx(15.0));
  // M <= 4 steps: simulated in full at once.
  CHECK(estimate_counts(choice(4, 1, 4, 1), 16).direct());   // M = 4
  CHECK(estimate_counts(choice(4, 2, 1, 1), 16).direct());   // M = 16 = 4 x pp
  CHECK_FALSE(estimate_counts(choice(4, 1, 1, 1), 5).direct());
}

TEST_CASE("plan estimate: the line through two short simulations", "[plan][estimate]") {
  const EstimateCounts f = estimate_counts(choice(4, 1, 4, 2), 64);  // 7 increments
  CHECK(estimate_iteration_time(f, 1.0, 1.5) == Approx(4.5));         // 1 + 7 x 0.5
  // Never below the longer simulation, even if T(b) < T(a) (not a pipeline).
  CHECK(estimate_iteration_time(f, 1.5, 1.0) == Approx(1.0));
  const EstimateCounts d = estimate_counts(choice(4, 1, 4, 1), 16);
  CHECK(estimate_iteration_time(d, 1.0, 2.0) == 2.0);  // direct: the full simulation's time
}

TEST_CASE("plan estimate: per-iteration amounts follow the line, rates divide by the estimate", "[plan][estimate]") {
  const EstimateCounts f = estimate_counts(choice(4, 1, 4, 2), 64);  // 7 increments
  // a: 1 s, 10 FLOPs, 100 tokens; b: 1.5 s, 20 FLOPs, 225 tokens (150/s), MFU 0.3.
  const WorkloadMetrics a = metrics(10, 100, 0.2, 0.8, 0.2);
  WorkloadMetrics b = metrics(20, 150, 0.3, 1.2, 0.3);
  b.breakdown.push_back({"exposed dp communication", 0.1});
  const Seconds e = estimate_iteration_time(f, 1.0, 1.5);  // 4.5 s
  const WorkloadMetrics m = estimate_metrics(f, a, 1.0, b, 1.5, e);
  CHECK(m.model_flops_per_iteration == Approx(80.0));           // 10 + 7 x 10
  CHECK(m.tokens_per_s == Approx((100.0 + 7 * 125.0) / 4.5));  // 975 tokens in 4.5 s
  CHECK(m.samples_per_s == Approx(9.75 / 4.5));
  CHECK(m.mfu == Approx(0.3 * (80.0 / 20.0) * (1.5 / 4.5)));  // 0.4: MFU x time is proportional to FLOPs
  REQUIRE(m.breakdown.size() == 3);
  CHECK(m.breakdown[0].time == Approx(0.8 + 7 * 0.4));  // compute 3.6 s
  CHECK(m.breakdown[1].time == Approx(0.2 + 7 * 0.1));  // bubble 0.9 s
  CHECK(m.breakdown[2].time == Approx(0.7));            // absent from a: 0 + 7 x 0.1
  // A part that shrinks is clamped at 0, never negative.
  const WorkloadMetrics shrink = estimate_metrics(f, metrics(10, 100, 0.2, 0.8, 0.5), 1.0, b, 1.5, e);
  CHECK(shrink.breakdown[1].time == 0.0);
}

}  // namespace perfcast_test_model_plan_estimate_test

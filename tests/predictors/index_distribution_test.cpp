#include <cmath>

#include <catch2/catch.hpp>

#include "predictors/index_distribution.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_predictors_index_distribution_test {

using namespace perfcast;

TEST_CASE("uniform unique rows match the closed form", "[distribution]") {
  // E(1 - (1 - 1/E)^n): E = 1000, n = 1000 gives 1000 (1 - 0.999^1000) = 632.305...
  CHECK(expected_unique_rows(IndexDistribution::uniform(), 1000, 1000) == Approx(632.3046).epsilon(1e-6));
  CHECK(expected_unique_rows(IndexDistribution::uniform(), 1e6, 1) == Approx(1.0));
  CHECK(expected_unique_rows(IndexDistribution::uniform(), 10, 1e6) == Approx(10.0));
}

TEST_CASE("zipf unique rows agree with the exact sum", "[distribution]") {
  for (double alpha : {0.6, 1.0, 1.2}) {
    for (double rows : {500.0, 20000.0}) {
      const double n = 5000;
      double norm = 0;
      for (int i = 1; i <= rows; ++i) norm += std::pow(i, -alpha);
      double exact = 0;
      for (int i = 1; i <= rows; ++i) exact += 1 - std::pow(1 - std::pow(i, -alpha) / norm, n);
      INFO("alpha " << alpha << " rows " << rows);
      CHECK(expected_unique_rows(IndexDistribution::zipf(alpha), rows, n) == Approx(exact).epsilon(0.01));
    }
  }
}

TEST_CASE("skew lowers unique rows; more accesses never lower them", "[distribution][rule]") {
  const double rows = 1e6, n = 2e5;
  const double u = expected_unique_rows(IndexDistribution::uniform(), rows, n);
  const double z = expected_unique_rows(IndexDistribution::zipf(1.05), rows, n);
  const double h = expected_unique_rows(IndexDistribution::hot_set(0.01, 0.9), rows, n);
  CHECK(z < u);
  CHECK(h < u);
  for (const auto& d : {IndexDistribution::uniform(), IndexDistribution::zipf(0.8), IndexDistribution::hot_set(0.05, 0.8)}) {
    double prev = 0;
    for (double acc = 1; acc < 1e8; acc *= 3) {
      const double v = expected_unique_rows(d, rows, acc);
      CHECK(v >= prev);
      CHECK(v <= std::min(rows, acc) + 1e-9);
      prev = v;
    }
  }
}

TEST_CASE("hot set: hand-worked value", "[distribution]") {
  // 100 rows, 10 hot getting 90% of 100 accesses: hot 10(1 - 0.9^90), cold 90(1 - (89/90)^10).
  const double expected = 10 * (1 - std::pow(0.9, 90)) + 90 * (1 - std::pow(89.0 / 90, 10));
  CHECK(expected_unique_rows(IndexDistribution::hot_set(0.1, 0.9), 100, 100) == Approx(expected));
}

TEST_CASE("reuse histogram: mean reuse from bin midpoints", "[distribution]") {
  ReuseHistogram h{};
  h[0] = 0.5;  // half the unique indices seen once
  h[2] = 0.5;  // half seen 3 or 4 times (mean 3.5)
  CHECK(mean_reuse(h) == Approx(2.25));
  CHECK(expected_unique_rows(IndexDistribution::histogram(h), 1e6, 1000) == Approx(1000 / 2.25));
}

}  // namespace perfcast_test_predictors_index_distribution_test

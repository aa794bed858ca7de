// The LRU hit-rate model (Che's approximation) against exact LRU simulations on sampled
// index streams: fully associative and 32-way set-associative, uniform, Zipf and hot-set
// distributions; required within 2 percentage points.
#include <cmath>
#include <cstdint>
#include <list>
#include <random>
#include <unordered_map>
#include <vector>

#include <catch2/catch.hpp>

#include "predictors/lru_cache_model.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_predictors_lru_cache_model_test {

using namespace perfcast;

namespace {

/// Row sampler for a distribution over `rows` rows: inverse CDF by binary search.
class RowSampler {
 public:
  RowSampler(const IndexDistribution& d, std::int64_t rows) : cdf_(static_cast<std::size_t>(rows)) {
    double s = 0;
    const double hot = std::round(d.hot_rows_fraction * static_cast<double>(rows));
    for (std::int64_t i = 0; i < rows; ++i) {
      double w = 1;
      if (d.kind == IndexDistribution::Kind::kZipf) w = std::pow(static_cast<double>(i + 1), -d.alpha);
      if (d.kind == IndexDistribution::Kind::kHotSet)
        w = i < hot ? d.hot_access_fraction / hot : (1 - d.hot_access_fraction) / (static_cast<double>(rows) - hot);
      s += w;
      cdf_[static_cast<std::size_t>(i)] = s;
    }
    for (auto& c : cdf_) c /= s;
  }
  std::int64_t operator()(std::mt19937_64& rng) {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin();
  }

 private:
  std::vector<double> cdf_;
};

/// Exact LRU: `sets` sets of `ways` rows each (sets = 1: fully associative); rows map to
/// sets by a multiplicative hash, as a hardware-style cache indexes them.
class ExactLru {
 public:
  ExactLru(std::size_t sets, std::size_t ways) : sets_(sets), ways_(ways), lists_(sets) {}
  bool access(std::int64_t row) {
    const std::size_t set = sets_ == 1 ? 0 : static_cast<std::size_t>((static_cast<std::uint64_t>(row) * 0x9E3779B97F4A7C15ULL) >> 20) % sets_;
    auto& l = lists_[set];
    const auto it = where_.find(row);
    if (it != where_.end()) {
      l.splice(l.begin(), l, it->second);
      return true;
    }
    l.push_front(row);
    where_[row] = l.begin();
    if (l.size() > ways_) {
      where_.erase(l.back());
      l.pop_back();
    }
    return false;
  }

 private:
  std::size_t sets_, ways_;
  std::vector<std::list<std::int64_t>> lists_;
  std::unordered_map<std::int64_t, std::list<std::int64_t>::iterator> where_;
};

/// Hit rate of an exact LRU over a sampled stream: `warmup` lookups, then `measured`.
double simulated_hit_rate(const IndexDistribution& d, std::int64_t rows, std::size_t sets, std::size_t ways, std::uint64_t seed) {
  RowSampler sample(d, rows);
  std::mt19937_64 rng(seed);
  ExactLru cache(sets, ways);
  const int warmup = 200000, measured = 400000;
  for (int i = 0; i < warmup; ++i) (void)cache.access(sample(rng));
  int hits = 0;
  for (int i = 0; i < measured; ++i) hits += cache.access(sample(rng)) ? 1 : 0;
  return static_cast<double>(hits) / measured;
}

}  // namespace

TEST_CASE("LRU hit rate: uniform is the cached share of rows, by hand", "[lru]") {
  CHECK(lru_hit_rate(IndexDistribution::uniform(), 100000, 5000) == Approx(0.05));
  CHECK(lru_hit_rate(IndexDistribution::uniform(), 100000, 0) == 0);
  CHECK(lru_hit_rate(IndexDistribution::uniform(), 100000, 100000) == 1);
  CHECK(lru_hit_rate(IndexDistribution::zipf(1.0), 1000, 2000) == 1);
}

TEST_CASE("LRU hit rate is non-decreasing in the cache size and rises with skew", "[lru]") {
  double last = 0;
  for (double c = 100; c <= 100000; c *= 2) {
    const double h = lru_hit_rate(IndexDistribution::zipf(0.9), 100000, c);
    CHECK(h >= last);
    CHECK(h <= 1);
    last = h;
  }
  CHECK(lru_hit_rate(IndexDistribution::zipf(1.2), 100000, 1000) > lru_hit_rate(IndexDistribution::zipf(0.8), 100000, 1000));
}

TEST_CASE("LRU hit rate within 2 points of an exact LRU simulation", "[lru]") {
  const std::int64_t rows = 100000;
  struct Case {
    IndexDistribution d;
    double cache_rows;
  };
  const std::vector<Case> cases = {
      {IndexDistribution::uniform(), 10000},          {IndexDistribution::zipf(0.8), 2000},
      {IndexDistribution::zipf(0.8), 20000},          {IndexDistribution::zipf(1.05), 1000},
      {IndexDistribution::zipf(1.05), 10000},         {IndexDistribution::zipf(1.3), 500},
      {IndexDistribution::hot_set(0.01, 0.8), 2000},  {IndexDistribution::hot_set(0.05, 0.5), 4096},
  };
  std::uint64_t seed = 11;
  for (const auto& c : cases) {
    const double model = lru_hit_rate(c.d, static_cast<double>(rows), c.cache_rows);
    const double full = simulated_hit_rate(c.d, rows, 1, static_cast<std::size_t>(c.cache_rows), seed++);
    // 32-way sets, as FBGEMM's LRU embedding cache (DEFAULT_ASSOC = 32).
    const auto ways = std::size_t{32};
    const double set_assoc = simulated_hit_rate(c.d, rows, static_cast<std::size_t>(c.cache_rows) / ways, ways, seed++);
    INFO(c.d.describe() << ", cache " << c.cache_rows << " rows: model " << model << ", exact LRU " << full
                        << ", 32-way LRU " << set_assoc);
    CHECK(std::fabs(model - full) <= 0.02);
    CHECK(std::fabs(model - set_assoc) <= 0.02);
  }
}

TEST_CASE("LRU hit rate from a reuse histogram goes through the fitted Zipf exponent", "[lru]") {
  ReuseHistogram h{};
  h[0] = 0.7;
  h[1] = 0.2;
  h[3] = 0.1;
  const IndexDistribution d = IndexDistribution::histogram(h);
  const double accesses = 65536 * 20.0;
  const double unique = accesses / mean_reuse(h);
  const double alpha = fit_zipf_alpha(1e6, accesses, unique);
  CHECK(lru_hit_rate(d, 1e6, 50000, accesses) == Approx(lru_hit_rate(IndexDistribution::zipf(alpha), 1e6, 50000)));
  CHECK_THROWS(lru_hit_rate(d, 1e6, 50000));
}

}  // namespace perfcast_test_predictors_lru_cache_model_test

#include "predictors/lru_cache_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

namespace perfcast {
namespace {

/// Rows grouped by popularity: (number of rows, probability of each row).
using Classes = std::vector<std::pair<double, double>>;

/// Zipf over ranks 1..rows: ranks 1..64 one by one, then 48 log-spaced buckets per decade
/// with the bucket's mean probability (the grouping expected_unique_rows uses).
Classes zipf_classes(double rows, double alpha) {
  auto mass = [alpha](double lo, double hi) {
    if (hi - lo < 8) {
      double s = 0;
      for (double i = lo; i <= hi; i += 1) s += std::pow(i, -alpha);
      return s;
    }
    const double a = lo - 0.5, b = hi + 0.5;
    if (std::fabs(alpha - 1.0) < 1e-9) return std::log(b / a);
    return (std::pow(b, 1 - alpha) - std::pow(a, 1 - alpha)) / (1 - alpha);
  };
  Classes out;
  double total = 0;
  for (double lo = 1; lo <= rows;) {
    double hi = lo < 64 ? lo : std::floor(lo * std::pow(10.0, 1.0 / 48));
    hi = std::min(std::max(hi, lo), rows);
    const double m = mass(lo, hi);
    out.emplace_back(hi - lo + 1, m / (hi - lo + 1));
    total += m;
    lo = hi + 1;
  }
  for (auto& c : out) c.second /= total;
  return out;
}

Classes popularity_classes(const IndexDistribution& d, double rows, double accesses_per_batch) {
  switch (d.kind) {
    case IndexDistribution::Kind::kUniform: return {{rows, 1.0 / rows}};
    case IndexDistribution::Kind::kZipf: return zipf_classes(rows, d.alpha);
    case IndexDistribution::Kind::kHotSet: {
      const double hot = std::max(1.0, std::round(d.hot_rows_fraction * rows));
      if (hot >= rows) return {{rows, 1.0 / rows}};
      return {{hot, d.hot_access_fraction / hot}, {rows - hot, (1 - d.hot_access_fraction) / (rows - hot)}};
    }
    case IndexDistribution::Kind::kReuseHistogram: {
      if (accesses_per_batch < 1) {
        throw std::invalid_argument("lru_hit_rate: a reuse histogram needs the lookups per batch to fit a Zipf exponent");
      }
      const double unique = std::clamp(accesses_per_batch / mean_reuse(d.reuse), 1.0, std::min(rows, accesses_per_batch));
      const double alpha = fit_zipf_alpha(rows, accesses_per_batch, unique);
      return alpha > 0 ? zipf_classes(rows, alpha) : Classes{{rows, 1.0 / rows}};
    }
  }
  return {{rows, 1.0 / rows}};
}

/// Expected rows cached after a characteristic time t: sum over classes of n (1 - e^{-p t}).
double occupancy(const Classes& classes, double t) {
  double s = 0;
  for (const auto& [n, p] : classes) s += n * -std::expm1(-p * t);
  return s;
}

}  // namespace

double lru_hit_rate(const IndexDistribution& d, double rows, double cache_rows, double accesses_per_batch) {
  if (!(rows >= 1) || !(cache_rows > 0)) return 0;
  if (cache_rows >= rows) return 1;
  if (d.kind == IndexDistribution::Kind::kUniform) return cache_rows / rows;
  const Classes classes = popularity_classes(d, rows, accesses_per_batch);
  // occupancy(t) rises from 0 to `rows`; bisect on log t for occupancy(T) = cache_rows.
  double lo = 1e-12, hi = 1.0;
  while (occupancy(classes, hi) < cache_rows && hi < 1e300) hi *= 4;
  for (int i = 0; i < 200 && hi / lo > 1 + 1e-12; ++i) {
    const double mid = std::sqrt(lo * hi);
    (occupancy(classes, mid) < cache_rows ? lo : hi) = mid;
  }
  const double t = std::sqrt(lo * hi);
  double hit = 0;
  for (const auto& [n, p] : classes) hit += n * p * -std::expm1(-p * t);
  return std::clamp(hit, 0.0, 1.0);
}

}  // namespace perfcast

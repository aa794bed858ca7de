#include "predictors/index_distribution.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

namespace perfcast {
namespace {

/// 1 - (1 - p)^n computed stably for tiny p.
double touched_probability(double p, double n) {
  if (p <= 0 || n <= 0) return 0.0;
  if (p >= 1) return 1.0;
  return -std::expm1(n * std::log1p(-p));
}

/// Sum over ranks i in [lo, hi] of i^-alpha, by the integral with the midpoint rule for
/// single ranks.
double zipf_mass(double lo, double hi, double alpha) {
  if (hi - lo < 8) {
    double s = 0;
    for (double i = lo; i <= hi; i += 1) s += std::pow(i, -alpha);
    return s;
  }
  const double a = lo - 0.5, b = hi + 0.5;
  if (std::fabs(alpha - 1.0) < 1e-9) return std::log(b / a);
  return (std::pow(b, 1 - alpha) - std::pow(a, 1 - alpha)) / (1 - alpha);
}

double zipf_unique(double rows, double accesses, double alpha) {
  // Normalizer: ranks 1..1024 summed exactly, the tail by the integral.
  const double exact_upto = std::min(rows, 1024.0);
  double norm = 0;
  for (double i = 1; i <= exact_upto; i += 1) norm += std::pow(i, -alpha);
  if (rows > exact_upto) norm += zipf_mass(exact_upto + 1, rows, alpha);
  // Buckets: ranks 1..64 one by one, then 48 buckets per decade.
  double unique = 0;
  double lo = 1;
  while (lo <= rows) {
    double hi = lo < 64 ? lo : std::floor(lo * std::pow(10.0, 1.0 / 48));
    hi = std::min(std::max(hi, lo), rows);
    const double count = hi - lo + 1;
    const double p_mean = zipf_mass(lo, hi, alpha) / norm / count;
    unique += count * touched_probability(p_mean, accesses);
    lo = hi + 1;
  }
  return unique;
}

/// zipf_unique memoized per thread. Key: the exact bit patterns of (rows, accesses, alpha),
/// which are all zipf_unique reads, so a hit returns the very double a fresh call computes
/// (the function is pure and deterministic). Why: the sharding search predicts the
/// embedding kernel of every new combination of shards on a rank, and each table's Zipf
/// sum (about a thousand pow calls) would otherwise be recomputed for every combination
/// it appears in. Bounded: cleared when it reaches kMaxEntries (4096 x ~40 B).
double zipf_unique_memo(double rows, double accesses, double alpha) {
  struct Key {
    std::uint64_t rows, accesses, alpha;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      std::uint64_t h = k.rows * 0x9e3779b97f4a7c15ull;
      h = (h ^ (h >> 29) ^ k.accesses) * 0xbf58476d1ce4e5b9ull;
      h = (h ^ (h >> 32) ^ k.alpha) * 0x94d049bb133111ebull;
      return static_cast<std::size_t>(h ^ (h >> 31));
    }
  };
  constexpr std::size_t kMaxEntries = 4096;
  thread_local std::unordered_map<Key, double, KeyHash> memo;
  const Key key{std::bit_cast<std::uint64_t>(rows), std::bit_cast<std::uint64_t>(accesses),
                std::bit_cast<std::uint64_t>(alpha)};
  if (const auto it = memo.find(key); it != memo.end()) return it->second;
  if (memo.size() >= kMaxEntries) memo.clear();
  const double u = zipf_unique(rows, accesses, alpha);
  memo.emplace(key, u);
  return u;
}

}  // namespace

IndexDistribution IndexDistribution::zipf(double alpha) {
  IndexDistribution d;
  d.kind = Kind::kZipf;
  d.alpha = alpha;
  return d;
}

IndexDistribution IndexDistribution::hot_set(double rows_fraction, double access_fraction) {
  IndexDistribution d;
  d.kind = Kind::kHotSet;
  d.hot_rows_fraction = rows_fraction;
  d.hot_access_fraction = access_fraction;
  return d;
}

IndexDistribution IndexDistribution::histogram(const ReuseHistogram& shares) {
  IndexDistribution d;
  d.kind = Kind::kReuseHistogram;
  d.reuse = shares;
  return d;
}

std::string IndexDistribution::describe() const {
  switch (kind) {
    case Kind::kUniform: return "uniform";
    case Kind::kZipf: return fmt::format("zipf(alpha={:g})", alpha);
    case Kind::kHotSet: return fmt::format("hot_set(rows={:g}, accesses={:g})", hot_rows_fraction, hot_access_fraction);
    case Kind::kReuseHistogram: return fmt::format("reuse_histogram(mean_reuse={:.2f})", mean_reuse(reuse));
  }
  return "?";
}

double reuse_bin_count(std::size_t bin) {
  // Counts are whole numbers, so (0,1] holds 1 and (2^(i-1), 2^i] the integers
  // 2^(i-1)+1 .. 2^i, mean 0.75 * 2^i + 0.5; the open last bin takes 1.5 * 2^15.
  if (bin >= kReuseBins - 1) return 1.5 * std::ldexp(1.0, 15);
  if (bin == 0) return 1.0;
  return 0.75 * std::ldexp(1.0, static_cast<int>(bin)) + 0.5;
}

std::size_t reuse_bin(std::int64_t count) {
  std::size_t bin = 0;
  std::int64_t upper = 1;  // bin `bin` holds counts in (upper / 2, upper]
  while (count > upper && bin < kReuseBins - 1) {
    upper *= 2;
    ++bin;
  }
  return bin;
}

double mean_reuse(const ReuseHistogram& shares) {
  double total = 0, mass = 0;
  for (std::size_t i = 0; i < kReuseBins; ++i) {
    total += shares[i] * reuse_bin_count(i);
    mass += shares[i];
  }
  return mass > 0 ? total / mass : 1.0;
}

ReuseHistogram unique_shares_from_access_shares(const ReuseHistogram& access_shares) {
  ReuseHistogram u{};
  double sum = 0;
  for (std::size_t i = 0; i < kReuseBins; ++i) {
    u[i] = std::max(0.0, access_shares[i]) / reuse_bin_count(i);
    sum += u[i];
  }
  if (sum > 0)
    for (double& v : u) v /= sum;
  return u;
}

double fit_zipf_alpha(double rows, double accesses, double unique) {
  constexpr double kLo = 0.01, kHi = 8.0;
  const auto unique_at = [&](double a) { return expected_unique_rows(IndexDistribution::zipf(a), rows, accesses); };
  if (unique >= expected_unique_rows(IndexDistribution::uniform(), rows, accesses) || unique >= unique_at(kLo)) return 0.0;
  if (unique <= unique_at(kHi)) return kHi;
  // Unique rows fall as alpha grows: bisect on the bracket [lo, hi].
  double lo = kLo, hi = kHi;
  while (hi - lo > 1e-4 * lo) {
    const double mid = 0.5 * (lo + hi);
    (unique_at(mid) > unique ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

double expected_unique_rows(const IndexDistribution& d, double rows, double accesses) {
  if (rows <= 0 || accesses <= 0) return 0.0;
  double u = 0;
  switch (d.kind) {
    case IndexDistribution::Kind::kUniform:
      u = rows * touched_probability(1.0 / rows, accesses);
      break;
    case IndexDistribution::Kind::kZipf:
      u = zipf_unique_memo(rows, accesses, d.alpha);
      break;
    case IndexDistribution::Kind::kHotSet: {
      const double hot = std::max(1.0, std::round(rows * d.hot_rows_fraction));
      const double cold = std::max(0.0, rows - hot);
      const double hot_acc = accesses * d.hot_access_fraction;
      const double cold_acc = accesses - hot_acc;
      u = hot * touched_probability(1.0 / hot, hot_acc);
      if (cold > 0) u += cold * touched_probability(1.0 / cold, cold_acc);
      break;
    }
    case IndexDistribution::Kind::kReuseHistogram:
      u = accesses / mean_reuse(d.reuse);
      break;
  }
  return std::clamp(u, std::min(1.0, accesses), std::min(rows, accesses));
}

namespace {
/// Sum of r^-alpha over ranks 1..n (n >= 1), ranks up to 1024 summed exactly.
double zipf_norm(double n, double alpha) {
  const double exact = std::min(n, 1024.0);
  double s = 0;
  for (double i = 1; i <= exact; i += 1) s += std::pow(i, -alpha);
  if (n > exact) s += zipf_mass(exact + 1, n, alpha);
  return s;
}
}  // namespace

double top_rows_access_share(const IndexDistribution& d, double rows, double k, double unique) {
  if (rows <= 0 || k <= 0) return 0.0;
  if (k >= rows) return 1.0;
  switch (d.kind) {
    case IndexDistribution::Kind::kUniform: return k / rows;
    case IndexDistribution::Kind::kZipf: return std::clamp(zipf_norm(std::floor(k), d.alpha) / zipf_norm(rows, d.alpha), 0.0, 1.0);
    case IndexDistribution::Kind::kHotSet: {
      const double hot = std::max(1.0, std::round(rows * d.hot_rows_fraction));
      if (k <= hot) return d.hot_access_fraction * k / hot;
      return d.hot_access_fraction + (1 - d.hot_access_fraction) * (k - hot) / std::max(1.0, rows - hot);
    }
    case IndexDistribution::Kind::kReuseHistogram: {
      // Unique rows per batch by bin, heaviest first; each bin's accesses are its unique share x count.
      const double u = unique > 0 ? unique : rows;
      double total = 0;
      for (std::size_t i = 0; i < kReuseBins; ++i) total += d.reuse[i] * reuse_bin_count(i);
      if (total <= 0) return k / rows;
      double left = k, share = 0;
      for (std::size_t i = kReuseBins; i-- > 0 && left > 0;) {
        const double in_bin = d.reuse[i] * u;
        const double take = std::min(left, in_bin);
        share += take * reuse_bin_count(i) / (total * u);
        left -= take;
      }
      return std::clamp(share, 0.0, 1.0);
    }
  }
  return k / rows;
}

double frequent_rows_for(const IndexDistribution& d, double rows, double accesses, double min_accesses) {
  if (rows <= 0 || accesses <= 0 || min_accesses <= 0) return 0.0;
  switch (d.kind) {
    case IndexDistribution::Kind::kUniform: return accesses / rows >= min_accesses ? rows : 0.0;
    case IndexDistribution::Kind::kZipf: {
      // accesses x r^-alpha / H >= min_accesses  <=>  r <= (accesses / (H x min_accesses))^(1/alpha)
      const double r = std::pow(accesses / (zipf_norm(rows, d.alpha) * min_accesses), 1.0 / d.alpha);
      return std::clamp(std::floor(r), 0.0, rows);
    }
    case IndexDistribution::Kind::kHotSet: {
      const double hot = std::max(1.0, std::round(rows * d.hot_rows_fraction));
      const double cold = std::max(0.0, rows - hot);
      if (accesses * d.hot_access_fraction / hot < min_accesses) return 0.0;
      if (cold > 0 && accesses * (1 - d.hot_access_fraction) / cold >= min_accesses) return rows;
      return std::min(hot, rows);
    }
    case IndexDistribution::Kind::kReuseHistogram: {
      const double unique = expected_unique_rows(d, rows, accesses);
      double k = 0;
      for (std::size_t i = 0; i < kReuseBins; ++i)
        if (reuse_bin_count(i) >= min_accesses) k += d.reuse[i] * unique;
      return std::clamp(std::floor(k), 0.0, rows);
    }
  }
  return 0.0;
}

IndexDistribution split_distribution(const IndexDistribution& d, double rows, double k, bool head) {
  if (d.kind == IndexDistribution::Kind::kZipf && head) return d;
  if (d.kind == IndexDistribution::Kind::kHotSet && head) {
    const double hot = std::max(1.0, std::round(rows * d.hot_rows_fraction));
    if (k > hot) {  // the hot rows and some cold ones: a hot set of its own
      const double share = d.hot_access_fraction / top_rows_access_share(d, rows, k);
      return IndexDistribution::hot_set(hot / k, std::clamp(share, 0.0, 1.0));
    }
  }
  if (d.kind == IndexDistribution::Kind::kReuseHistogram) return d;
  return IndexDistribution::uniform();
}

}  // namespace perfcast

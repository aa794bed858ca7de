#pragma once
/// \file index_distribution.hpp
/// How the indices of one embedding table are spread over its rows within a batch, and
/// what follows from that: expected unique rows and the reuse histogram.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace perfcast {

/// Number of bins of the reuse-factor histogram of the reference model: bins (0,1],
/// (1,2], (2,4], ..., (2^14,2^15], >2^15 (docs/reference-paper.md section 4).
inline constexpr std::size_t kReuseBins = 17;
using ReuseHistogram = std::array<double, kReuseBins>;

struct IndexDistribution {
  enum class Kind { kUniform, kZipf, kHotSet, kReuseHistogram };
  Kind kind = Kind::kUniform;
  double alpha = 0;                ///< Zipf exponent (kZipf), > 0
  double hot_rows_fraction = 0;    ///< kHotSet: share of rows that are hot, (0, 1)
  double hot_access_fraction = 0;  ///< kHotSet: share of accesses that go to hot rows, [0, 1]
  /// kReuseHistogram: share of unique indices per bin (sums to 1), measured per batch.
  ReuseHistogram reuse{};

  bool operator==(const IndexDistribution&) const = default;

  [[nodiscard]] static IndexDistribution uniform() { return {}; }
  [[nodiscard]] static IndexDistribution zipf(double alpha);
  [[nodiscard]] static IndexDistribution hot_set(double rows_fraction, double access_fraction);
  [[nodiscard]] static IndexDistribution histogram(const ReuseHistogram& shares);
  [[nodiscard]] std::string describe() const;
};

/// Expected number of distinct rows touched by `accesses` independent draws over `rows`
/// rows. Exact for uniform and hot-set; for Zipf, rows are grouped in log-spaced rank
/// buckets with the bucket's mean probability (relative error well under 1%). For a
/// measured reuse histogram, accesses / mean reuse, capped at rows and accesses.
/// Contract: 0 <= result <= min(rows, accesses); non-decreasing in accesses.
[[nodiscard]] double expected_unique_rows(const IndexDistribution& d, double rows, double accesses);

/// Share of the accesses that go to the `k` most frequent of `rows` rows, [0, 1]: uniform
/// k / rows; Zipf the sum of r^-alpha over ranks 1..k over the sum over all ranks; hot set
/// the hot rows' share spread evenly over them, the cold rows' over the rest; a reuse
/// histogram (per batch, no row count) the accesses of its most reused unique rows, bins
/// taken from the heaviest down, `k` counted against `unique` (its unique rows per batch).
[[nodiscard]] double top_rows_access_share(const IndexDistribution& d, double rows, double k, double unique = 0);

/// The rows expected to be looked up at least `min_accesses` times in `accesses` lookups, the
/// most frequent first (the hybrid sharding's frequent rows): uniform all rows when
/// accesses / rows >= min_accesses, else none; Zipf ranks r with accesses x r^-alpha / H >=
/// min_accesses; hot set the hot rows when accesses x share / hot rows >= min_accesses (and
/// all rows when the cold ones are too); a reuse histogram the unique rows of its bins whose
/// count reaches min_accesses. In [0, rows].
[[nodiscard]] double frequent_rows_for(const IndexDistribution& d, double rows, double accesses, double min_accesses = 1);

/// The distribution of the accesses that fall on the `k` most frequent rows (`head` true)
/// or on the others, as seen by a table of those rows alone: Zipf's head is Zipf of the
/// same exponent over k rows; its tail, the hot set's cold rows and any uniform part are
/// taken as uniform (an upper bound on their unique rows); a hot set's head is its hot rows.
[[nodiscard]] IndexDistribution split_distribution(const IndexDistribution& d, double rows, double k, bool head);

/// Mean number of accesses per unique index implied by a reuse histogram (bin midpoints).
[[nodiscard]] double mean_reuse(const ReuseHistogram& shares);

/// Bin of the reuse histogram for an index seen `count` times in a batch (count >= 1):
/// 1 -> 0, (2^(i-1), 2^i] -> i for i = 1..15, > 2^15 -> 16.
[[nodiscard]] std::size_t reuse_bin(std::int64_t count);

/// Representative reuse count of a bin, the one mean_reuse() uses: 1 for bin 0, the mean
/// 0.75 x 2^i + 0.5 of the integers in (2^(i-1), 2^i], 1.5 x 2^15 for the open last bin.
[[nodiscard]] double reuse_bin_count(std::size_t bin);

/// Unique-index shares from access shares: a bin holding a share a_i of all accesses
/// holds a_i / reuse_bin_count(i) unique indices per access, renormalized to sum 1.
/// Used where the unique shares were rounded away (published 3-decimal histograms give
/// 0.000 for the heavy bins that hold 5% of the accesses each). All-zero input gives zeros.
[[nodiscard]] ReuseHistogram unique_shares_from_access_shares(const ReuseHistogram& access_shares);

/// The Zipf exponent whose expected_unique_rows(zipf(alpha), rows, accesses) equals
/// `unique` (bisection on alpha in [0.01, 8], relative tolerance 1e-4). Returns 0 when
/// `unique` is at or above the uniform expectation (no skew to fit) and 8 when it is at or
/// below the alpha = 8 expectation. Requires rows >= 1, accesses >= 1, unique >= 1.
[[nodiscard]] double fit_zipf_alpha(double rows, double accesses, double unique);

}  // namespace perfcast

#pragma once
/// \file batch_generator.hpp
/// Synthetic DLRM mini-batches drawn on the host, as a data loader would hand them to the
/// training loop: dense features, click labels and, per table, bags of row indices drawn
/// from the table's declared index distribution (uniform, Zipf, hot set). Deterministic:
/// a pure function of (seed, batch number). No CUDA.

#include <cstdint>
#include <vector>

#include "model/graph/workload_spec.hpp"
#include "predictors/index_distribution.hpp"
#include "validation/dlrm_reference.hpp"

namespace perfcast::validation {

/// Row sampler for one table: `draw(u)` maps a uniform u in [0, 1) to a row in [0, rows).
///  - uniform: floor(u * rows);
///  - zipf(alpha): rank r (0 = most popular) by inverse CDF of the continuous power law
///    p(x) ~ x^-alpha on [1, rows + 1) (the same sampler as profiler's benchmark kernels),
///    then row = r (the hot rows are the first rows of the table);
///  - hot_set(f, g): H = max(1, round(f * rows)) hot rows 0..H-1 receive a share g of the
///    accesses, uniformly; the other rows share the rest uniformly.
/// A measured reuse histogram does not define a sampler: constructing one throws
/// std::invalid_argument.
class RowSampler {
 public:
  RowSampler(const IndexDistribution& d, std::int64_t rows);
  [[nodiscard]] std::int64_t draw(double u) const;

 private:
  IndexDistribution d_;
  std::int64_t rows_ = 0;
  std::int64_t hot_ = 0;
};

/// The distribution indices are drawn from: `d` itself, except that a measured reuse
/// histogram (which defines no sampler) is replaced by the Zipf law with the same expected
/// number of distinct rows for `accesses` draws over `rows` rows (fit_zipf_alpha), or by
/// uniform when the histogram shows no more reuse than uniform draws. An approximation: the
/// number of distinct rows matches, the shape of the reuse histogram need not.
[[nodiscard]] IndexDistribution sampled_distribution(const IndexDistribution& d, std::int64_t rows, double accesses);

/// What a table contributes to a batch besides its shape.
struct TableTraffic {
  double pooling = 1;  ///< mean bag length
  IndexDistribution distribution;
};

/// The traffic of every table of `spec`, in order.
[[nodiscard]] std::vector<TableTraffic> table_traffic(const DlrmSpec& spec);

/// Batch `batch_number` of a run seeded with `seed` for `config`: dense features U[0, 1);
/// labels 0 or 1 with probability 1/2; bag (t, b) has floor(pooling_t) indices plus one with
/// probability frac(pooling_t) (mean pooling_t), drawn with the RowSampler of table t's
/// sampled_distribution (accesses = B * pooling_t). Throws std::invalid_argument when
/// traffic.size() != number of tables, std::length_error when the indices would exceed 2^31 - 1 (the kernels' limit).
[[nodiscard]] DlrmBatch generate_dlrm_batch(const DlrmConfig& config, const std::vector<TableTraffic>& traffic,
                                            std::uint64_t seed, std::uint64_t batch_number);

}  // namespace perfcast::validation

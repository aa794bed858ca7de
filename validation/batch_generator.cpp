#include "validation/batch_generator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "validation/counter_rng.hpp"

namespace perfcast::validation {
namespace {

/// Streams of the batch generator, disjoint from the weight streams of counter_rng.hpp.
constexpr std::uint64_t kDenseStream = 0x40000;
constexpr std::uint64_t kLabelStream = 0x40001;
constexpr std::uint64_t kLengthStream = 0x50000;  // + table
constexpr std::uint64_t kIndexStream = 0x60000;   // + table

/// Sequential draws from one (seed, stream) pair.
class Stream {
 public:
  Stream(std::uint64_t seed, std::uint64_t stream) : seed_(seed), stream_(stream) {}
  double next() { return bits_to_unit(counter_bits(seed_, stream_, i_++)); }

 private:
  std::uint64_t seed_, stream_, i_ = 0;
};

}  // namespace

IndexDistribution sampled_distribution(const IndexDistribution& d, std::int64_t rows, double accesses) {
  if (d.kind != IndexDistribution::Kind::kReuseHistogram) return d;
  const auto r = static_cast<double>(rows);
  const double n = std::max(accesses, 1.0);
  const double unique = std::max(expected_unique_rows(d, r, n), 1.0);
  const double alpha = fit_zipf_alpha(r, n, unique);
  return alpha > 0 ? IndexDistribution::zipf(alpha) : IndexDistribution::uniform();
}

RowSampler::RowSampler(const IndexDistribution& d, std::int64_t rows) : d_(d), rows_(rows) {
  if (rows < 1) throw std::invalid_argument("RowSampler: rows must be >= 1");
  if (d.kind == IndexDistribution::Kind::kReuseHistogram) {
    throw std::invalid_argument("a reuse_histogram distribution cannot be sampled (use uniform, zipf or hot_set)");
  }
  if (d.kind == IndexDistribution::Kind::kHotSet) {
    hot_ = std::clamp<std::int64_t>(std::llround(d.hot_rows_fraction * static_cast<double>(rows)), 1, rows);
  }
}

std::int64_t RowSampler::draw(double u) const {
  const auto rows = static_cast<double>(rows_);
  double r = 0;
  switch (d_.kind) {
    case IndexDistribution::Kind::kUniform: r = u * rows; break;
    case IndexDistribution::Kind::kZipf: {
      const double a = d_.alpha;
      double x;  // in [1, rows + 1)
      if (std::fabs(a - 1.0) < 1e-12) {
        x = std::pow(rows + 1.0, u);
      } else {
        const double e = 1.0 - a;
        x = std::pow(1.0 + u * (std::pow(rows + 1.0, e) - 1.0), 1.0 / e);
      }
      r = x - 1.0;
      break;
    }
    case IndexDistribution::Kind::kHotSet: {
      const auto hot = static_cast<double>(hot_);
      if (hot_ == rows_) {
        r = u * rows;
      } else if (u < d_.hot_access_fraction) {
        r = (u / d_.hot_access_fraction) * hot;
      } else {
        r = hot + (u - d_.hot_access_fraction) / (1.0 - d_.hot_access_fraction) * (rows - hot);
      }
      break;
    }
    case IndexDistribution::Kind::kReuseHistogram: break;  // rejected by the constructor
  }
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor(r)), 0, rows_ - 1);
}

std::vector<TableTraffic> table_traffic(const DlrmSpec& spec) {
  std::vector<TableTraffic> t;
  for (const auto& tb : spec.tables) t.push_back(TableTraffic{tb.pooling, tb.distribution});
  return t;
}

DlrmBatch generate_dlrm_batch(const DlrmConfig& config, const std::vector<TableTraffic>& traffic, std::uint64_t seed,
                              std::uint64_t batch_number) {
  if (traffic.size() != config.tables.size()) {
    throw std::invalid_argument(fmt::format("generate_dlrm_batch: {} traffic entries for {} tables", traffic.size(),
                                            config.tables.size()));
  }
  const std::uint64_t s = counter_bits(seed, 0x70000, batch_number);  // this batch's seed
  const std::int64_t B = config.batch_size;
  DlrmBatch batch;
  Stream dense(s, kDenseStream);
  batch.dense.resize(static_cast<std::size_t>(B * config.dense_features()));
  for (float& v : batch.dense) v = static_cast<float>(dense.next());
  Stream label(s, kLabelStream);
  batch.labels.resize(static_cast<std::size_t>(B));
  for (float& v : batch.labels) v = label.next() < 0.5 ? 0.0f : 1.0f;

  batch.offsets.reserve(static_cast<std::size_t>(static_cast<std::int64_t>(config.tables.size()) * B + 1));
  batch.offsets.push_back(0);
  for (std::size_t t = 0; t < config.tables.size(); ++t) {
    const auto& tr = traffic[t];
    if (!(tr.pooling >= 0)) throw std::invalid_argument(fmt::format("generate_dlrm_batch: table {} pooling < 0", t));
    const RowSampler sampler(sampled_distribution(tr.distribution, config.tables[t].rows,
                                                  static_cast<double>(B) * tr.pooling),
                             config.tables[t].rows);
    const double whole = std::floor(tr.pooling), frac = tr.pooling - whole;
    Stream len(s, kLengthStream + t), idx(s, kIndexStream + t);
    for (std::int64_t b = 0; b < B; ++b) {
      const auto n = static_cast<std::int64_t>(whole) + (frac > 0 && len.next() < frac ? 1 : 0);
      if (static_cast<std::int64_t>(batch.indices.size()) + n > std::numeric_limits<std::int32_t>::max()) {
        throw std::length_error("generate_dlrm_batch: more than 2^31-1 indices in one batch");
      }
      for (std::int64_t k = 0; k < n; ++k) batch.indices.push_back(sampler.draw(idx.next()));
      batch.offsets.push_back(static_cast<std::int64_t>(batch.indices.size()));
    }
  }
  return batch;
}

}  // namespace perfcast::validation

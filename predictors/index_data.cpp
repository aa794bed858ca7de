#include "predictors/index_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "core/input_file.hpp"
#include "core/json_reader.hpp"
#include "core/limits.hpp"

namespace perfcast {
namespace {

std::string entry(std::int64_t i) { return fmt::format("entry {}", i); }

/// Bag b of all batches as [begin, end) positions in the indices array.
struct BagSpans {
  int batches = 0;
  std::vector<std::int64_t> begin, end;
};

BagSpans spans_from_offsets(const IndexData& d, std::int64_t tb) {
  const auto n = static_cast<std::int64_t>(d.bags.size());
  const auto size = static_cast<std::int64_t>(d.indices.size());
  BagSpans s;
  const auto check_monotone = [&](std::int64_t j) {
    if (d.bags[static_cast<std::size_t>(j)] > d.bags[static_cast<std::size_t>(j + 1)])
      throw ConfigError(d.bags_file, entry(j + 1),
                        fmt::format("offsets must not decrease: {} follows {}", d.bags[static_cast<std::size_t>(j + 1)],
                                    d.bags[static_cast<std::size_t>(j)]));
  };
  const auto check_in_range = [&](std::int64_t j, std::int64_t value) {
    if (value < 0 || value > size)
      throw ConfigError(d.bags_file, entry(j),
                        fmt::format("offset {} lies outside the {} indices of {}", value, size, d.indices_file));
  };
  // Raw offsets outside [0, size] are refused before any arithmetic on them (a
  // batch-relative offset is added to the previous batch's end, itself <= size).
  for (std::int64_t j = 0; j < n; ++j) check_in_range(j, d.bags[static_cast<std::size_t>(j)]);
  if (n % (tb + 1) == 0) {
    // CSR: T*B+1 entries per batch, absolute or restarting at 0 in every batch.
    s.batches = static_cast<int>(n / (tb + 1));
    bool relative = s.batches > 1;
    for (int k = 0; k < s.batches && relative; ++k) relative = d.bags[static_cast<std::size_t>(k * (tb + 1))] == 0;
    std::int64_t base = 0, end_of_last = 0;
    for (int k = 0; k < s.batches; ++k) {
      const std::int64_t first = k * (tb + 1);
      for (std::int64_t i = 0; i < tb; ++i) {
        check_monotone(first + i);
        const std::int64_t b = d.bags[static_cast<std::size_t>(first + i)] + base;
        const std::int64_t e = d.bags[static_cast<std::size_t>(first + i + 1)] + base;
        check_in_range(first + i, b);
        check_in_range(first + i + 1, e);
        s.begin.push_back(b);
        s.end.push_back(e);
      }
      end_of_last = d.bags[static_cast<std::size_t>(first + tb)] + base;
      if (relative) base = end_of_last;
    }
    if (end_of_last != size)
      throw ConfigError(d.bags_file, entry(n - 1),
                        fmt::format("the offsets end at {} but {} holds {} indices", end_of_last, d.indices_file, size));
    return s;
  }
  if (n % tb == 0 && n > 0) {
    // Bag starts only: a bag ends where the next one starts, the last at the array's end.
    s.batches = static_cast<int>(n / tb);
    for (std::int64_t j = 0; j < n; ++j) {
      const std::int64_t b = d.bags[static_cast<std::size_t>(j)];
      check_in_range(j, b);
      if (j + 1 < n) check_monotone(j);
      const std::int64_t e = j + 1 < n ? d.bags[static_cast<std::size_t>(j + 1)] : size;
      s.begin.push_back(b);
      s.end.push_back(e);
    }
    return s;
  }
  throw ConfigError(d.bags_file, "",
                    fmt::format("{} offsets do not fit {} tables x batch {}: expected a multiple of T*B+1 = {} (CSR "
                                "offsets) or of T*B = {} (bag starts)",
                                n, d.tables, d.batch, tb + 1, tb));
}

BagSpans spans_from_lengths(const IndexData& d, std::int64_t tb) {
  const auto n = static_cast<std::int64_t>(d.bags.size());
  if (n == 0 || n % tb != 0)
    throw ConfigError(d.bags_file, "",
                      fmt::format("{} lengths do not fit {} tables x batch {}: expected a multiple of T*B = {}", n,
                                  d.tables, d.batch, tb));
  BagSpans s;
  s.batches = static_cast<int>(n / tb);
  std::int64_t pos = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    const std::int64_t len = d.bags[static_cast<std::size_t>(j)];
    if (len < 0) throw ConfigError(d.bags_file, entry(j), fmt::format("negative bag length {}", len));
    s.begin.push_back(pos);
    if (__builtin_add_overflow(pos, len, &pos))
      throw ConfigError(d.bags_file, entry(j),
                        fmt::format("the lengths up to here add up to more than 2^63 (the file holds {} indices)",
                                    d.indices.size()));
    s.end.push_back(pos);
  }
  if (pos != static_cast<std::int64_t>(d.indices.size()))
    throw ConfigError(d.bags_file, "",
                      fmt::format("the lengths add up to {} but {} holds {} indices", pos, d.indices_file,
                                  d.indices.size()));
  return s;
}

std::int64_t rows_of(const IndexStatsOptions& opt, int table) {
  if (opt.rows.empty()) return 0;
  return opt.rows.size() == 1 ? opt.rows[0] : opt.rows[static_cast<std::size_t>(table)];
}

}  // namespace

std::vector<std::int64_t> read_index_array(const std::filesystem::path& path, IndexDType dtype) {
  const std::string bytes = read_input_file(path);
  const std::size_t width = dtype == IndexDType::kInt32 ? 4 : 8;
  if (bytes.size() % width != 0)
    throw ConfigError(path.string(), "",
                      fmt::format("{} bytes is not a whole number of {}-byte ({}) values", bytes.size(), width,
                                  width == 4 ? "int32" : "int64"));
  std::vector<std::int64_t> out(bytes.size() / width);
  for (std::size_t i = 0; i < out.size(); ++i) {
    // Little-endian by construction: assemble the value byte by byte.
    std::uint64_t u = 0;
    for (std::size_t b = 0; b < width; ++b) u |= std::uint64_t(static_cast<unsigned char>(bytes[i * width + b])) << (8 * b);
    if (width == 4) {
      std::int32_t v = 0;
      const auto u32 = static_cast<std::uint32_t>(u);
      std::memcpy(&v, &u32, 4);
      out[i] = v;
    } else {
      std::int64_t v = 0;
      std::memcpy(&v, &u, 8);
      out[i] = v;
    }
  }
  return out;
}

std::vector<TableBatchStats> compute_index_stats(const IndexData& d, const IndexStatsOptions& opt) {
  if (d.tables < 1 || d.batch < 1)
    throw ConfigError(d.bags_file, "", fmt::format("tables ({}) and batch ({}) must be at least 1", d.tables, d.batch));
  if (!opt.rows.empty() && opt.rows.size() != 1 && opt.rows.size() != static_cast<std::size_t>(d.tables))
    throw ConfigError("--rows", "", fmt::format("{} values given; expected 1 or one per table ({})", opt.rows.size(), d.tables));
  for (auto r : opt.rows)
    if (r < 1 || r > limits::kMaxRows)
      throw ConfigError("--rows", "", fmt::format("rows must be in [1, {}] (core/limits.hpp), got {}", limits::kMaxRows, r));
  if (d.tables > limits::kMaxTables)
    throw ConfigError(d.bags_file, "", fmt::format("{} tables; at most {} (core/limits.hpp)", d.tables, limits::kMaxTables));
  std::int64_t tb = 0;
  if (__builtin_mul_overflow(static_cast<std::int64_t>(d.tables), d.batch, &tb) || tb > limits::kMaxRows)
    throw ConfigError(d.bags_file, "",
                      fmt::format("{} tables x batch {} is more than {} bags (core/limits.hpp)", d.tables, d.batch,
                                  limits::kMaxRows));
  const BagSpans s = d.encoding == BagEncoding::kOffsets ? spans_from_offsets(d, tb) : spans_from_lengths(d, tb);

  std::vector<TableBatchStats> out;
  std::vector<std::int64_t> rows_seen;
  for (int k = 0; k < s.batches; ++k) {
    for (int t = 0; t < d.tables; ++t) {
      TableBatchStats st;
      st.table = t;
      st.batch_index = k;
      st.bags = d.batch;
      const std::int64_t rows = rows_of(opt, t);
      rows_seen.clear();
      double sum_sq = 0;
      for (std::int64_t b = 0; b < d.batch; ++b) {
        const auto j = static_cast<std::size_t>(k * tb + t * d.batch + b);
        const std::int64_t len = s.end[j] - s.begin[j];
        sum_sq += static_cast<double>(len) * static_cast<double>(len);
        for (std::int64_t p = s.begin[j]; p < s.end[j]; ++p) {
          const std::int64_t idx = d.indices[static_cast<std::size_t>(p)];
          // Without --rows the table is as large as its largest index + 1: an index is still
          // bounded by the rows perfcast reads (2^48), or that + 1 would overflow.
          const std::int64_t bound = rows > 0 ? rows : limits::kMaxRows;
          if (idx < 0 || idx >= bound)
            throw ConfigError(d.indices_file, entry(p),
                              rows > 0 ? fmt::format("index {} of table {} (batch {}) is outside [0, {}) rows", idx, t, k, rows)
                              : idx < 0 ? fmt::format("negative index {} in table {} (batch {})", idx, t, k)
                                        : fmt::format("index {} in table {} (batch {}) is beyond the {} rows perfcast reads "
                                                      "(core/limits.hpp)", idx, t, k, limits::kMaxRows));
          rows_seen.push_back(idx);
        }
      }
      st.accesses = static_cast<std::int64_t>(rows_seen.size());
      st.pooling_mean = static_cast<double>(st.accesses) / static_cast<double>(d.batch);
      st.pooling_stddev = std::sqrt(std::max(0.0, sum_sq / static_cast<double>(d.batch) - st.pooling_mean * st.pooling_mean));
      std::sort(rows_seen.begin(), rows_seen.end());
      for (std::size_t i = 0; i < rows_seen.size();) {
        std::size_t j = i;
        while (j < rows_seen.size() && rows_seen[j] == rows_seen[i]) ++j;
        const auto count = static_cast<std::int64_t>(j - i);
        const std::size_t bin = reuse_bin(count);
        st.unique_shares[bin] += 1;
        st.access_shares[bin] += static_cast<double>(count);
        ++st.unique_rows;
        i = j;
      }
      if (!rows_seen.empty()) st.max_index = rows_seen.back();
      for (std::size_t i = 0; i < kReuseBins; ++i) {
        if (st.unique_rows > 0) st.unique_shares[i] /= static_cast<double>(st.unique_rows);
        if (st.accesses > 0) st.access_shares[i] /= static_cast<double>(st.accesses);
      }
      out.push_back(st);
    }
  }
  return out;
}

void complete_summary(TableIndexSummary& s, const IndexStatsOptions& opt) {
  s.working_set_bytes = s.dim > 0 ? s.unique_rows * static_cast<double>(s.dim) * opt.row_element_bytes : 0.0;
  s.working_set_over_l2 = opt.l2_cache > 0 ? s.working_set_bytes / opt.l2_cache : 0.0;
  s.zipf_alpha.reset();
  if (s.rows_declared && s.rows >= 1 && s.accesses >= 1 && s.unique_rows >= 1) s.zipf_alpha = fit_zipf_alpha(static_cast<double>(s.rows), s.accesses, s.unique_rows);
}

std::vector<TableIndexSummary> summarize_index_stats(const std::vector<TableBatchStats>& per_batch,
                                                     const IndexStatsOptions& opt) {
  std::vector<TableIndexSummary> out;
  for (const auto& b : per_batch) {
    if (static_cast<std::size_t>(b.table) >= out.size()) out.resize(static_cast<std::size_t>(b.table) + 1);
    auto& s = out[static_cast<std::size_t>(b.table)];
    s.table = b.table;
    s.name = fmt::format("table {}", b.table);
    s.batch = b.bags;
    s.batches += 1;
    s.accesses += static_cast<double>(b.accesses);
    s.unique_rows += static_cast<double>(b.unique_rows);
    s.pooling_mean += b.pooling_mean;
    s.pooling_stddev += b.pooling_stddev;
    for (std::size_t i = 0; i < kReuseBins; ++i) {
      s.unique_shares[i] += b.unique_shares[i];
      s.access_shares[i] += b.access_shares[i];
    }
    s.rows = std::max(s.rows, b.max_index + 1);
  }
  for (auto& s : out) {
    const double n = std::max(1, s.batches);
    s.accesses /= n;
    s.unique_rows /= n;
    s.pooling_mean /= n;
    s.pooling_stddev /= n;
    for (std::size_t i = 0; i < kReuseBins; ++i) {
      s.unique_shares[i] /= n;
      s.access_shares[i] /= n;
    }
    const std::int64_t declared = rows_of(opt, s.table);
    if (declared > 0) {
      s.rows = declared;
      s.rows_declared = true;
    }
    s.dim = opt.dim;
    complete_summary(s, opt);
  }
  return out;
}

IndexDistribution summary_distribution(const TableIndexSummary& s, bool histogram) {
  const bool has_histogram = std::any_of(s.unique_shares.begin(), s.unique_shares.end(), [](double v) { return v > 0; });
  if (has_histogram && (histogram || !s.zipf_alpha)) return IndexDistribution::histogram(s.unique_shares);
  if (s.zipf_alpha) return *s.zipf_alpha > 0 ? IndexDistribution::zipf(*s.zipf_alpha) : IndexDistribution::uniform();
  throw ConfigError(s.name, "", "has neither a reuse histogram nor declared rows to fit a Zipf exponent to");
}

}  // namespace perfcast

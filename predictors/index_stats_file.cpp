#include "predictors/index_stats_file.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "core/csv_record.hpp"
#include "core/input_file.hpp"
#include "core/limits.hpp"

namespace perfcast {
namespace {

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

/// Parses a whole string as a finite number, or nothing.
std::optional<double> number(const std::string& text) {
  const std::string t = trim_blanks(text);
  if (t.empty()) return std::nullopt;
  double v = 0;
  const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || ptr != t.data() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

/// The file's lines, read with the bounds of core/input_file.hpp; the text must be UTF-8
/// (dataset names reach JSON outputs) and no line longer than limits::kMaxTextLineBytes.
std::vector<std::string> read_lines(const std::filesystem::path& path) {
  const std::string text = read_input_file(path);
  require_utf8(text, path.string());
  std::vector<std::string> lines;
  std::size_t b = 0;
  while (b < text.size()) {
    std::size_t e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    if (e - b > limits::kMaxTextLineBytes)
      throw ConfigError(path.string(), fmt::format("line {}", lines.size() + 1),
                        fmt::format("longer than {} bytes", limits::kMaxTextLineBytes));
    lines.emplace_back(text, b, e - b);
    b = e + 1;
  }
  return lines;
}

/// A decimal integer of 1 to 18 digits (no sign), or nothing.
std::optional<std::int64_t> small_integer(std::string_view digits) {
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  std::int64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

void check_histogram(const ReuseHistogram& h, const std::string& file, const std::string& where) {
  double sum = 0;
  for (double v : h) sum += v;
  // Published shares carry 3 decimals: 17 roundings give at most 17 x 0.0005 off.
  if (std::fabs(sum - 1) > 0.01)
    throw ConfigError(file, where, fmt::format("the 17 reuse-bin shares add up to {:.4f}, expected 1", sum));
}

std::vector<TableIndexSummary> read_stats_json(const std::filesystem::path& path, const IndexStatsOptions& opt) {
  const JsonDocument doc = load_json_file(path);
  const JsonObject root(doc);
  root.require_schema("perfcast.index_stats", 1);
  (void)root.find("gpu_l2");
  (void)root.find("context");  // provenance written by perfcast index-stats --json; not read back
  std::vector<TableIndexSummary> out;
  const JsonArray tables = root.array("tables");
  tables.require_size(1, 1u << 20);
  const auto shares = [](const JsonObject& o, std::string_view key, ReuseHistogram& h) {
    if (auto v = o.find(key)) {
      const JsonArray a = v->as_array();
      a.require_size(kReuseBins, kReuseBins);
      for (std::size_t i = 0; i < kReuseBins; ++i) h[i] = a[i].as_number_in(0, 1);
      return true;
    }
    return false;
  };
  for (std::size_t i = 0; i < tables.size(); ++i) {
    const JsonObject o = tables[i].as_object();
    TableIndexSummary s;
    s.table = static_cast<int>(i);
    s.name = o.string_or("name", fmt::format("table {}", i));
    // Rows are optional (locality stats have none); index-stats --json without --rows
    // writes the largest index + 1 and "rows_declared": false.
    if (auto r = o.find("rows")) s.rows = r->as_integer(1, std::int64_t(1) << 50);
    s.rows_declared = o.bool_or("rows_declared", s.rows > 0) && s.rows > 0;
    s.batch = o.integer("batch", 1, std::int64_t(1) << 40);
    s.batches = static_cast<int>(o.integer_or("batches", 1, 1 << 30, 1));
    s.accesses = o.at("accesses").as_number_in(0, 1e18);
    s.unique_rows = o.at("unique_rows").as_number_in(0, 1e18);
    if (s.unique_rows > s.accesses || (s.rows > 0 && s.unique_rows > static_cast<double>(s.rows)))
      o.fail("unique_rows", fmt::format("{} unique rows exceed the accesses ({}) or rows ({})", s.unique_rows, s.accesses, s.rows));
    s.dim = o.integer_or("dim", 0, 1 << 20, opt.dim);
    s.pooling_mean = o.number_or("pooling_mean", 0, 1e12, s.accesses / static_cast<double>(s.batch));
    s.pooling_stddev_known = o.has("pooling_stddev");
    s.pooling_stddev = o.number_or("pooling_stddev", 0, 1e12, 0);
    const bool has_unique = shares(o, "unique_shares", s.unique_shares);
    const bool has_access = shares(o, "access_shares", s.access_shares);
    if (has_unique) check_histogram(s.unique_shares, doc.file, o.child_pointer("unique_shares"));
    if (has_access) check_histogram(s.access_shares, doc.file, o.child_pointer("access_shares"));
    if (!has_unique && has_access) s.unique_shares = unique_shares_from_access_shares(s.access_shares);
    // Derived values that --json writes; recomputed here.
    for (const char* k : {"mean_reuse", "working_set_bytes", "working_set_over_l2", "zipf_alpha"}) (void)o.find(k);
    o.finish();
    complete_summary(s, opt);
    out.push_back(s);
  }
  (void)root.find("per_batch");
  root.finish();
  return out;
}

std::vector<TableIndexSummary> read_stats_csv(const std::filesystem::path& path, const IndexStatsOptions& opt) {
  const auto lines = read_lines(path);
  const std::string file = path.string();
  if (lines.empty()) throw ConfigError(file, "line 1", "empty file; expected a header line");
  std::map<std::string, std::size_t> col;
  {
    std::stringstream ss(lines[0]);
    std::vector<std::string> header;
    for (std::string c; std::getline(ss, c, ',');) header.push_back(c);
    col = csv_header_columns(header, file);
  }
  const std::vector<std::string> required = {"table", "rows", "batch", "accesses", "unique_rows"};
  for (const auto& r : required)
    if (!col.count(r))
      throw ConfigError(file, "line 1", fmt::format("the header lacks column \"{}\" (needs table,rows,batch,accesses,unique_rows)", r));
  for (const auto& [name, _] : col)
    if (name != "dim" && name != "pooling_mean" && name != "pooling_stddev" &&
        std::find(required.begin(), required.end(), name) == required.end())
      throw ConfigError(file, "line 1", fmt::format("unknown column \"{}\"", name));
  std::vector<TableIndexSummary> out;
  for (std::size_t ln = 1; ln < lines.size(); ++ln) {
    if (trim_blanks(lines[ln]).empty()) continue;
    const std::string where = fmt::format("line {}", ln + 1);
    std::vector<std::string> cells;
    std::stringstream ss(lines[ln]);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(trim_blanks(c));
    if (cells.size() != col.size())
      throw ConfigError(file, where, fmt::format("{} cells, expected {} as in the header", cells.size(), col.size()));
    const auto num = [&](const std::string& name, double lo, double hi) {
      const auto v = number(cells[col.at(name)]);
      if (!v || *v < lo || *v > hi)
        throw ConfigError(file, where, fmt::format("column {}: expected a number in [{:g}, {:g}], got \"{}\"", name, lo, hi, cells[col.at(name)]));
      return *v;
    };
    TableIndexSummary s;
    s.table = static_cast<int>(out.size());
    s.name = cells[col.at("table")];
    s.rows = static_cast<std::int64_t>(num("rows", 1, 1e15));
    s.rows_declared = true;
    s.batch = static_cast<std::int64_t>(num("batch", 1, 1e12));
    s.batches = 1;
    s.accesses = num("accesses", 0, 1e18);
    s.unique_rows = num("unique_rows", 0, std::min(s.accesses, static_cast<double>(s.rows)));
    s.dim = col.count("dim") ? static_cast<std::int64_t>(num("dim", 0, 1 << 20)) : opt.dim;
    s.pooling_mean = col.count("pooling_mean") ? num("pooling_mean", 0, 1e12) : s.accesses / static_cast<double>(s.batch);
    s.pooling_stddev_known = col.count("pooling_stddev") > 0;
    s.pooling_stddev = s.pooling_stddev_known ? num("pooling_stddev", 0, 1e12) : 0.0;
    complete_summary(s, opt);
    out.push_back(s);
  }
  if (out.empty()) throw ConfigError(file, "", "no table rows after the header");
  return out;
}

bool has_shares(const ReuseHistogram& h) {
  return std::any_of(h.begin(), h.end(), [](double v) { return v > 0; });
}

nlohmann::json shares_json(const ReuseHistogram& h) {
  nlohmann::json a = nlohmann::json::array();
  for (double v : h) a.push_back(std::round(v * 1e6) / 1e6);
  return a;
}

}  // namespace

int tables_from_dataset_name(const std::string& name) {
  // The first "_t<digits>_" ("fbgemm_t856_bs65536_15.pt"); counts beyond limits::kMaxTables are not a table count.
  for (std::size_t p = name.find("_t"); p != std::string::npos; p = name.find("_t", p + 1)) {
    std::size_t e = p + 2;
    while (e < name.size() && name[e] >= '0' && name[e] <= '9') ++e;
    if (e == p + 2 || e >= name.size() || name[e] != '_') continue;
    const auto v = small_integer(std::string_view(name).substr(p + 2, e - p - 2));
    return v && *v <= limits::kMaxTables ? static_cast<int>(*v) : 0;
  }
  return 0;
}

std::vector<LocalityStatsBlock> read_locality_stats(const std::filesystem::path& path) {
  const auto lines = read_lines(path);
  const std::string file = path.string();
  std::vector<LocalityStatsBlock> out;
  const auto at = [&](std::size_t i) { return fmt::format("line {}", i + 1); };
  const auto value_after_colon = [&](std::size_t i) {
    const auto pos = lines[i].rfind(':');
    const auto v = pos == std::string::npos ? std::nullopt : number(lines[i].substr(pos + 1));
    if (!v || *v < 0) throw ConfigError(file, at(i), fmt::format("expected \"...: NUMBER\", got \"{}\"", trim_blanks(lines[i])));
    return *v;
  };
  const auto finish_block = [&](std::size_t end) {
    if (out.empty()) return;
    const auto& b = out.back();
    const std::string where = fmt::format("line {}", b.line);
    if (b.batches < 1 || b.batch_size < 1 || b.indices <= 0 || b.unique <= 0)
      throw ConfigError(file, where, fmt::format("block \"{}\" (to line {}) lacks the batch, index or unique counts", b.dataset, end));
    check_histogram(b.unique_shares, file, where + " (Histogram of col sizes)");
    check_histogram(b.access_shares, file, where + " (Ratio of index distribution)");
  };
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string l = trim_blanks(lines[i]);
    if (l.empty() || l[0] == '[') continue;  // bin edges and cumulative shares: derived
    if (l.size() > 3 && l.compare(l.size() - 3, 3, ".pt") == 0) {
      finish_block(i);
      out.emplace_back();
      out.back().dataset = l;
      out.back().line = static_cast<int>(i + 1);
      continue;
    }
    if (out.empty()) throw ConfigError(file, at(i), fmt::format("expected a dataset name ending in .pt, got \"{}\"", l));
    auto& b = out.back();
    if (starts_with(l, "Locality stats after processing")) {
      // "Locality stats after processing N batches of size B", N and B within the limits.
      static constexpr std::string_view kHead = "Locality stats after processing ";
      // (the trimmed line may end right after "processing": rest is then empty)
      const std::string_view rest = std::string_view(l).substr(std::min(l.size(), kHead.size()));
      const auto mid = rest.find(" batches of size ");
      const auto n = mid == std::string_view::npos ? std::nullopt : small_integer(rest.substr(0, mid));
      const auto bs = mid == std::string_view::npos ? std::nullopt : small_integer(rest.substr(mid + 17));
      if (!n || !bs || *n > limits::kMaxTables * 1000 || *bs > limits::kMaxRows)
        throw ConfigError(file, at(i),
                          fmt::format("expected \"Locality stats after processing N batches of size B\" with N <= {} and "
                                      "B <= {}, got \"{}\"", limits::kMaxTables * 1000, limits::kMaxRows, l));
      b.batches = static_cast<int>(*n);
      b.batch_size = *bs;
    } else if (starts_with(l, "Avg # of indices:")) {
      b.indices = value_after_colon(i);
    } else if (starts_with(l, "Avg # of unique cols:")) {
      b.unique = value_after_colon(i);
    } else if (starts_with(l, "Avg col size:")) {
      b.avg_col_size = value_after_colon(i);
    } else if (starts_with(l, "Histogram of col sizes:") || starts_with(l, "Ratio of index distribution")) {
      ReuseHistogram& h = starts_with(l, "Histogram") ? b.unique_shares : b.access_shares;
      if (i + kReuseBins >= lines.size()) throw ConfigError(file, at(i), "expected 17 histogram lines after it");
      for (std::size_t k = 0; k < kReuseBins; ++k) {
        const std::size_t j = i + 1 + k;
        if (trim_blanks(lines[j]).empty() || trim_blanks(lines[j])[0] != '(')
          throw ConfigError(file, at(j), fmt::format("expected histogram bin {} of 17 such as \"(1, 2]: 0.152\"", k + 1));
        h[k] = value_after_colon(j);
      }
      i += kReuseBins;
    } else {
      throw ConfigError(file, at(i), fmt::format("unexpected line \"{}\"", l));
    }
  }
  finish_block(lines.size());
  if (out.empty()) throw ConfigError(file, "", "no locality-stats block (a line naming a .pt file) found");
  return out;
}

TableIndexSummary locality_summary(const LocalityStatsBlock& b, int tables) {
  TableIndexSummary s;
  s.name = b.dataset;
  s.batches = b.batches;
  s.batch = b.batch_size;
  s.accesses = b.indices;
  s.unique_rows = b.unique;
  s.access_shares = b.access_shares;
  s.unique_shares = unique_shares_from_access_shares(b.access_shares);
  if (tables > 0) s.pooling_mean = b.indices / (static_cast<double>(b.batch_size) * tables);
  s.pooling_stddev_known = false;
  return s;
}

std::vector<TableIndexSummary> read_index_stats_file(const std::filesystem::path& path, const IndexStatsOptions& opt) {
  const std::string ext = path.extension().string();
  if (ext == ".json") return read_stats_json(path, opt);
  if (ext == ".csv") return read_stats_csv(path, opt);
  throw ConfigError(path.string(), "", "expected a .json or .csv stats file");
}

nlohmann::json index_distribution_to_json(const IndexDistribution& d) {
  switch (d.kind) {
    case IndexDistribution::Kind::kUniform: return {{"kind", "uniform"}};
    case IndexDistribution::Kind::kZipf: return {{"kind", "zipf"}, {"alpha", std::round(d.alpha * 1e4) / 1e4}};
    case IndexDistribution::Kind::kHotSet:
      return {{"kind", "hot_set"}, {"hot_rows", d.hot_rows_fraction}, {"hot_accesses", d.hot_access_fraction}};
    case IndexDistribution::Kind::kReuseHistogram: return {{"kind", "reuse_histogram"}, {"shares", shares_json(d.reuse)}};
  }
  return {{"kind", "uniform"}};
}

nlohmann::json index_stats_to_json(const std::vector<TableIndexSummary>& tables, const std::vector<TableBatchStats>& per_batch,
                                   Bytes l2_cache) {
  nlohmann::json t = nlohmann::json::array();
  for (const auto& s : tables) {
    nlohmann::json j = {{"name", s.name},
                        {"batch", s.batch},
                        {"batches", s.batches},
                        {"accesses", s.accesses},
                        {"unique_rows", s.unique_rows},
                        {"mean_reuse", s.mean_reuse_measured()},
                        {"pooling_mean", s.pooling_mean}};
    if (s.pooling_stddev_known) j["pooling_stddev"] = s.pooling_stddev;
    if (s.rows > 0) {
      j["rows"] = s.rows;
      j["rows_declared"] = s.rows_declared;
    }
    if (has_shares(s.unique_shares)) j["unique_shares"] = shares_json(s.unique_shares);
    if (has_shares(s.access_shares)) j["access_shares"] = shares_json(s.access_shares);
    if (s.dim > 0) {
      j["dim"] = s.dim;
      j["working_set_bytes"] = s.working_set_bytes;
      if (l2_cache > 0) j["working_set_over_l2"] = s.working_set_over_l2;
    }
    if (s.zipf_alpha) j["zipf_alpha"] = std::round(*s.zipf_alpha * 1e4) / 1e4;
    t.push_back(j);
  }
  nlohmann::json root = {{"schema", "perfcast.index_stats"}, {"schema_version", "1.0"}, {"tables", t}};
  if (l2_cache > 0) root["gpu_l2"] = fmt::format("{:g}MB", l2_cache / 1e6);
  if (!per_batch.empty()) {
    nlohmann::json pb = nlohmann::json::array();
    for (const auto& b : per_batch)
      pb.push_back({{"table", b.table}, {"batch", b.batch_index}, {"accesses", b.accesses}, {"unique_rows", b.unique_rows},
                    {"pooling_mean", b.pooling_mean}, {"pooling_stddev", b.pooling_stddev}});
    root["per_batch"] = pb;
  }
  return root;
}

nlohmann::json distributions_to_json(const std::vector<TableIndexSummary>& tables, bool histogram) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : tables)
    out.push_back({{"table", s.name}, {"distribution", index_distribution_to_json(summary_distribution(s, histogram))}});
  return out;
}

std::string render_index_stats_text(const std::vector<TableIndexSummary>& tables, Bytes l2_cache) {
  std::string out = fmt::format("{:<28} {:>12} {:>8} {:>14} {:>14} {:>8} {:>15} {:>12} {:>8}  {}\n", "table", "rows", "batch",
                                "accesses/batch", "unique/batch", "reuse", "pooling (sd)", "working set", "vs L2", "fit");
  for (const auto& s : tables) {
    const std::string rows = s.rows > 0 ? fmt::format("{}{}", s.rows, s.rows_declared ? "" : "*") : "-";
    const std::string ws = s.working_set_bytes > 0 ? fmt::format("{:.3g}MB", s.working_set_bytes / 1e6) : "-";
    const std::string l2 = s.working_set_bytes > 0 && l2_cache > 0 ? fmt::format("{:.2f}x", s.working_set_over_l2) : "-";
    const std::string fit = s.zipf_alpha ? (*s.zipf_alpha > 0 ? fmt::format("zipf(alpha={:.3f})", *s.zipf_alpha) : "uniform")
                            : has_shares(s.unique_shares) ? IndexDistribution::histogram(s.unique_shares).describe()
                                                          : "-";
    const std::string pooling = s.pooling_stddev_known ? fmt::format("{:.2f} ({:.2f})", s.pooling_mean, s.pooling_stddev)
                                                       : fmt::format("{:.2f} (-)", s.pooling_mean);
    out += fmt::format("{:<28} {:>12} {:>8} {:>14.0f} {:>14.0f} {:>8.2f} {:>15} {:>12} {:>8}  {}\n", s.name, rows, s.batch,
                       s.accesses, s.unique_rows, s.mean_reuse_measured(), pooling, ws, l2, fit);
  }
  if (std::any_of(tables.begin(), tables.end(), [](const auto& s) { return s.rows > 0 && !s.rows_declared; }))
    out += "* rows not given (--rows): the largest index + 1 is shown and no Zipf exponent is fitted\n";
  return out;
}

}  // namespace perfcast

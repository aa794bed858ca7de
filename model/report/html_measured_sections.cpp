// The HTML report's sections for measured and fitted results (html_sections.hpp): kernels,
// trace-stats, index-stats, the calibrations and profile runs.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/units.hpp"
#include "model/report/html_sections.hpp"
#include "model/report/svg_plot.hpp"

namespace perfcast::html {
namespace {

using nlohmann::json;

/// Scatter plots draw at most this many points (every k-th row beyond it): a 6,000-row
/// measurement file stays a page a browser opens at once.
constexpr std::size_t kMaxScatterPoints = 2000;
/// Bar charts of tables draw at most this many (index-stats of a production model may
/// have hundreds).
constexpr std::size_t kMaxTables = 48;

/// A result's array at `key` (an empty array when absent or not an array).
const json& array_at(const json& j, const char* key) {
  static const json empty = json::array();
  const auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : empty;
}

/// Bars of a geomean |error| (a fraction) per label, in percent.
std::string error_bars(const std::string& title, const std::vector<StackedBar>& bars) {
  return bars.empty() ? std::string() : svg_stacked_bars(title, {"geomean |error|"}, bars, "%", 100);
}

/// geomean |error| per family and per source of a kernels --json summary.
std::string kernel_summary_charts(const json& summary) {
  std::vector<StackedBar> families, sources;
  for (const auto& f : array_at(summary, "by_family"))
    families.emplace_back(fmt::format("{} ({:.0f} rows)", str(f, "family"), num(f, "rows")), std::vector<double>{num(f, "geomean_abs_error")},
                          fmt::format("bias {:+.1f}%", 100 * num(f, "bias")));
  for (const auto& s : array_at(summary, "by_source"))
    sources.emplace_back(fmt::format("{} {} ({:.0f})", str(s, "source"), str(s, "family"), num(s, "rows")),
                         std::vector<double>{num(s, "geomean_abs_error")}, fmt::format("bias {:+.1f}%", 100 * num(s, "bias")));
  return error_bars("geomean |error| per family", families) + error_bars("geomean |error| per source and family", sources);
}

/// Measured kernels: predicted against measured, and the summary's errors.
std::string kernel_rows_section(const ReportInput& in) {
  const json& rows = array_at(in.doc, "rows");
  const std::size_t stride = rows.size() > kMaxScatterPoints ? (rows.size() + kMaxScatterPoints - 1) / kMaxScatterPoints : 1;
  std::vector<ScatterPoint> points;
  for (std::size_t i = 0; i < rows.size(); i += stride) {
    const json& r = rows[i];
    const double m = num(r, "measured_us") * 1e-6, p = num(r, "predicted_us") * 1e-6;
    if (m > 0 && p > 0) points.push_back({m, p, fmt::format("{} ({})", str(r, "kernel"), str(r, "row"))});
  }
  std::string out = heading("kernels", in);
  std::size_t predicted = 0;
  for (const auto& r : rows) predicted += num(r, "predicted_us") > 0 ? 1 : 0;
  out += fmt::format("<p>{} measured rows: {} predicted{}, {} not expressible by the predictors</p>\n", rows.size(), predicted,
                     stride > 1 ? fmt::format(" (every {}th row drawn)", stride) : std::string(), rows.size() - predicted);
  out += svg_scatter("kernels: predicted against measured", points, "us", 1e6);
  const auto summary = in.doc.find("summary");
  if (summary != in.doc.end() && summary->is_object()) out += kernel_summary_charts(*summary);
  return out;
}

/// Single kernels: each one's predicted time, with what bounds it and its predictor.
std::string single_kernels_section(const ReportInput& in) {
  std::vector<StackedBar> bars;
  for (const auto& k : array_at(in.doc, "kernels"))
    bars.emplace_back(str(k, "kernel"), std::vector<double>{num(k, "time_us") * 1e-6},
                      fmt::format("{}-bound, {}", str(k, "bound"), str(k, "predictor")));
  std::string out = heading("kernels", in);
  out += fmt::format("<p>{} kernel(s) predicted on {}</p>\n", bars.size(), xml_escape(str(in.doc, "system")));
  return out + svg_stacked_bars("predicted kernel time", {"predicted"}, bars, "us", 1e6);
}

/// Reuse bins of index-stats (bins (0,1], (1,2], (2,4], ..., >2^15; predictors/
/// index_distribution.hpp) grouped for a legend a reader can follow.
struct ReuseGroup {
  const char* name;
  std::size_t first, last;  ///< bins [first, last]
};
constexpr std::array<ReuseGroup, 5> kReuseGroups{{{"row used once", 0, 0},
                                                  {"2 uses", 1, 1},
                                                  {"3-16 uses", 2, 4},
                                                  {"17-1024 uses", 5, 10},
                                                  {"more than 1024 uses", 11, 16}}};

}  // namespace

std::string kernels_section(const ReportInput& in) {
  return in.doc.contains("rows") ? kernel_rows_section(in) : single_kernels_section(in);
}

std::string trace_stats_section(const ReportInput& in) {
  std::vector<StackedBar> steps, top;
  for (const auto& t : array_at(in.doc, "traces")) {
    const double rank = num(t, "rank");
    for (const auto& s : array_at(t, "steps")) {
      const double compute = num(s, "compute_busy_s"), comm = num(s, "exposed_communication_s"), copy = num(s, "memcpy_busy_s");
      const double idle = std::max(0.0, num(s, "wall_s") - compute - comm - copy);
      steps.emplace_back(fmt::format("rank {:.0f} step {:.0f}", rank, num(s, "step")), std::vector<double>{compute, comm, copy, idle});
    }
    for (const auto& k : array_at(t, "top_kernels")) {
      std::string name = str(k, "name");
      if (name.size() > 60) name = name.substr(0, 57) + "...";
      top.emplace_back(fmt::format("rank {:.0f}: {}", rank, name), std::vector<double>{num(k, "total_s")},
                       fmt::format("{:.0f} launches{}", num(k, "count"), k.value("nccl", false) ? ", NCCL" : ""),
                       k.value("nccl", false));
    }
  }
  std::string out = heading("trace-stats (measured)", in);
  out += fmt::format("<p>{} trace(s), {} step(s); times measured by the profiler that wrote the traces</p>\n",
                     array_at(in.doc, "traces").size(), steps.size());
  out += svg_stacked_bars("measured steps per rank", {"compute kernels", "exposed communication", "copies", "GPU idle"}, steps, "ms", 1e3);
  if (!top.empty()) out += svg_stacked_bars("kernels with the most time (NCCL faded)", {"total time"}, top, "ms", 1e3);
  return out;
}

std::string index_stats_section(const ReportInput& in) {
  std::vector<StackedBar> accesses, reuse;
  const json& tables = array_at(in.doc, "tables");
  // Every table up to kMaxTables; beyond, the kMaxTables with the most accesses per batch.
  std::vector<std::size_t> order(tables.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto per_batch = [&](std::size_t i) { return num(tables[i], "accesses") / std::max(1.0, num(tables[i], "batches")); };
  if (order.size() > kMaxTables) {
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return per_batch(a) > per_batch(b); });
    order.resize(kMaxTables);
    std::sort(order.begin(), order.end());
  }
  for (const std::size_t i : order) {
    const json& t = tables[i];
    const double batches = std::max(1.0, num(t, "batches"));
    const double all = num(t, "accesses") / batches, unique = num(t, "unique_rows") / batches;
    const std::string label = str(t, "name");
    std::string note = fmt::format("pooling {:.2f}", num(t, "pooling_mean"));
    if (t.contains("zipf_alpha")) note += fmt::format(", Zipf alpha {:.2f}", num(t, "zipf_alpha"));
    accesses.emplace_back(label, std::vector<double>{unique, std::max(0.0, all - unique)}, note);
    const json& shares = array_at(t, "access_shares");
    std::vector<double> grouped;
    for (const auto& g : kReuseGroups) {
      double sum = 0;
      for (std::size_t b = g.first; b <= g.last && b < shares.size(); ++b) sum += shares[b].is_number() ? shares[b].get<double>() : 0.0;
      grouped.push_back(sum);
    }
    reuse.emplace_back(label, grouped);
  }
  std::vector<std::string> groups;
  for (const auto& g : kReuseGroups) groups.emplace_back(g.name);
  std::string out = heading("index-stats (measured indices)", in);
  out += fmt::format("<p>{} table(s){}</p>\n", tables.size(),
                     tables.size() > kMaxTables ? fmt::format("; the {} with the most accesses per batch drawn", kMaxTables) : std::string());
  out += svg_stacked_bars("indices per batch: distinct rows and repeats", {"distinct rows", "repeated rows"}, accesses, "indices", 1);
  return out + svg_stacked_bars("share of accesses by how often their row is used in the batch", groups, reuse, "%", 100);
}

std::string calibration_section(const ReportInput& in) {
  const json& d = in.doc;
  if (d.contains("runs")) {  // calibrate runtime: fitted against measured, per run
    std::vector<ScatterPoint> points;
    for (const auto& r : array_at(d, "runs"))
      if (num(r, "measured_s") > 0 && num(r, "fitted_s") > 0)
        points.push_back({num(r, "measured_s"), num(r, "fitted_s"), fmt::format("line {:.0f} ({})", num(r, "line"), str(r, "split"))});
    std::string out = heading("calibrate runtime", in);
    out += fmt::format("<p>host cost per op fitted: {}; {:.0f} fit runs, {:.0f} held out; written: {}</p>\n",
                       xml_escape(format_time(num(d, "op_overhead_s"))), num(d, "fit_runs"), num(d, "heldout_runs"),
                       xml_escape(d.contains("written") && d.at("written").is_string() ? d.at("written").get<std::string>() : "no"));
    return out + svg_scatter("runs: fitted (predicted) against measured", points, "ms", 1e3);
  }
  std::vector<StackedBar> bars;
  std::string what;
  if (d.contains("families")) {  // calibrate kernels: held-out and training error per family
    what = "calibrate kernels";
    for (const auto& f : array_at(d, "families")) {
      bars.emplace_back(str(f, "family") + " held out", std::vector<double>{num(f, "heldout_geomean_abs_error")},
                        fmt::format("{:.0f} samples", num(f, "heldout_samples")));
      bars.emplace_back(str(f, "family") + " training", std::vector<double>{num(f, "train_geomean_abs_error")}, "", true);
    }
  } else {  // calibrate comms: held-out error of each fit against the spec-derived prior
    what = "calibrate comms";
    for (const auto& c : array_at(d, "collectives")) {
      const std::string label = fmt::format("{} ({}, {})", str(c, "collective"), c.value("multi_node", false) ? "multi-node" : "one node",
                                            str(c, "algorithm"));
      const auto h = c.find("held_out");
      if (h == c.end() || !h->is_object()) {
        bars.emplace_back(label, std::vector<double>{0.0}, "no held-out check", true);
        continue;
      }
      bars.emplace_back(label + " fitted", std::vector<double>{num(*h, "fitted")}, fmt::format("{:.0f} sizes held out", num(*h, "samples")));
      bars.emplace_back(label + " prior", std::vector<double>{num(*h, "prior")}, "spec-derived", true);
    }
    for (const auto& s : array_at(d, "leave_one_source_out")) {
      // "folder/file.csv#line34 (url, GPU, ...)": the file's name and line tell the sources apart.
      std::string source = str(s, "source");
      source = source.substr(0, source.find(" ("));
      source = source.substr(source.find_last_of('/') + 1);
      bars.emplace_back("without " + source, std::vector<double>{num(s, "calibrated_geomean_abs_error_from_1MiB")},
                        fmt::format("prior {:.1f}%", 100 * num(s, "prior_geomean_abs_error_from_1MiB")));
    }
  }
  std::string out = heading(what, in);
  const auto written = d.find("written");
  out += fmt::format("<p>calibration written: {} (prior and training errors faded)</p>\n",
                     xml_escape(written != d.end() && written->is_string() ? written->get<std::string>()
                                : written != d.end()                         ? std::string("no, the fit was refused")
                                                                             : std::string("not recorded")));
  return out + error_bars("geomean |error|", bars);
}

std::string profile_section(const ReportInput& in) {
  const json& d = in.doc;
  std::vector<StackedBar> bars;
  for (const auto& s : array_at(d, "sweeps"))
    bars.emplace_back(str(s, "name"), std::vector<double>{num(s, "cases")},
                      fmt::format("{:.0f} warm-up + {:.0f} timed runs{}", num(s, "warmup"), num(s, "repetitions"),
                                  s.value("flush_l2", false) ? ", L2 flushed" : ""));
  std::string out = heading(d.value("dry_run", false) ? "profile (dry run)" : "profile", in);
  if (d.contains("measured"))
    out += fmt::format("<p>{:.0f} cases measured, {:.0f} failed, {:.0f} not run (limit or time budget); timer {}; written to {}</p>\n",
                       num(d, "measured"), num(d, "failed"), num(d, "not_run"), xml_escape(str(d, "timer")), xml_escape(str(d, "written")));
  else
    out += fmt::format("<p>{:.0f} cases in all; nothing measured (dry run)</p>\n", num(d, "cases"));
  return out + svg_stacked_bars("cases per sweep", {"cases"}, bars, "cases", 1);
}

}  // namespace perfcast::html

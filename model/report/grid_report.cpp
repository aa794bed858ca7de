#include "model/report/grid_report.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/report/report.hpp"
#include "model/report/workload_metrics.hpp"
#include "core/json_text.hpp"

namespace perfcast {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

namespace {

/// The figures each grid row shows.
struct GridRow {
  Seconds iteration_time = 0;
  double samples_per_s = 0, tokens_per_s = 0, mfu = 0;
  Seconds exposed_communication = 0;  ///< on the critical-path rank
  double max_memory_bytes = 0;
  bool fits = true;
};

GridRow grid_row(const Prediction& p) {
  const WorkloadMetrics m = workload_metrics(p);
  GridRow r;
  r.iteration_time = p.timeline.iteration_time;
  r.samples_per_s = m.samples_per_s;
  r.tokens_per_s = m.tokens_per_s;
  r.mfu = m.mfu;
  if (!p.analysis.ranks.empty()) r.exposed_communication = p.analysis.ranks[static_cast<std::size_t>(m.breakdown_rank)].exposed_communication;
  for (const auto& mem : p.memory) {
    r.max_memory_bytes = std::max(r.max_memory_bytes, mem.total());
    r.fits = r.fits && mem.fits();
  }
  return r;
}

std::vector<std::string> axis_keys(const std::vector<GridPoint>& points) {
  std::vector<std::string> keys;
  if (!points.empty())
    for (const auto& [k, _] : points.front().settings) keys.push_back(k);
  return keys;
}

}  // namespace

std::string render_grid_text(const std::vector<GridPoint>& points, const std::vector<std::unique_ptr<Prediction>>& results) {
  const auto keys = axis_keys(points);
  std::vector<std::size_t> width;
  for (std::size_t k = 0; k < keys.size(); ++k) {
    std::size_t w = keys[k].size();
    for (const auto& p : points) w = std::max(w, p.settings[k].second.size());
    width.push_back(w);
  }
  std::string out;
  for (std::size_t k = 0; k < keys.size(); ++k) out += fmt::format("{:<{}}  ", keys[k], width[k]);
  out += fmt::format("{:>11} {:>12} {:>12} {:>6} {:>11} {:>10}\n", "iteration", "samples/s", "tokens/s", "MFU", "exposed", "max mem");
  for (std::size_t i = 0; i < points.size(); ++i) {
    for (std::size_t k = 0; k < keys.size(); ++k) out += fmt::format("{:<{}}  ", points[i].settings[k].second, width[k]);
    if (!results[i]) {
      out += "not run (stopped by --timeout)\n";
      continue;
    }
    const GridRow r = grid_row(*results[i]);
    out += fmt::format("{:>11} {:>12.0f} {:>12} {:>6} {:>11} {:>9.1f}G{}\n", format_time(r.iteration_time), r.samples_per_s,
                       r.tokens_per_s > 0 ? fmt::format("{:.0f}", r.tokens_per_s) : "-",
                       r.mfu > 0 ? fmt::format("{:.1f}%", r.mfu * 100) : "-", format_time(r.exposed_communication),
                       r.max_memory_bytes / (1024.0 * 1024 * 1024), r.fits ? "" : "!");
  }
  out += "(exposed: communication not hidden under compute on the critical-path rank; ! = does not fit in device memory)\n";
  const auto extrapolated = std::count_if(results.begin(), results.end(), [](const auto& r) { return r && r->steady_state; });
  const auto predicted = std::count_if(results.begin(), results.end(), [](const auto& r) { return r != nullptr; });
  if (extrapolated > 0)
    out += fmt::format("({} of {} predicted points simulated a few micro-batches and extrapolated the steady state, exactly; "
                       "--all-micro-batches simulates every one; JSON: context.steady_state)\n",
                       extrapolated, predicted);
  return out;
}

std::string render_grid_csv(const std::vector<GridPoint>& points, const std::vector<std::unique_ptr<Prediction>>& results) {
  std::string out;
  for (const auto& k : axis_keys(points)) out += csv_field(k) + ",";
  out += "iteration_time_s,samples_per_s,tokens_per_s,mfu,exposed_communication_s,max_memory_bytes,fits\n";
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (!results[i]) continue;  // not run (--timeout): no row
    for (const auto& [_, v] : points[i].settings) out += csv_field(v) + ",";
    const GridRow r = grid_row(*results[i]);
    out += fmt::format("{:.9g},{:.9g},{:.9g},{:.6g},{:.9g},{:.0f},{}\n", r.iteration_time, r.samples_per_s, r.tokens_per_s, r.mfu,
                       r.exposed_communication, r.max_memory_bytes, r.fits ? "true" : "false");
  }
  return out;
}

std::string render_grid_json(const std::vector<GridPoint>& points, const std::vector<std::unique_ptr<Prediction>>& results) {
  nlohmann::json arr = nlohmann::json::array();
  for (std::size_t i = 0; i < points.size(); ++i) {
    nlohmann::json settings = nlohmann::json::object();
    for (const auto& [k, v] : points[i].settings) settings[k] = v;
    if (!results[i]) {
      arr.push_back({{"settings", settings}, {"result", nullptr}, {"not_run", "stopped by --timeout"}});
      continue;
    }
    arr.push_back({{"settings", settings}, {"result", nlohmann::json::parse(render_json(*results[i]))}});
  }
  const auto not_run = static_cast<std::size_t>(std::count(results.begin(), results.end(), nullptr));
  nlohmann::json doc{{"points", arr}};
  if (not_run > 0) doc["timed_out"] = true;
  return json_text(doc, 2) + "\n";
}

std::string render_ranks_csv(const Prediction& p) {
  std::string out =
      "rank,period_s,compute_busy_s,communication_busy_s,exposed_communication_s,copy_busy_s,exposed_copy_s,host_busy_s,"
      "host_bound_idle_s,gpu_idle_s,critical_path_s,memory_total_bytes,memory_capacity_bytes\n";
  for (const auto& b : p.analysis.ranks) {
    const auto& m = p.memory[static_cast<std::size_t>(b.rank)];
    out += fmt::format("{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.0f},{:.0f}\n", b.rank, b.period,
                       b.compute_busy, b.communication_busy, b.exposed_communication, b.copy_busy, b.exposed_copy, b.host_busy,
                       b.host_bound_idle, b.gpu_idle, b.critical_path, double(m.total()), double(m.capacity));
  }
  return out;
}

}  // namespace perfcast

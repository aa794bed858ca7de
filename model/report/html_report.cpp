#include "model/report/html_report.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/file_kind.hpp"
#include "core/json_reader.hpp"
#include "core/units.hpp"
#include "model/report/svg_plot.hpp"

namespace perfcast {

namespace {

using nlohmann::json;

bool has_suffix(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/// A number at `key` of `j`, or 0 when absent or not a number.
double num(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string str(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool array_of_objects_with(const json& j, const char* key, const char* a, const char* b) {
  const auto it = j.find(key);
  return it != j.end() && it->is_array() && !it->empty() && it->front().is_object() && it->front().contains(a) && it->front().contains(b);
}

ReportInputKind kind_of(const json& j, const std::string& file) {
  if (!j.is_object()) throw ConfigError(file, "", "expected a JSON object written by perfcast (predict, comm, shard, replay --json)");
  if (j.contains("iteration_time_s") && j.contains("ranks")) return ReportInputKind::kPredict;
  if (j.contains("tables") || array_of_objects_with(j, "results", "busbw_GBps", "bytes")) return ReportInputKind::kComm;
  if (j.contains("baselines") && j.contains("best")) return ReportInputKind::kShard;
  if (array_of_objects_with(j, "ranks", "measured_s", "simulated_s")) return ReportInputKind::kReplay;
  if (array_of_objects_with(j, "results", "predicted_s", "measured_s")) return ReportInputKind::kValidationLines;
  const std::string kind = describe_json_kind(j);
  throw ConfigError(file, "",
                    "not a result perfcast can plot: expected predict --json (iteration_time_s, ranks), comm --json "
                    "(results or tables), shard --json (baselines, best), replay --json (ranks with measured_s and "
                    "simulated_s) or validation result lines (.jsonl)" + (kind.empty() ? std::string() : "; " + kind));
}

/// The file's name without folders.
std::string base_name(const std::string& file) {
  const auto slash = file.find_last_of('/');
  return slash == std::string::npos ? file : file.substr(slash + 1);
}

std::string context_line(const json& doc) {
  const auto c = doc.find("context");
  if (c == doc.end() || !c->is_object()) return "";
  std::string inputs;
  if (const auto in = c->find("inputs"); in != c->end() && in->is_array())
    for (const auto& f : *in)
      if (f.is_object()) inputs += (inputs.empty() ? "" : ", ") + str(f, "file");
  return fmt::format("<p class=\"ctx\">perfcast {} ({}), {}; inputs: {}</p>\n", xml_escape(str(*c, "perfcast_version")),
                     xml_escape(str(*c, "git_commit")), xml_escape(str(*c, "date")), xml_escape(inputs));
}

std::string predict_section(const ReportInput& in) {
  const json& d = in.doc;
  std::string out = fmt::format("<h2>predict: {}</h2>\n{}", xml_escape(base_name(in.file)), context_line(d));
  out += fmt::format("<p>predicted iteration time: <b>{}</b>; {:.0f} samples/s</p>\n", xml_escape(format_time(num(d, "iteration_time_s"))),
                     num(d, "samples_per_s"));
  const std::vector<std::string> parts{"compute", "exposed communication", "exposed copies", "host-bound idle", "other idle"};
  std::vector<StackedBar> bars;
  const json& ranks = d.at("ranks");
  // Beyond 64 ranks: every k-th rank plus the notable ones, so the chart stays readable.
  const std::size_t n = ranks.size(), stride = n > 64 ? (n + 63) / 64 : 1;
  std::vector<double> notable;
  if (const auto nr = d.find("notable_ranks"); nr != d.end() && nr->is_object())
    for (const auto& [k, v] : nr->items())
      if (v.is_number()) notable.push_back(v.get<double>());
  for (std::size_t i = 0; i < n; ++i) {
    const json& r = ranks[i];
    const double rank = num(r, "rank");
    if (i % stride != 0 && std::find(notable.begin(), notable.end(), rank) == notable.end()) continue;
    const double compute = num(r, "compute_busy_s"), comm = num(r, "exposed_communication_s"), copy = num(r, "exposed_copy_s"),
                 host = num(r, "host_bound_idle_s");
    const double other = std::max(0.0, num(r, "period_s") - compute - comm - copy - host);
    bars.push_back({fmt::format("rank {:.0f}", rank), {compute, comm, copy, host, other}});
  }
  out += svg_stacked_bars(fmt::format("per-rank iteration ({} of {} ranks)", bars.size(), n), parts, bars, "ms", 1e3);
  if (const auto split = d.find("iteration_split"); split != d.end() && split->is_object() && split->contains("parts")) {
    std::vector<std::string> names;
    StackedBar bar{fmt::format("rank {:.0f}", num(*split, "rank")), {}};
    for (const auto& p : split->at("parts")) {
      names.push_back(str(p, "part"));
      bar.values.push_back(num(p, "time_s"));
    }
    out += svg_stacked_bars("iteration split of the critical-path rank", names, {bar}, "ms", 1e3);
  }
  return out;
}

std::string comm_section(const ReportInput& in) {
  const json& d = in.doc;
  std::vector<Series> series;
  auto add = [&](const json& results, const std::string& label) {
    Series s{label, {}};
    for (const auto& r : results)
      if (r.is_object()) s.points.emplace_back(num(r, "bytes"), num(r, "busbw_GBps"));
    series.push_back(std::move(s));
  };
  if (const auto t = d.find("tables"); t != d.end() && t->is_array()) {
    for (const auto& table : *t)
      if (table.is_object() && table.contains("results"))
        add(table.at("results"), fmt::format("{:.0f} node(s), {:.0f} ranks", num(table, "nodes"), num(table, "ranks")));
  } else {
    add(d.at("results"), "predicted");
  }
  std::string title = "bus bandwidth";
  if (const auto c = d.find("context"); c != d.end() && c->is_object() && c->contains("collective") && c->at("collective").is_string())
    title += " of " + c->at("collective").get<std::string>();
  return fmt::format("<h2>comm: {}</h2>\n{}", xml_escape(base_name(in.file)), context_line(d)) +
         svg_line_chart(title, "message size", "bus bandwidth (GB/s)", series, true);
}

std::string shard_section(const ReportInput& in) {
  const json& d = in.doc;
  std::string out = fmt::format("<h2>shard: {}</h2>\n{}", xml_escape(base_name(in.file)), context_line(d));
  std::vector<StackedBar> plans;
  for (const auto& b : d.at("baselines"))
    if (b.is_object()) plans.push_back({str(b, "name") + (b.value("feasible", true) ? "" : " (does not fit)"), {num(b, "iteration_time_s")}});
  const json& best = d.at("best");
  plans.push_back({"best (search)", {num(best, "iteration_time_s")}});
  out += svg_stacked_bars("iteration time per plan", {"iteration time"}, plans, "ms", 1e3);
  if (const auto ranks = best.find("ranks"); ranks != best.end() && ranks->is_array() && !ranks->empty()) {
    std::vector<StackedBar> time, memory;
    for (const auto& r : *ranks) {
      const std::string label = fmt::format("rank {:.0f}", num(r, "rank"));
      const double compute = num(r, "compute_busy_s"), comm = num(r, "exposed_communication_s");
      time.push_back({label, {compute, comm, std::max(0.0, num(r, "period_s") - compute - comm)}});
      const double emb = num(r, "embedding_bytes"), total = num(r, "memory_total_bytes"), cap = num(r, "memory_capacity_bytes");
      memory.push_back({label, {emb, std::max(0.0, total - emb), std::max(0.0, cap - total)}});
    }
    out += svg_stacked_bars("best plan: per-rank time", {"compute", "exposed communication", "other"}, time, "ms", 1e3);
    out += svg_stacked_bars("best plan: per-rank memory", {"embedding tables", "other memory", "free"}, memory, "GiB",
                            1.0 / (1024.0 * 1024 * 1024));
  }
  return out;
}

std::string scatter_section(const ReportInput& in, const json& rows, const char* predicted_key, const std::string& what) {
  std::vector<ScatterPoint> points;
  std::vector<double> errors;
  for (const auto& r : rows) {
    if (!r.is_object()) continue;
    const double m = num(r, "measured_s"), p = num(r, predicted_key);
    if (!(m > 0) || !(p > 0)) continue;
    const std::string label = r.contains("rank") ? fmt::format("rank {:.0f}", num(r, "rank"))
                              : r.contains("index") ? fmt::format("config {:.0f}", num(r, "index")) : std::string("point");
    points.push_back({m, p, label});
    errors.push_back(std::fabs(p / m - 1));
  }
  double geo = 0;
  for (double e : errors) geo += std::log(std::max(e, 1e-6));
  geo = errors.empty() ? 0 : std::exp(geo / double(errors.size()));
  std::string out = fmt::format("<h2>{}: {}</h2>\n{}", what, xml_escape(base_name(in.file)), context_line(in.doc.is_object() ? in.doc : json::object()));
  out += fmt::format("<p>{} points; geomean |error| {:.2f}%</p>\n", points.size(), geo * 100);
  return out + svg_scatter(what + ": predicted against measured", points, "ms", 1e3);
}

std::string section(const ReportInput& in) {
  switch (in.kind) {
    case ReportInputKind::kPredict: return predict_section(in);
    case ReportInputKind::kComm: return comm_section(in);
    case ReportInputKind::kShard: return shard_section(in);
    case ReportInputKind::kReplay: return scatter_section(in, in.doc.at("ranks"), "simulated_s", "replay");
    case ReportInputKind::kValidationLines:
      return scatter_section(in, in.doc.is_array() ? in.doc : in.doc.at("results"), "predicted_s", "validate");
  }
  return "";
}

}  // namespace

ReportInput load_report_input(const std::string& file) {
  ReportInput in;
  in.file = file;
  if (has_suffix(file, ".jsonl")) {
    in.kind = ReportInputKind::kValidationLines;
    in.doc = json::array();
    for_each_json_line(file, "a validation result line", [&](const JsonDocument& line) {
      if (!line.root.is_object() || str(line.root, "schema") != "perfcast.validation_result")
        throw ConfigError(line.file, "/schema", "expected \"perfcast.validation_result\" (lines written by perfcast validate)");
      in.doc.push_back(line.root);
    });
    return in;
  }
  in.doc = load_json_file(file).root;
  in.kind = kind_of(in.doc, file);
  return in;
}

std::string render_html_report(const std::vector<ReportInput>& inputs, const std::string& title) {
  std::string body;
  for (const auto& in : inputs) {
    try {
      body += "<section>\n" + section(in) + "</section>\n";
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError(in.file, "", fmt::format("unexpected structure for a {} result ({})",
                                                 in.kind == ReportInputKind::kPredict  ? "predict"
                                                 : in.kind == ReportInputKind::kComm   ? "comm"
                                                 : in.kind == ReportInputKind::kShard  ? "shard"
                                                 : in.kind == ReportInputKind::kReplay ? "replay"
                                                                                       : "validation",
                                                 e.what()));
    }
  }
  return fmt::format(
      "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
      "<title>{0}</title>\n<style>body{{font-family:sans-serif;max-width:900px;margin:2em auto;color:#222}}"
      "section{{margin-bottom:2em}}h2{{font-size:1.1em;border-bottom:1px solid #ccc}}.ctx{{color:#666;font-size:0.85em}}"
      "svg{{display:block;margin:0.5em 0}}</style>\n</head>\n<body>\n<h1>{0}</h1>\n"
      "<p class=\"ctx\">Written by perfcast report from {1} result file(s). Times are predictions unless marked measured; "
      "hover a bar or point for its value.</p>\n{2}</body>\n</html>\n",
      xml_escape(title), inputs.size(), body);
}

}  // namespace perfcast

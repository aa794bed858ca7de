#include "model/report/html_report.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/file_kind.hpp"
#include "core/json_reader.hpp"
#include "core/units.hpp"
#include "model/report/html_sections.hpp"
#include "model/report/svg_plot.hpp"

namespace perfcast {

namespace html {

double num(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string str(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace html

namespace {

using nlohmann::json;
using html::num;
using html::str;

bool array_of_objects_with(const json& j, const char* key, const char* a, const char* b) {
  const auto it = j.find(key);
  return it != j.end() && it->is_array() && !it->empty() && it->front().is_object() && it->front().contains(a) && it->front().contains(b);
}

ReportInputKind kind_of(const json& j, const std::string& file) {
  if (!j.is_object()) throw ConfigError(file, "", "expected a JSON object written by perfcast (predict, comm, shard, replay --json)");
  if (j.contains("iteration_time_s") && j.contains("ranks")) return ReportInputKind::kPredict;
  // Before comm (whose results may be "tables"): index-stats has tables too.
  if (str(j, "schema") == "perfcast.index_stats") return ReportInputKind::kIndexStats;
  if ((j.contains("kernels") && j.contains("system")) || (j.contains("rows") && j.contains("not_expressible")))
    return ReportInputKind::kKernels;
  if (array_of_objects_with(j, "traces", "steps", "top_kernels")) return ReportInputKind::kTraceStats;
  if (array_of_objects_with(j, "collectives", "collective", "samples") || array_of_objects_with(j, "families", "family", "heldout_samples") ||
      array_of_objects_with(j, "runs", "measured_s", "fitted_s"))
    return ReportInputKind::kCalibration;
  if (j.contains("sweeps") && j.contains("cases") && j.contains("dry_run")) return ReportInputKind::kProfile;
  if (array_of_objects_with(j, "points", "settings", "result")) return ReportInputKind::kGrid;
  if (j.contains("plans") && j.contains("search") && j.at("plans").is_array()) return ReportInputKind::kPlan;
  if (j.contains("tables") || array_of_objects_with(j, "results", "busbw_GBps", "bytes")) return ReportInputKind::kComm;
  if (j.contains("baselines") && j.contains("best")) return ReportInputKind::kShard;
  if (array_of_objects_with(j, "ranks", "measured_s", "simulated_s")) return ReportInputKind::kReplay;
  if (array_of_objects_with(j, "results", "predicted_s", "measured_s")) return ReportInputKind::kValidationLines;
  const std::string kind = describe_json_kind(j);
  throw ConfigError(file, "",
                    "not a result perfcast can plot: expected predict --json (iteration_time_s, ranks), predict --sweep / "
                    "--compare --json (points with settings and result), plan --json (plans, search), comm --json "
                    "(results or tables), shard --json (baselines, best), replay --json (ranks with measured_s and "
                    "simulated_s), kernels --json (kernels, or rows and not_expressible), trace-stats --json (traces), "
                    "index-stats --json (schema perfcast.index_stats), calibrate comms / kernels / runtime --json "
                    "(collectives, families or runs), profile --json (sweeps, cases), validate --json or validation result "
                    "lines (.jsonl)" + (kind.empty() ? std::string() : "; " + kind));
}

/// The file's name without folders.
std::string base_name(const std::string& file) {
  const auto slash = file.find_last_of('/');
  return slash == std::string::npos ? file : file.substr(slash + 1);
}

std::string context_line(const json& doc);

}  // namespace

std::string html::heading(const std::string& what, const ReportInput& in) {
  return fmt::format("<h2>{}: {}</h2>\n{}", xml_escape(what), xml_escape(base_name(in.file)),
                     context_line(in.doc.is_object() ? in.doc : json::object()));
}

namespace {

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

/// GiB for memory charts.
constexpr double kPerGiB = 1.0 / (1024.0 * 1024 * 1024);

/// Per-rank memory of a predict result: HBM by kind against capacity (ranks that do not fit
/// faded and marked), and host memory where tables live there.
std::string predict_memory_charts(const json& ranks, std::size_t stride, const std::vector<double>& notable) {
  const std::vector<std::string> parts{"embedding tables", "dense (weights, gradients, optimizer)", "activations", "io", "reserved", "free"};
  std::vector<StackedBar> hbm, host;
  bool any_host = false;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const json& r = ranks[i];
    const double rank = num(r, "rank");
    if (i % stride != 0 && std::find(notable.begin(), notable.end(), rank) == notable.end()) continue;
    const auto m = r.find("memory");
    if (m == r.end() || !m->is_object()) continue;
    const double total = num(*m, "total_bytes"), cap = num(*m, "capacity_bytes");
    const bool fits = m->value("fits", true);
    const std::string label = fmt::format("rank {:.0f}", rank);
    hbm.emplace_back(label,
                     std::vector<double>{num(*m, "embedding_bytes"), num(*m, "dense_bytes"), num(*m, "activation_bytes"), num(*m, "io_bytes"),
                                         num(*m, "reserved_bytes"), std::max(0.0, cap - total)},
                     fits ? "" : fmt::format("does not fit ({:.1f} GiB capacity)", cap * kPerGiB), !fits);
    const double host_bytes = num(*m, "host_bytes"), host_cap = num(*m, "host_capacity_bytes");
    any_host = any_host || host_bytes > 0;
    host.emplace_back(label, std::vector<double>{host_bytes, std::max(0.0, host_cap - host_bytes)});
  }
  std::string out;
  if (!hbm.empty()) out += svg_stacked_bars("per-rank device memory", parts, hbm, "GiB", kPerGiB, true);
  if (any_host) out += svg_stacked_bars("per-rank host memory (tables in host memory)", {"embedding tables", "free"}, host, "GiB", kPerGiB, true);
  return out;
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
  out += predict_memory_charts(ranks, stride, notable);
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

/// The axis of one-part time bars (seconds): seconds when the longest is 2 s or more, else
/// milliseconds. Returns (unit, scale from seconds).
std::pair<const char*, double> time_axis(const std::vector<StackedBar>& bars) {
  double longest = 0;
  for (const auto& b : bars) longest = std::max(longest, b.values.empty() ? 0.0 : b.values.front());
  return longest >= 2.0 ? std::pair<const char*, double>{"s", 1.0} : std::pair<const char*, double>{"ms", 1e3};
}

/// "tp 4 cp 2 pp 4 vp 5 dp 2 mb 1, none, dist-opt, overlap grad+tp" for a plan --json entry.
std::string choice_label(const json& c) {
  std::string label = fmt::format("tp {:.0f}", num(c, "tp"));
  for (const char* k : {"cp", "pp", "vp"})
    if (num(c, k) > 1) label += fmt::format(" {} {:.0f}", k, num(c, k));
  label += fmt::format(" dp {:.0f}", num(c, "dp"));
  if (num(c, "ep") > 1) label += fmt::format(" ep {:.0f}", num(c, "ep"));
  label += fmt::format(" mb {:.0f}, {}", num(c, "micro_batch"), str(c, "recompute"));
  if (c.value("distributed_optimizer", false)) label += ", dist-opt";
  const bool grad = c.value("overlap_grad_reduce", false), tp = c.value("tp_comm_overlap", false);
  if (grad || tp) label += std::string(", overlap ") + (grad && tp ? "grad+tp" : grad ? "grad" : "tp");
  return label;
}

/// plan --json: the ranked plans (at most 30), what the search covered and rejected.
std::string plan_section(const ReportInput& in) {
  const json& d = in.doc;
  const json& search = d.at("search");
  std::string out = fmt::format("<h2>plan: {}</h2>\n{}", xml_escape(base_name(in.file)), context_line(d));
  const json& plans = d.at("plans");
  const auto coverage = search.find("coverage");
  const bool complete = coverage == search.end() || !coverage->is_object() || coverage->value("complete", true);
  out += fmt::format("<p>{} on {} ({:.0f} GPUs): {} plans predicted, {} rejected by screening{}</p>\n", xml_escape(str(search, "workload")),
                     xml_escape(str(search, "system")), num(search, "gpus"), plans.size(),
                     d.contains("rejected") && d.at("rejected").is_array() ? d.at("rejected").size() : 0,
                     complete ? "" : fmt::format("; <b>partial search</b>: {:.0f} of {:.0f} candidates predicted before the time limit, "
                                                 "a faster plan may be among the others",
                                                 num(*coverage, "predicted"), num(*coverage, "candidates")));
  const auto asked = d.find("asked");
  const double asked_rank = asked != d.end() && asked->is_object() ? num(*asked, "rank") : 0;
  std::vector<StackedBar> bars;
  const std::size_t shown = std::min<std::size_t>(plans.size(), 30);
  for (std::size_t k = 0; k < shown; ++k) {
    const json& p = plans[k];
    std::string note = k == 0 ? (complete ? "fastest" : "fastest of those predicted") : "";
    if (num(p, "rank") == asked_rank) note += std::string(note.empty() ? "" : "; ") + "the workload's own";
    bars.emplace_back(fmt::format("{:.0f}. {}", num(p, "rank"), choice_label(p)), std::vector<double>{num(p, "iteration_time_s")}, note);
  }
  if (asked_rank > double(shown) && asked_rank <= double(plans.size()))
    bars.emplace_back(fmt::format("{:.0f}. {}", asked_rank, choice_label(*asked)),
                      std::vector<double>{num(plans[static_cast<std::size_t>(asked_rank) - 1], "iteration_time_s")}, "the workload's own");
  const auto [unit, scale] = time_axis(bars);
  out += svg_stacked_bars(fmt::format("iteration time of the {} fastest plans", shown), {"iteration time"}, bars, unit, scale);
  return out;
}

/// predict --sweep / --compare --json: one bar per point; points not run or not fitting marked.
std::string grid_section(const ReportInput& in) {
  const json& d = in.doc;
  std::string out = fmt::format("<h2>predict grid: {}</h2>\n{}", xml_escape(base_name(in.file)), context_line(d));
  std::vector<StackedBar> bars;
  for (const auto& p : d.at("points")) {
    std::string label;
    if (const auto s = p.find("settings"); s != p.end() && s->is_object())
      for (const auto& [k, v] : s->items())  // files by their names: the folders are in the context line
        label += (label.empty() ? "" : ", ") + k + "=" + (v.is_string() ? base_name(v.get<std::string>()) : v.dump());
    const json& result = p.at("result");
    if (!result.is_object()) {
      bars.emplace_back(label, std::vector<double>{0.0}, "not run (" + str(p, "not_run") + ")", true);
      continue;
    }
    bool fits = true;
    if (const auto ranks = result.find("ranks"); ranks != result.end() && ranks->is_array())
      for (const auto& r : *ranks)
        if (r.is_object() && r.contains("memory") && !r.at("memory").value("fits", true)) fits = false;
    bars.emplace_back(label, std::vector<double>{num(result, "iteration_time_s")}, fits ? "" : "does not fit in memory", !fits);
  }
  out += fmt::format("<p>{} points</p>\n", bars.size());
  const auto [unit, scale] = time_axis(bars);
  return out + svg_stacked_bars("predicted iteration time per point", {"iteration time"}, bars, unit, scale);
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
    if (b.is_object()) {
      const bool fits = b.value("feasible", true);
      plans.emplace_back(str(b, "name"), std::vector<double>{num(b, "iteration_time_s")}, fits ? "" : "does not fit", !fits);
    }
  const json& best = d.at("best");
  const bool best_fits = best.value("feasible", true);
  plans.emplace_back("best (search)", std::vector<double>{num(best, "iteration_time_s")}, best_fits ? "" : "does not fit", !best_fits);
  out += svg_stacked_bars("iteration time per plan", {"iteration time"}, plans, "ms", 1e3);
  if (const auto ranks = best.find("ranks"); ranks != best.end() && ranks->is_array() && !ranks->empty()) {
    std::vector<StackedBar> time, memory, host;
    bool any_host = false;
    for (const auto& r : *ranks) {
      const std::string label = fmt::format("rank {:.0f}", num(r, "rank"));
      const double compute = num(r, "compute_busy_s"), comm = num(r, "exposed_communication_s");
      time.emplace_back(label, std::vector<double>{compute, comm, std::max(0.0, num(r, "period_s") - compute - comm)});
      const double emb = num(r, "embedding_bytes"), total = num(r, "memory_total_bytes"), cap = num(r, "memory_capacity_bytes");
      const bool fits = total <= cap || cap <= 0;
      memory.emplace_back(label, std::vector<double>{emb, std::max(0.0, total - emb), std::max(0.0, cap - total)},
                          fits ? "" : "does not fit", !fits);
      const double host_bytes = num(r, "host_memory_bytes"), host_cap = num(r, "host_memory_capacity_bytes");
      any_host = any_host || host_bytes > 0;
      host.emplace_back(label, std::vector<double>{host_bytes, std::max(0.0, host_cap - host_bytes)});
    }
    out += svg_stacked_bars("best plan: per-rank time", {"compute", "exposed communication", "other"}, time, "ms", 1e3);
    out += svg_stacked_bars("best plan: per-rank device memory", {"embedding tables", "other memory", "free"}, memory, "GiB", kPerGiB, true);
    if (any_host)
      out += svg_stacked_bars("best plan: per-rank host memory (tables in host memory)", {"embedding tables", "free"}, host, "GiB", kPerGiB, true);
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

const char* report_kind_name(ReportInputKind kind) {
  switch (kind) {
    case ReportInputKind::kPredict: return "predict";
    case ReportInputKind::kGrid: return "predict grid";
    case ReportInputKind::kPlan: return "plan";
    case ReportInputKind::kComm: return "comm";
    case ReportInputKind::kShard: return "shard";
    case ReportInputKind::kReplay: return "replay";
    case ReportInputKind::kValidationLines: return "validation";
    case ReportInputKind::kKernels: return "kernels";
    case ReportInputKind::kTraceStats: return "trace-stats";
    case ReportInputKind::kIndexStats: return "index-stats";
    case ReportInputKind::kCalibration: return "calibration";
    case ReportInputKind::kProfile: return "profile";
  }
  return "result";
}

std::string section(const ReportInput& in) {
  switch (in.kind) {
    case ReportInputKind::kPredict: return predict_section(in);
    case ReportInputKind::kGrid: return grid_section(in);
    case ReportInputKind::kPlan: return plan_section(in);
    case ReportInputKind::kComm: return comm_section(in);
    case ReportInputKind::kShard: return shard_section(in);
    case ReportInputKind::kReplay: return scatter_section(in, in.doc.at("ranks"), "simulated_s", "replay");
    case ReportInputKind::kValidationLines:
      return scatter_section(in, in.doc.is_array() ? in.doc : in.doc.at("results"), "predicted_s", "validate");
    case ReportInputKind::kKernels: return html::kernels_section(in);
    case ReportInputKind::kTraceStats: return html::trace_stats_section(in);
    case ReportInputKind::kIndexStats: return html::index_stats_section(in);
    case ReportInputKind::kCalibration: return html::calibration_section(in);
    case ReportInputKind::kProfile: return html::profile_section(in);
  }
  return "";
}

}  // namespace

ReportInput load_report_input(const std::string& file) {
  ReportInput in;
  in.file = file;
  if (file.ends_with(".jsonl")) {
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
      throw ConfigError(in.file, "", fmt::format("unexpected structure for a {} result ({})", report_kind_name(in.kind), e.what()));
    }
  }
  return fmt::format(
      "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
      "<title>{0}</title>\n<style>body{{font-family:sans-serif;max-width:900px;margin:2em auto;color:#222}}"
      "section{{margin-bottom:2em}}h2{{font-size:1.1em;border-bottom:1px solid #ccc}}.ctx{{color:#666;font-size:0.85em}}"
      "svg{{display:block;margin:0.5em 0;max-width:100%;height:auto}}</style>\n</head>\n<body>\n<h1>{0}</h1>\n"
      "<p class=\"ctx\">Written by perfcast report from {1} result file(s). Times are predictions unless marked measured; "
      "hover a bar or point for its value.</p>\n{2}</body>\n</html>\n",
      xml_escape(title), inputs.size(), body);
}

}  // namespace perfcast

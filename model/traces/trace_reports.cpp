#include "model/traces/trace_reports.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/run_context.hpp"
#include "core/json_text.hpp"

namespace perfcast {
namespace {

using nlohmann::json;

json context(std::string_view command, const std::vector<std::string>& inputs) {
  return command_context(std::string(command), inputs);
}

std::string rank_text(const std::optional<int>& rank, const std::optional<int>& world) {
  if (!rank) return "rank unknown";
  return world ? fmt::format("rank {} of {}", *rank, *world) : fmt::format("rank {}", *rank);
}

std::string step_name(std::int64_t n) { return n < 0 ? "trace" : fmt::format("#{}", n); }

/// Kernel names are C++ signatures; cut them for the text table.
std::string short_name(const std::string& n, std::size_t width) {
  return n.size() <= width ? n : n.substr(0, width - 3) + "...";
}

std::string percent(double x) { return fmt::format("{:+.2f}%", 100 * x); }

/// Where the replayed collectives' durations came from.
std::string collectives_text(const ReplayResult& r) {
  const ReplayGraph& g = *r.replay;
  const std::string measured = g.ranks.size() > 1 ? "min over the traced ranks" : "measured (one rank: includes peer waits)";
  if (r.options.kernels != ReplayKernels::kPredicted) return measured;
  if (r.options.collectives == ReplayCollectives::kMeasured) return measured + " (--collectives measured)";
  if (g.measured_collectives == 0) return "collective model where the size is known";
  const std::size_t traced = g.ranks.size();
  return fmt::format("measured: the trace holds {} of the {} ranks of their communicator, and a traced rank's NCCL "
                     "kernel includes its wait for the others (--collectives model predicts the transfer alone)",
                     traced, g.untraced_communicator);
}

}  // namespace

std::string render_trace_stats_text(const std::vector<TraceStats>& stats, int top) {
  std::string out;
  for (const auto& s : stats) {
    out += fmt::format("{}\n  {}, {} (device {})\n", s.file, rank_text(s.rank, s.world_size), s.gpu, s.device);
    if (stats.size() > 1)
      out += fmt::format("  clock offset to the first trace: {} ({} NCCL kernels matched)\n", format_time(s.clock_offset),
                         s.aligned_collectives);
    out += fmt::format("  {:>7} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>8}\n", "step", "wall", "gpu busy", "compute",
                       "nccl", "exposed", "memcpy", "kernels");
    for (const auto& st : s.steps) {
      out += fmt::format("  {:>7} {:>10}{} {:>11} {:>11} {:>11} {:>11} {:>11} {:>8}\n", step_name(st.step),
                         format_time(st.wall), st.wall_is_period ? " " : "*", format_time(st.gpu_busy),
                         format_time(st.compute_busy), format_time(st.nccl_busy), format_time(st.exposed_communication),
                         format_time(st.memcpy_busy), st.kernels);
    }
    if (!s.steps.empty() && !s.steps.back().wall_is_period)
      out += "  * the last step's own span (no next step to measure start-to-start)\n";
    Seconds total = 0;
    for (const auto& k : s.kernels) total += k.total;
    if (!s.collectives.empty()) {
      out += "  collectives:\n";
      for (const auto& c : s.collectives)
        out += fmt::format("    {:<16} {:>5} x {:>11}{}\n", c.name, c.count, format_time(c.total),
                           c.bytes > 0 ? fmt::format("  {}", format_bytes(c.bytes)) : std::string());
    }
    out += fmt::format("  top kernels (all steps, {} kernel/memcpy names, {} in total):\n", s.kernels.size(),
                       format_time(total));
    out += fmt::format("    {:>11} {:>6} {:>6} {:>10}  {}\n", "total", "share", "count", "mean", "name");
    for (std::size_t i = 0; i < s.kernels.size() && static_cast<int>(i) < top; ++i) {
      const auto& k = s.kernels[i];
      out += fmt::format("    {:>11} {:>5.1f}% {:>6} {:>10}  {}\n", format_time(k.total),
                         total > 0 ? 100 * k.total / total : 0.0, k.count, format_time(k.total / k.count),
                         short_name(k.name, 90));
    }
    out += "\n";
  }
  return out;
}

std::string render_trace_stats_json(const std::vector<TraceStats>& stats, const std::vector<std::string>& inputs,
                                    int top) {
  json j;
  j["context"] = context("trace-stats", inputs);
  json traces = json::array();
  for (const auto& s : stats) {
    json t;
    t["file"] = s.file;
    t["rank"] = s.rank ? json(*s.rank) : json(nullptr);
    t["world_size"] = s.world_size ? json(*s.world_size) : json(nullptr);
    t["gpu"] = s.gpu;
    t["device"] = s.device;
    t["clock_offset_s"] = s.clock_offset;
    t["aligned_collectives"] = s.aligned_collectives;
    json steps = json::array();
    for (const auto& st : s.steps) {
      steps.push_back({{"step", st.step},
                       {"start_s", st.start},
                       {"wall_s", st.wall},
                       {"wall_kind", st.wall_is_period ? "start_to_start" : "step_span"},
                       {"gpu_busy_s", st.gpu_busy},
                       {"compute_busy_s", st.compute_busy},
                       {"nccl_busy_s", st.nccl_busy},
                       {"exposed_communication_s", st.exposed_communication},
                       {"memcpy_busy_s", st.memcpy_busy},
                       {"kernel_sum_s", st.kernel_sum},
                       {"kernels", st.kernels},
                       {"nccl_kernels", st.nccl_kernels},
                       {"memcpys", st.memcpys}});
    }
    t["steps"] = steps;
    json colls = json::array();
    for (const auto& c : s.collectives)
      colls.push_back({{"name", c.name}, {"count", c.count}, {"time_s", c.total}, {"bytes", c.bytes}});
    t["collectives"] = colls;
    json kernels = json::array();
    for (std::size_t i = 0; i < s.kernels.size() && static_cast<int>(i) < top; ++i) {
      const auto& k = s.kernels[i];
      kernels.push_back({{"name", k.name}, {"count", k.count}, {"total_s", k.total}, {"nccl", k.nccl}});
    }
    t["top_kernels"] = kernels;
    traces.push_back(std::move(t));
  }
  j["traces"] = traces;
  return json_text(j, 2) + "\n";
}

std::string render_replay_text(const ReplayResult& r) {
  const ReplayGraph& g = *r.replay;
  std::string out;
  const auto& first = g.ranks.front();
  const std::string steps = first.step_numbers.size() == 1
                                ? step_name(first.step_numbers.front())
                                : fmt::format("{}..{}", step_name(first.step_numbers.front()),
                                              step_name(first.step_numbers.back()));
  out += fmt::format("perfcast replay: {} rank{}, step{} {}, {}\n", g.ranks.size(), g.ranks.size() > 1 ? "s" : "",
                     first.step_numbers.size() > 1 ? "s" : "", steps, g.gpu);
  const bool predicted = r.options.kernels == ReplayKernels::kPredicted;
  out += fmt::format("  kernels: {}; collectives: {}; host: {}{}\n\n",
                     predicted ? fmt::format("predicted ({}) on {} where the trace gives the shape",
                                             r.options.calibration ? "calibrated by " + r.options.calibration_file + " where it covers the family, else spec-derived" : "spec-derived",
                                             r.system)
                               : "measured durations",
                     collectives_text(r),
                     r.options.host == ReplayHostModel::kMeasured ? "measured per op" : "mean per op",
                     r.options.infer_waits ? "; waits inferred from the measurement" : "");
  out += fmt::format("{:>5} {:>8} {:>12} {:>12} {:>9}\n", "rank", "step", "measured", "simulated", "error");
  for (const auto& rr : r.ranks) {
    for (const auto& s : rr.steps)
      out += fmt::format("{:>5} {:>8} {:>12} {:>12} {:>9}\n", rr.rank, step_name(s.step), format_time(s.measured),
                         format_time(s.simulated), percent(s.error()));
    if (rr.steps.size() > 1)
      out += fmt::format("{:>5} {:>8} {:>12} {:>12} {:>9}\n", rr.rank, "mean", format_time(rr.measured),
                         format_time(rr.simulated), percent(rr.error()));
  }
  out += fmt::format("\n|error| over ranks: geomean {:.2f}%, max {:.2f}%\n", 100 * r.geomean_abs_error,
                     100 * r.max_abs_error);
  if (r.step_count > static_cast<int>(r.ranks.size()))
    out += fmt::format("|error| over {} steps: geomean {:.2f}%, max {:.2f}%\n", r.step_count,
                       100 * r.step_geomean_abs_error, 100 * r.step_max_abs_error);
  out += fmt::format("\n{:>5} {:>8} {:>6} {:>6} {:>6} {:>8} {:>8} {:>11} {:>11} {:>11} {:>11}  lanes\n", "rank", "gpu ops",
                     "colls", "syncs", "joins", "stepped", "inferred", "start", "launch call", "blocked", "queue wait");
  for (const auto& i : g.ranks) {
    std::string lanes;
    for (const auto& l : i.lanes) lanes += (lanes.empty() ? "" : ", ") + l;
    out += fmt::format("{:>5} {:>8} {:>6} {:>6} {:>6} {:>8} {:>8} {:>11} {:>11} {:>11} {:>11}  {}\n", i.rank, i.gpu_ops,
                       i.collectives, i.host_syncs, i.joins, i.stepped_back, i.inferred, format_time(i.start_offset),
                       format_time(i.launch_call_mean), format_time(i.blocked), format_time(i.queue_blocked), lanes);
  }
  if (!r.options.evaluate.empty() && r.selected_steps > 0)
    out += fmt::format("selected ({}): {} rank-steps, mean step measured {}, simulated {}, error {}\n",
                       r.options.evaluate.describe(), r.selected_steps, format_time(r.selected_measured / r.selected_steps),
                       format_time(r.selected_simulated / r.selected_steps), percent(r.selected_error()));
  if (predicted) {
    out += fmt::format("\npredicted kernels against the trace ({} kernels predicted; {} kept their measured time: {})\n",
                       r.predicted_kernels, r.unrecognized, format_time(r.unrecognized_time));
    if (!r.options.evaluate.empty())
      out += fmt::format("family errors over {} (collectives: selected by step)\n", r.options.evaluate.describe());
    out += fmt::format("{:<12} {:>6} {:>16} {:>12} {:>12} {:>9}\n", "family", "ops", "geomean |error|", "measured",
                       "predicted", "bias");
    for (const auto& f : r.families)
      out += fmt::format("{:<12} {:>6} {:>15.2f}% {:>12} {:>12} {:>9}\n", f.name, f.count, 100 * f.geomean_abs_error,
                         format_time(f.measured), format_time(f.predicted), percent(f.bias));
  }
  return out;
}

std::string render_replay_json(const ReplayResult& r, const std::vector<std::string>& inputs) {
  const ReplayGraph& g = *r.replay;
  json j;
  j["context"] = context("replay", inputs);
  j["context"]["gpu"] = g.gpu;
  const bool predicted = r.options.kernels == ReplayKernels::kPredicted;
  j["context"]["kernels"] = predicted ? "predicted" : "measured";
  if (predicted) {
    j["context"]["system"] = r.system;
    j["context"]["kernel_calibration"] = r.options.calibration ? json(r.options.calibration_file) : json();
  }
  if (!r.options.evaluate.empty()) {
    j["context"]["evaluated"] = r.options.evaluate.describe();
    j["selected"] = {{"steps", r.selected_steps}, {"measured_s", r.selected_measured}, {"simulated_s", r.selected_simulated},
                     {"error", r.selected_error()}};
  }
  j["context"]["host_model"] = r.options.host == ReplayHostModel::kMeasured ? "measured" : "mean";
  j["context"]["collective_duration"] = collectives_text(r);
  j["context"]["infer_waits"] = r.options.infer_waits;
  json ranks = json::array();
  for (std::size_t i = 0; i < r.ranks.size(); ++i) {
    const auto& rr = r.ranks[i];
    const auto& info = g.ranks[i];
    json steps = json::array();
    for (const auto& s : rr.steps)
      steps.push_back({{"step", s.step}, {"measured_s", s.measured}, {"simulated_s", s.simulated}, {"error", s.error()}});
    ranks.push_back({{"rank", rr.rank},
                     {"file", info.file},
                     {"measured_s", rr.measured},
                     {"simulated_s", rr.simulated},
                     {"error", rr.error()},
                     {"steps", steps},
                     {"graph",
                      {{"gpu_ops", info.gpu_ops},
                       {"collectives", info.collectives},
                       {"host_syncs", info.host_syncs},
                       {"joins", info.joins},
                       {"dependencies_stepped_back", info.stepped_back},
                       {"dependencies_inferred", info.inferred},
                       {"start_offset_s", info.start_offset},
                       {"host_time_s", info.host_time},
                       {"launch_call_mean_s", info.launch_call_mean},
                       {"blocked_s", info.blocked},
                       {"queue_blocked_s", info.queue_blocked},
                       {"queue_blocked_calls", info.queue_blocked_calls},
                       {"lanes", info.lanes}}}});
  }
  j["ranks"] = ranks;
  json families = json::array();
  for (const auto& f : r.families)
    families.push_back({{"name", f.name},
                        {"count", f.count},
                        {"geomean_abs_error", f.geomean_abs_error},
                        {"bias", f.bias},
                        {"measured_s", f.measured},
                        {"predicted_s", f.predicted}});
  j["families"] = families;
  if (predicted) {
    j["predicted_kernels"] = r.predicted_kernels;
    j["unrecognized_kernels"] = r.unrecognized;
    j["unrecognized_time_s"] = r.unrecognized_time;
  }
  j["geomean_abs_error"] = r.geomean_abs_error;
  j["max_abs_error"] = r.max_abs_error;
  j["step_geomean_abs_error"] = r.step_geomean_abs_error;
  j["step_max_abs_error"] = r.step_max_abs_error;
  return json_text(j, 2) + "\n";
}

}  // namespace perfcast

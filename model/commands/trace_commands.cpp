#include "model/commands/trace_commands.hpp"

#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/units.hpp"
#include "model/commands/command_context.hpp"
#include "model/traces/execution_trace.hpp"
#include "model/traces/kineto_trace.hpp"
#include "model/traces/trace_measurements.hpp"
#include "model/traces/trace_reports.hpp"
#include "model/traces/trace_stats.hpp"
#include "model/traces/trace_workload.hpp"
#include "predictors/kernel_calibration.hpp"
#include "predictors/measurement.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {

TraceStatsOutcome run_trace_stats(const TraceStatsRequest& req) {
  if (req.top < 0 || req.top > 100000) throw ConfigError("--top", std::to_string(req.top), "expected kernels per trace in [0, 100000]");
  if (req.files.empty()) throw ConfigError("trace-stats", "", "expected at least one Kineto trace");
  const auto traces = load_kineto_traces(req.files);
  const auto stats = compute_trace_stats(traces);
  return {render_trace_stats_text(stats, req.top), render_trace_stats_json(stats, req.files, req.top)};
}

ImportOutcome run_import(const ImportRequest& req) {
  if (req.kineto.empty()) throw ConfigError("--kineto", "", "at least one Kineto trace is needed");
  auto traces = load_kineto_traces(req.kineto);
  std::vector<ExecutionTrace> ets;
  std::vector<const ExecutionTrace*> et_of_trace;
  if (!req.et.empty()) {
    ets = load_execution_traces(req.et);
    et_of_trace = link_execution_traces(ets, traces);
  }
  ImportStats stats;
  TraceWorkload w = import_trace_workload(traces, et_of_trace, req.name.empty() ? "imported " + traces[0].file : req.name, stats);
  w.batch = req.batch;
  nlohmann::json reasons = nlohmann::json::array();
  for (const auto& r : stats.reasons)
    reasons.push_back({{"reason", r.reason}, {"kernels", r.count}, {"time", format_time(r.time)}});
  nlohmann::json source = {{"kineto", req.kineto},
                           {"gpu", traces[0].device_name()},
                           {"gpu_ops", stats.ops},
                           {"recognized", stats.recognized},
                           {"unrecognized", stats.unrecognized},
                           {"recognized_time", format_time(stats.recognized_time)},
                           {"unrecognized_time", format_time(stats.unrecognized_time)},
                           {"unrecognized_by_reason", reasons}};
  if (!req.et.empty()) {
    source["et"] = req.et;
    source["et_nodes_linked"] = stats.et_linked;
  }
  ImportOutcome out;
  out.workload = trace_workload_to_json(w, source);
  const Seconds total = stats.recognized_time + stats.unrecognized_time;
  std::string& t = out.text;
  t += fmt::format("perfcast import: {} rank{} of {}, {} ops", w.graph.ranks.size(), w.graph.ranks.size() > 1 ? "s" : "",
                   traces[0].device_name(), stats.ops);
  t += "\n";
  t += fmt::format("  recognized (predicted on the target system): {} ops, {} of measured GPU time ({:.1f}%)\n", stats.recognized,
                   format_time(stats.recognized_time), total > 0 ? 100 * stats.recognized_time / total : 0.0);
  t += fmt::format("  not recognized (keep their measured duration): {} ops, {} ({:.1f}%)\n", stats.unrecognized,
                   format_time(stats.unrecognized_time), total > 0 ? 100 * stats.unrecognized_time / total : 0.0);
  for (std::size_t i = 0; i < stats.reasons.size() && i < 8; ++i)
    t += fmt::format("    {:>6} {:>11}  {}\n", stats.reasons[i].count, format_time(stats.reasons[i].time), stats.reasons[i].reason);
  if (!stats.et_linked.empty()) {
    std::string linked;
    for (int n : stats.et_linked) linked += (linked.empty() ? "" : ", ") + std::to_string(n);
    t += fmt::format("  execution-trace nodes linked to Kineto ops per rank: {}\n", linked);
  }
  return out;
}

ReplayOutcome run_replay(ReplayRequest req) {
  if (req.kineto.empty()) throw ConfigError("--kineto", "", "at least one Kineto trace is needed");
  ReplayOutcome out;
  ReplayOptions opts = req.options;
  if (!req.ranks.empty()) opts.evaluate.ranks = parse_ranges(req.ranks, "--ranks");
  if (!req.steps.empty()) opts.evaluate.steps = parse_ranges(req.steps, "--steps");
  const auto traces = load_kineto_traces(req.kineto);
  std::optional<SystemSpec> system;
  std::optional<KernelCalibration> calibration;
  if (opts.kernels == ReplayKernels::kPredicted) {
    if (req.system.empty()) throw ConfigError("--system", "", "--kernels predicted needs --system FILE (the machine the trace ran on)");
    system = load_system(req.system);
    opts.system = &*system;
    if (!req.calibration.empty()) {
      calibration = parse_kernel_calibration(load_json_file(req.calibration));
      // Our own microbenchmarks record the CUDA device name, which may differ from the
      // system file's; a mismatch is worth a word, not a refusal.
      if (calibration->gpu != system->gpu.name)
        out.warnings.push_back(fmt::format("{} was measured on \"{}\"; the system's GPU is \"{}\" ({})", req.calibration,
                                           calibration->gpu, system->gpu.name, req.system));
      opts.calibration = &*calibration;
      opts.calibration_file = req.calibration;
    }
  } else if (!req.system.empty()) {
    throw ConfigError("--system", req.system, "--system is used only with --kernels predicted");
  } else if (!req.calibration.empty()) {
    throw ConfigError("--calibration", req.calibration, "--calibration is used only with --kernels predicted");
  }
  std::vector<ExecutionTrace> ets;
  if (!req.et.empty()) {
    ets = load_execution_traces(req.et);
    opts.execution_traces = link_execution_traces(ets, traces);
  }
  if (!req.measurements_out.empty()) {
    std::size_t count = 0;
    for (std::size_t i = 0; i < traces.size(); ++i) {
      const int rank = replay_rank(traces, i);  // the numbering --ranks and the family errors use
      for (const auto& m : trace_measurements(traces[i], rank, opts.execution_traces.empty() ? nullptr : opts.execution_traces[i],
                                              opts.evaluate)) {
        out.measurements += measurement_to_jsonl(m);
        count++;
      }
    }
    if (count == 0)
      throw ConfigError("--measurements-out", req.measurements_out,
                        fmt::format("no recognized op of a calibratable family in the selected {}; nothing to write",
                                    opts.evaluate.describe()));
  }
  const ReplayResult r = replay_traces(traces, opts);
  std::vector<std::string> inputs = req.kineto;
  inputs.insert(inputs.end(), req.et.begin(), req.et.end());
  if (system) inputs.push_back(req.system);
  if (calibration) inputs.push_back(req.calibration);
  out.json = render_replay_json(r, inputs);
  out.text = render_replay_text(r);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& rr : r.ranks)
    for (const auto& s : rr.steps)
      rows.push_back({{"rank", rr.rank}, {"step", s.step}, {"measured_s", s.measured}, {"simulated_s", s.simulated},
                      {"error", s.error()}});
  out.csv = json_rows_to_csv(rows, {"rank", "step", "measured_s", "simulated_s", "error"});
  return out;
}

}  // namespace perfcast

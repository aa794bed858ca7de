#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/log.hpp"
#include "core/output_files.hpp"
#include "core/deadline.hpp"
#include "model/commands/command_context.hpp"
#include "model/predict/predict.hpp"
#include "model/predict/predict_grid.hpp"
#include "model/report/grid_report.hpp"
#include "model/report/report.hpp"

namespace perfcast::cli {
namespace {

struct PredictOptions {
  PredictRequest req;
  std::string json_out, trace_out, csv_out;
  std::string trace_format = "chrome";
  ChromeTraceOptions trace;
  int top = 8;
  bool all_micro_batches = false;  ///< --all-micro-batches
  std::vector<std::string> compare, sweep;
  unsigned threads = 0;
  std::string timeout;  ///< --timeout, a duration ("30s"); empty: none
};

int run_grid_command(const PredictOptions& o) {
  std::vector<GridAxis> axes;
  for (const auto& c : o.compare) {
    GridAxis a = parse_grid_axis(c, "--compare");
    if (a.key != "system" && a.key != "workload" && a.key != "plan")
      throw ConfigError("--compare", c, "expected system=, workload= or plan= followed by files (use --sweep for a value)");
    axes.push_back(std::move(a));
  }
  for (const auto& s : o.sweep) axes.push_back(parse_grid_axis(s, "--sweep"));
  const std::vector<GridPoint> points = expand_grid(o.req, axes);
  const double timeout_s = o.timeout.empty() ? 0.0 : parse_duration_option("--timeout", o.timeout);
  const auto results = run_grid(points, o.threads, draw_progress, timeout_s);
  const auto not_run = static_cast<std::size_t>(std::count(results.begin(), results.end(), nullptr));
  if (not_run > 0)
    log().warn("stopped by --timeout {}: {} of {} points predicted, {} not run", o.timeout, points.size() - not_run,
               points.size(), not_run);
  std::vector<std::pair<std::string, std::string>> files;
  if (!o.json_out.empty()) files.emplace_back(o.json_out, render_grid_json(points, results));
  if (!o.csv_out.empty()) files.emplace_back(o.csv_out, render_grid_csv(points, results));
  write_outputs(files);
  if (o.json_out != "-" && o.csv_out != "-") std::cout << render_grid_text(points, results);
  return 0;
}

}  // namespace

Action add_predict(CLI::App& app) {
  auto* cmd = app.add_subcommand("predict", "Predict the per-iteration training time of a workload on a system");
  auto o = std::make_shared<PredictOptions>();
  auto& req = o->req;
  cmd->add_option("--system", req.system, "system file (configs/systems/*.json)")->required();
  cmd->add_option("--workload", req.workload, "workload file (configs/workloads/*.json)")->required();
  cmd->add_option_function<std::string>("--plan", [o](const std::string& p) { o->req.plan = p; },
                                        "sharding plan file (TorchRec ParameterSharding fields); default: table-wise round-robin");
  cmd->add_option_function<std::string>(
      "--calibration",
      [o](const std::string& f) {
        // Absolute, so that the system file's folder does not prefix it.
        o->req.overrides.insert(o->req.overrides.begin(),
                                "system.kernel_calibration=\"" + std::filesystem::absolute(f).lexically_normal().string() + "\"");
      },
      "kernel calibration file to use (default: configs/calibration/<gpu>.json beside the system file's folder)");
  cmd->add_option("--set", req.overrides,
                  "what-if override PATH=VALUE, e.g. workload.batch_size=4096, system.nodes=2, system.gpu=h200.json, "
                  "workload.embedding.tables[0].rows=2000000 (repeatable)");
  cmd->add_option("--compare", o->compare,
                  "KEY=FILE1,FILE2,... with KEY system, workload or plan: one prediction per file, one table (repeatable: a grid)");
  cmd->add_option("--sweep", o->sweep,
                  "PATH=V1,V2,... a what-if override path (as --set) and its values: one prediction per value "
                  "(repeatable: a grid, the last sweep varying fastest)");
  cmd->add_option("--timeout", o->timeout,
                  "wall-clock limit (e.g. 30s). With --compare / --sweep: points not finished by then are reported as "
                  "not run; a single prediction not finished by then exits 3, nothing written");
  cmd->add_option("--threads", o->threads, "threads for --compare / --sweep (default: all cores)")->check(CLI::Range(1, 1024));
  cmd->add_option("--json", o->json_out, "write the result as JSON to FILE, or - for standard output");
  cmd->add_option("--csv", o->csv_out,
                  "write CSV to FILE, or - for standard output: one row per rank, or per point with --compare / --sweep");
  cmd->add_option("--trace", o->trace_out,
                  "write the simulated timeline as a Chrome trace (Perfetto) to FILE, streamed; gzip when FILE ends in .gz");
  cmd->add_option("--trace-format", o->trace_format,
                  "chrome (one Perfetto / chrome://tracing file, default) or kineto (--trace names a folder: one PyTorch "
                  "profiler trace per rank, rank<N>.json, for HolisticTraceAnalysis or perfcast trace-stats)")
      ->check(CLI::IsMember({"chrome", "kineto"}));
  cmd->add_option("--trace-ranks", o->trace.ranks, "ranks the trace keeps, e.g. 0,8 (default all)")->delimiter(',');
  cmd->add_option("--trace-iterations", o->trace.iterations, "simulated iterations the trace keeps, e.g. 2 (default all)")
      ->delimiter(',');
  cmd->add_option("--iterations", req.iterations, "iterations to simulate; the last period is reported")
      ->check(CLI::Range(2, 100));
  cmd->add_option("--top", o->top, "critical-path op types to list")->check(CLI::Range(0, 1000));
  cmd->add_flag("--all-micro-batches", o->all_micro_batches,
                "Transformers: simulate every micro-batch (default: from 2 x (M0 + 2 steps) micro-batches, M0 = "
                "max(16, 2 x pp x vp), e.g. 36 at pp 8 and 68 at pp 16, three counts are simulated and the steady "
                "state extrapolated; always with --trace)");
  return [o]() {
    // A trace draws every simulated event, so every micro-batch is simulated for it.
    if (o->all_micro_batches || !o->trace_out.empty()) o->req.steady_state.enabled = false;
    if (!o->compare.empty() || !o->sweep.empty()) {
      if (!o->trace_out.empty()) throw ConfigError("--trace", o->trace_out, "a trace is written for a single prediction, not with --compare / --sweep");
      return run_grid_command(*o);
    }
    // A single prediction is cut between two simulation steps at the limit (exit 3, cli/main.cpp).
    const ScopedDeadline limit(o->timeout.empty() ? 0.0 : parse_duration_option("--timeout", o->timeout), "--timeout " + o->timeout);
    const auto p = predict(o->req);
    std::vector<std::pair<std::string, std::string>> files;
    if (!o->json_out.empty()) files.emplace_back(o->json_out, render_json(*p));
    if (!o->csv_out.empty()) files.emplace_back(o->csv_out, render_ranks_csv(*p));
    const std::string text = render_text(*p, o->top);
    // The trace first: its filters and every output target are checked before any file is written.
    if (!o->trace_out.empty()) {
      check_trace_options(*p, o->trace);
      std::vector<std::string> targets;
      if (o->trace_format != "kineto") targets.push_back(o->trace_out);  // kineto: a folder, checked by its writer
      for (const auto& f : files) targets.push_back(f.first);
      check_output_targets(targets);
      if (o->trace_format == "kineto") write_kineto_traces(*p, o->trace_out, o->trace);
      else write_chrome_trace(*p, o->trace_out, o->trace);
    }
    write_outputs(files);
    // Standard output carries one document: the text report only when no output is "-".
    if (o->json_out != "-" && o->csv_out != "-" && o->trace_out != "-") {
      std::cout << text;
    } else {
      for (const auto& w : p->warnings) log().warn("{}", w);  // the text report, which lists them, is not shown
    }
    return 0;
  };
}

}  // namespace perfcast::cli

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_reader.hpp"
#include "core/json_text.hpp"
#include "core/run_context.hpp"
#include "core/units.hpp"
#include "model/commands/calibrate_command.hpp"
#include "model/predict/runtime_fit.hpp"
#include "model/predict/runtime_profile.hpp"

namespace perfcast {
namespace {

/// The profile format's bound on a held-out error (runtime_profile.cpp): a fit off by more
/// on the runs it reports is not a host cost the runs share.
constexpr double kMaxReportedError = 10.0;

/// `calibrate runtime --json`: the fit, its errors and every run (schema perfcast.runtime_fit_result).
std::string runtime_fit_json(const RuntimeFit& f, const CalibrateRuntimeRequest& a, bool written) {
  auto or_null = [](double e) { return e >= 0 ? nlohmann::json(e) : nlohmann::json(); };
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& r : f.rows) {
    runs.push_back({{"line", r.run.line}, {"workload", r.run.workload}, {"overrides", r.run.overrides},
                    {"split", r.run.heldout ? "heldout" : "fit"}, {"measured_s", r.run.measured}, {"base_s", r.base},
                    {"fitted_s", r.fitted}});
  }
  nlohmann::json context = command_context("calibrate runtime", {a.system, a.measurements});
  context.update({{"system", a.system}, {"measurements", a.measurements}, {"base_runtime", f.base_runtime}, {"base_file", f.base_file}});
  nlohmann::json j = {
      {"context", context},
      {"op_overhead_s", f.op_overhead},
      {"fit_runs", f.fit_runs},
      {"heldout_runs", f.heldout_runs},
      {"fit_mean_abs_error", f.fit_mean_abs_error},
      {"fit_geomean_abs_error", f.fit_geomean_abs_error},
      {"host_share", f.host_share},
      {"heldout_geomean_abs_error", or_null(f.heldout_geomean_abs_error)},
      {"base_heldout_geomean_abs_error", or_null(f.base_heldout_geomean_abs_error)},
      {"written", written ? nlohmann::json(a.out) : nlohmann::json()},
      {"runs", runs}};
  return json_text(j, 2) + "\n";
}

/// The report: the fitted host cost, then every run with its base and fitted error.
std::string runtime_fit_text(const RuntimeFit& f) {
  std::string text = fmt::format("runtime fit: op_overhead {:.1f} us over {} ({} fit runs, {} held out)\n", f.op_overhead * 1e6,
                                 f.base_runtime, f.fit_runs, f.heldout_runs);
  text += fmt::format("{:>5} {:<8} {:>12} {:>12} {:>8} {:>12} {:>8}  {}\n", "line", "split", "measured", f.base_runtime.substr(0, 12),
                      "error", "fitted", "error", "workload [set]");
  for (const auto& r : f.rows) {
    text += fmt::format("{:>5} {:<8} {:>12} {:>12} {:>+7.2f}% {:>12} {:>+7.2f}%  {}{}\n", r.run.line, r.run.heldout ? "heldout" : "fit",
                        format_time(r.run.measured), format_time(r.base), (r.base / r.run.measured - 1) * 100,
                        format_time(r.fitted), (r.fitted / r.run.measured - 1) * 100,
                        std::filesystem::path(r.run.workload).filename().string(),
                        r.run.overrides.empty() ? "" : fmt::format(" [{}]", fmt::join(r.run.overrides, "; ")));
  }
  text += fmt::format("fit runs: mean |error| {:.2f}%, geomean {:.2f}%; the host cost adds {:.0f}% of their fitted time\n",
                      f.fit_mean_abs_error * 100, f.fit_geomean_abs_error * 100, f.host_share * 100);
  return text;
}

}  // namespace

CalibrateOutcome calibrate_runtime(const CalibrateRuntimeRequest& a) {
  const std::filesystem::path out(a.out);
  const std::string name = out.stem().string();
  if (out.extension() != ".json" || !is_runtime_name(name))
    throw ConfigError("--out", a.out, "expected NAME.json: the profile's file name is its runtime name (letters, digits, _ and -)");
  if (!out.parent_path().empty() && !std::filesystem::is_directory(out.parent_path()))
    throw ConfigError("--out", a.out, fmt::format("no folder {} to write the profile in", out.parent_path().string()));
  const std::vector<StepMeasurement> runs = read_step_measurements(a.measurements);
  CalibrateOutcome outcome;
  outcome.out = a.out;
  RuntimeFit f;
  try {
    f = fit_runtime_op_overhead(a.system, runs, a.base, a.measurements);
  } catch (const FitRefused& e) {
    outcome.errors.push_back(fmt::format("{}: {}; nothing written", a.measurements, e.what()));
    return outcome;
  }
  const double reported = f.heldout_runs > 0 ? f.heldout_geomean_abs_error : f.fit_geomean_abs_error;
  if (!(reported <= kMaxReportedError)) {
    outcome.errors.push_back(fmt::format("{}: the fit is off by {:.0f}% on the runs it reports: not a host cost the runs share; "
                                         "nothing written",
                                         a.measurements, reported * 100));
    return outcome;
  }
  outcome.text = runtime_fit_text(f);
  if (f.host_share < kLowHostShare)
    outcome.warnings.push_back(fmt::format(
        "the host cost adds only {:.0f}% of the fit runs' predicted time: they are mostly GPU-bound, and the fitted op_overhead "
        "may stand for kernels slower than predicted; calibrate the kernels first (perfcast calibrate kernels)",
        f.host_share * 100));
  bool refused = false;
  if (f.heldout_runs > 0) {
    outcome.text += fmt::format("held-out runs: geomean |error| {:.2f}% (with {} as it is: {:.2f}%)\n", f.heldout_geomean_abs_error * 100,
                                f.base_runtime, f.base_heldout_geomean_abs_error * 100);
    refused = f.heldout_geomean_abs_error > f.base_heldout_geomean_abs_error && !a.force;
    if (refused)
      outcome.errors.push_back(fmt::format("the fit is worse than {} on the held-out runs ({:.2f}% against {:.2f}%); not written "
                                           "(--force writes it)",
                                           f.base_runtime, f.heldout_geomean_abs_error * 100,
                                           f.base_heldout_geomean_abs_error * 100));
  } else {
    outcome.text += "held-out runs: none (split every third run, or a split column, to check the fit)\n";
  }
  outcome.json = runtime_fit_json(f, a, !refused);
  if (!refused) {
    outcome.content = fitted_runtime_json(f, a.system, name, a.measurements);
    outcome.usage = " (use it with --set runtime=" + name + " on workloads beside its folder)";
  }
  return outcome;
}

}  // namespace perfcast

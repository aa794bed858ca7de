/// \file runtime_fit.cpp
/// Fitting a runtime profile's op_overhead to measured iteration times (runtime_fit.hpp).
///
/// CPU scale: the fit sets `runtime.host.op_overhead`, which is on the base profile's CPU
/// (scaled to the system's by fit.host_speed / cpu.host_speed when the base profile names
/// its CPU, runtime_profile.hpp). The written profile keeps the base's CPU in that case, so
/// it predicts on `system` exactly what the fit predicted; a base without a CPU (not
/// scaled) gets the system's CPU, so that the profile scales on other CPUs.

#include "model/predict/runtime_fit.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/input_file.hpp"
#include "core/csv_record.hpp"
#include "core/error_stats.hpp"
#include "core/json_reader.hpp"
#include "model/predict/predict.hpp"
#include "core/json_text.hpp"

namespace perfcast {
namespace {

/// `field` of a CSV line resolved against the CSV's folder (absolute paths unchanged).
std::string beside(const std::string& csv, const std::string& field) {
  const std::filesystem::path p(field);
  return p.is_absolute() ? field : (std::filesystem::path(csv).parent_path() / p).lexically_normal().string();
}

/// "a=1; b=2" -> {"a=1", "b=2"}.
std::vector<std::string> split_overrides(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = text.find(';', start);
    const std::string item = trim_blanks(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (!item.empty()) out.push_back(item);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

/// The measured time: a duration with its unit, or plain seconds.
Seconds parse_measured(const std::string& text, const std::string& file, int line) {
  const std::string where = fmt::format("line {}", line);
  double v = 0;
  try {
    std::size_t used = 0;
    v = std::stod(text, &used);
    if (used != text.size()) v = parse_quantity(text, Dimension::kTime);
  } catch (const std::exception&) {
    throw ConfigError(file, where, fmt::format("measured \"{}\": expected an iteration time, e.g. 16.7ms or 0.0167", text));
  }
  // From a microsecond: a measured iteration below that (1e-300 s) is a typo, and its
  // percentage errors would run to hundreds of digits.
  if (!std::isfinite(v) || v < 1e-6 || v > 86400)
    throw ConfigError(file, where, fmt::format("measured \"{}\": expected an iteration time from 1us to a day", text));
  return v;
}

double relative(Seconds predicted, Seconds measured) { return predicted / measured - 1; }

/// The grid's end: 10 ms of host time per op.
constexpr Seconds kMaxOpOverhead = 10e-3;

/// The runtime the workload of `run` names, or its kind's default. A workload that cannot
/// be read throws ConfigError naming the measurement file's line and the workload's fault.
std::string runtime_of(const StepMeasurement& run, const std::string& file) {
  try {
    JsonDocument doc = load_json_file(run.workload);
    if (!doc.root.is_object()) throw ConfigError(run.workload, "/", "expected a workload object");
    const auto model = doc.root.find("model");
    if (model != doc.root.end() && !model->is_string())
      throw ConfigError(run.workload, "/model", "expected \"dlrm\" or \"transformer\"");
    const std::optional<std::string> named = take_runtime_name(doc);
    return named.value_or(default_runtime(model != doc.root.end() && model->get<std::string>() == "transformer"));
  } catch (const std::exception& e) {
    throw ConfigError(file, fmt::format("line {}", run.line), fmt::format("cannot predict this run: {}", e.what()));
  }
}

/// Predicted iteration time of `run` on `system`, with `overrides` after the run's own.
Seconds predict_run(const std::string& system, const StepMeasurement& run, const std::vector<std::string>& overrides,
                    const std::string& file) {
  std::vector<std::string> all = run.overrides;
  all.insert(all.end(), overrides.begin(), overrides.end());
  try {
    std::optional<JsonDocument> plan;
    if (run.plan) plan = load_json_file(*run.plan);
    return predict_documents(load_json_file(system), load_json_file(run.workload), std::move(plan), all, 3)->timeline.iteration_time;
  } catch (const std::exception& e) {  // ConfigError, SimulationError, a JSON type error
    throw ConfigError(file, fmt::format("line {}", run.line), fmt::format("cannot predict this run: {}", e.what()));
  }
}

struct Scored {
  Seconds op_overhead = 0;
  double fit_mean = std::numeric_limits<double>::infinity();
};

/// Mean |error| over the fit runs with op_overhead `x`.
double fit_mean_error(const std::string& system, const std::vector<StepMeasurement>& runs, const std::vector<std::string>& base,
                      Seconds x, const std::string& file) {
  std::vector<std::string> o = base;
  o.push_back(fmt::format("runtime.host.op_overhead={}us", x * 1e6));
  double sum = 0;
  int n = 0;
  for (const auto& r : runs) {
    if (r.heldout) continue;
    sum += std::abs(relative(predict_run(system, r, o, file), r.measured));
    ++n;
  }
  return sum / n;
}

}  // namespace

std::vector<StepMeasurement> read_step_measurements(const std::string& path) {
  // Read whole within core/limits.hpp's bounds: a device (/dev/zero), a folder or an
  // oversized file is refused before anything is allocated for it.
  std::istringstream in(read_input_file(path));
  std::string line;
  if (!std::getline(in, line)) throw ConfigError(path, "line 1", "empty: expected a header with workload and measured");
  std::map<std::string, std::size_t> col;
  if (line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // a UTF-8 byte-order mark
  auto header = split_csv_record(line);
  for (auto& name : header) name = trim_blanks(name);
  col = csv_header_columns(header, path);
  for (const char* need : {"workload", "measured"})
    if (!col.count(need)) throw ConfigError(path, "line 1", fmt::format("no \"{}\" column (expected workload, measured[, set, plan, split])", need));
  for (const auto& [name, _] : col)
    if (name != "workload" && name != "measured" && name != "set" && name != "plan" && name != "split")
      throw ConfigError(path, "line 1", fmt::format("unknown column \"{}\" (expected workload, measured, set, plan, split)", name));
  std::vector<StepMeasurement> runs;
  int number = 1, unsplit = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line == "\r") continue;
    const auto f = split_csv_record(line);
    if (f.size() != header.size())
      throw ConfigError(path, fmt::format("line {}", number), fmt::format("{} fields, the header has {}", f.size(), header.size()));
    auto field = [&](const char* name) { return col.count(name) ? trim_blanks(f[col.at(name)]) : std::string(); };
    StepMeasurement r;
    r.line = number;
    if (field("workload").empty()) throw ConfigError(path, fmt::format("line {}", number), "empty workload");
    r.workload = beside(path, field("workload"));
    if (!field("plan").empty()) r.plan = beside(path, field("plan"));
    for (const std::string* f : {&r.workload, r.plan ? &*r.plan : nullptr})
      if (f && !input_path_status(*f).regular())
        throw ConfigError(path, fmt::format("line {}", number), fmt::format("cannot predict this run: no file {}", *f));
    r.overrides = split_overrides(field("set"));
    r.measured = parse_measured(field("measured"), path, number);
    const std::string split = field("split");
    if (split == "fit") r.heldout = false;
    else if (split == "heldout") r.heldout = true;
    else if (split.empty()) r.heldout = ++unsplit % 3 == 0;
    else throw ConfigError(path, fmt::format("line {}", number), fmt::format("split \"{}\": expected fit, heldout or empty", split));
    runs.push_back(std::move(r));
  }
  if (runs.empty()) throw ConfigError(path, "", "no measured runs");
  return runs;
}

RuntimeFit fit_runtime_op_overhead(const std::string& system, const std::vector<StepMeasurement>& runs,
                                   const std::string& base_runtime, const std::string& file) {
  RuntimeFit f;
  for (const auto& r : runs) (r.heldout ? f.heldout_runs : f.fit_runs)++;
  if (f.fit_runs == 0) throw ConfigError(file, "", "no run in the fit part (split): nothing to fit on");
  // The base profile: --base, else the runs' own (named in the workload, or the kind's
  // default), which must then be the same for every run.
  f.base_runtime = base_runtime;
  for (const auto& r : runs) {
    const std::string own = runtime_of(r, file);
    if (base_runtime.empty() && f.base_runtime.empty()) f.base_runtime = own;
    if (base_runtime.empty() && own != f.base_runtime)
      throw ConfigError(file, fmt::format("line {}", r.line),
                        fmt::format("this run's runtime is {}, line {}'s is {}: one profile is fitted to all runs; give --base NAME "
                                    "to fit them with one base",
                                    own, runs.front().line, f.base_runtime));
  }
  const auto profile = load_runtime_profile(f.base_runtime, runs.front().workload, true);
  f.base_file = profile->file;
  const std::vector<std::string> base{"runtime=" + f.base_runtime};

  // A log grid: 0, 8 points per decade from 1 us to 7.5 ms, and 10 ms; then 40 steps
  // between the best point's neighbours.
  std::vector<Seconds> grid{0};
  for (int k = 0; k <= 31; ++k) grid.push_back(std::pow(10.0, k / 8.0) * 1e-6);  // 1 us .. 7.5 ms
  grid.push_back(kMaxOpOverhead);
  Scored best;
  std::size_t best_index = 0;
  double worst = 0;
  for (std::size_t i = 0; i < grid.size(); ++i) {
    const double e = fit_mean_error(system, runs, base, grid[i], file);
    if (e < best.fit_mean) best = {grid[i], e}, best_index = i;
    worst = std::max(worst, e);
  }
  // Runs that do not depend on the host cost (GPU-bound) or that need more than the grid
  // holds: no fit to write.
  if (worst - best.fit_mean < 1e-3)
    throw FitRefused(fmt::format("the fit runs' mean |error| hardly changes between 0 and 10 ms per op ({:.2f}% to {:.2f}%): "
                                 "their iteration time does not depend on the host cost (GPU-bound), so it cannot be fitted from them",
                                 best.fit_mean * 100, worst * 100));
  if (best_index + 1 == grid.size())
    throw FitRefused(fmt::format("the best fit is the grid's end, 10 ms per op ({:.2f}% mean |error|): the runs are slower than "
                                 "host cost per op explains; check the workloads and the system",
                                 best.fit_mean * 100));
  // Two rounds of 40 steps, each between the neighbours of the best point so far: a
  // resolution of about 0.1% of the value.
  Seconds lo = grid[best_index == 0 ? 0 : best_index - 1], hi = grid[std::min(best_index + 1, grid.size() - 1)];
  for (int round = 0; round < 2; ++round) {
    const Seconds step = (hi - lo) / 40.0;
    for (int k = 1; k < 40; ++k) {
      const Seconds x = lo + step * k;
      const double e = fit_mean_error(system, runs, base, x, file);
      if (e < best.fit_mean) best = {x, e};
    }
    lo = std::max(0.0, best.op_overhead - step);
    hi = best.op_overhead + step;
  }
  f.op_overhead = std::round(best.op_overhead * 1e9) / 1e9;  // whole nanoseconds, as written

  std::vector<std::string> fitted = base;
  fitted.push_back(fmt::format("runtime.host.op_overhead={}us", f.op_overhead * 1e6));
  std::vector<std::string> no_host = base;
  no_host.push_back("runtime.host.op_overhead=0us");
  std::vector<double> fit_errors, held, held_base;
  double share_sum = 0;
  for (const auto& r : runs) {
    RuntimeFitRow row{r, predict_run(system, r, base, file), predict_run(system, r, fitted, file)};
    (r.heldout ? held : fit_errors).push_back(relative(row.fitted, r.measured));
    if (r.heldout) held_base.push_back(relative(row.base, r.measured));
    if (!r.heldout) share_sum += std::max(0.0, 1.0 - predict_run(system, r, no_host, file) / row.fitted);
    f.rows.push_back(std::move(row));
  }
  f.host_share = share_sum / f.fit_runs;
  const ErrorSummary s = summarize_errors(fit_errors);
  f.fit_mean_abs_error = s.mape;
  f.fit_geomean_abs_error = s.geomean_abs;
  if (!held.empty()) {
    f.heldout_geomean_abs_error = geomean_abs_error(held);
    f.base_heldout_geomean_abs_error = geomean_abs_error(held_base);
  }
  return f;
}

std::string fitted_runtime_json(const RuntimeFit& fit, const std::string& system, const std::string& name,
                                const std::string& file) {
  // Parsed again, keeping the base file's key order.
  std::ifstream in(fit.base_file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
  const nlohmann::ordered_json base_fit = j.contains("fit") ? j["fit"] : nlohmann::ordered_json();
  j["name"] = name;
  j["host"]["op_overhead"] = fmt::format("{:.3f}us", fit.op_overhead * 1e6);
  nlohmann::ordered_json f = {
      {"measured_on", fmt::format("{} ({} runs) on {}", file, fit.rows.size(), system)},
      {"method", fmt::format("perfcast calibrate runtime: op_overhead gridded (0, 1 us to 7.5 ms, 10 ms) on {} minimising mean |error| on "
                             "the {} fit runs ({:.2f}%)", fit.base_runtime, fit.fit_runs, fit.fit_mean_abs_error * 100)},
      {"heldout", fit.heldout_runs > 0 ? fmt::format("the {} held-out runs of the same file ({} before: {:.2f}%)", fit.heldout_runs,
                                                     fit.base_runtime, fit.base_heldout_geomean_abs_error * 100)
                                       : std::string("none: every run was in the fit (the error is the fit's)")},
      {"heldout_geomean_abs_error", fit.heldout_runs > 0 ? fit.heldout_geomean_abs_error : fit.fit_geomean_abs_error}};
  // The CPU scale of op_overhead (file comment): the base's CPU, else the system's.
  const SystemSpec s = parse_system(load_json_file(system));
  if (base_fit.is_object() && base_fit.contains("cpu")) {
    f["cpu"] = base_fit["cpu"];
    f["host_speed"] = base_fit["host_speed"];
  } else if (!s.cpu.model.empty() && s.cpu.host_speed > 0) {
    f["cpu"] = s.cpu.model;
    f["host_speed"] = s.cpu.host_speed;
  }
  j["fit"] = f;
  if (!j.contains("sources") || !j["sources"].is_object()) j["sources"] = nlohmann::ordered_json::object();
  j["sources"]["host"] = fmt::format("op_overhead fitted by perfcast calibrate runtime from {}; the other values are {}'s", file,
                                     fit.base_runtime);
  return json_text(j, 2) + "\n";
}

}  // namespace perfcast

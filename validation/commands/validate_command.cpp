#include "validation/commands/validate_command.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_text.hpp"
#include "core/run_context.hpp"
#include "core/units.hpp"
#include "core/utc_time.hpp"
#include "model/commands/command_context.hpp"
#include "perfcast/build_info.hpp"
#include "profiler/device_info.hpp"
#include "validation/executor.hpp"

namespace perfcast::validation {
namespace {

/// 12080 -> "12.8" (the CUDA runtime's and driver's 1000 * major + 10 * minor).
std::string cuda_version_text(int v) { return v > 0 ? fmt::format("{}.{}", v / 1000, (v % 1000) / 10) : ""; }

nlohmann::json summary_json(const ErrorSummary& s) {
  return {{"count", s.count}, {"geomean_abs_error", s.geomean_abs}, {"mape", s.mape}, {"max_abs_error", s.max_abs},
          {"mean_error", s.mean_signed}};
}

HarnessOptions harness_options(const ValidateRequest& a) {
  HarnessOptions options;
  options.seed = a.seed;
  options.configs = a.configs;
  options.first_index = a.first;
  options.warmup = a.warmup;
  options.iterations = a.iterations;
  options.generator.max_rows = a.max_rows;
  options.generator.interaction = a.interaction == "dot" ? Interaction::kDot : Interaction::kCat;
  const auto dtype = dtype_from_name(a.mlp_dtype);
  if (!dtype) throw ConfigError("--mlp-dtype", a.mlp_dtype, "expected fp32, tf32, bf16 or fp16");
  options.generator.mlp_dtype = *dtype;
  return options;
}

/// The reference executor measuring one generated config.
MeasureFn executor_measure(const ValidateRequest& a, const SystemSpec& system) {
  return [&a, &system](const GeneratedConfig& c) {
    ExecutorOptions eo;
    eo.warmup = a.warmup;
    eo.iterations = a.iterations;
    eo.seed = mix_seed(c.seed ^ static_cast<std::uint64_t>(c.index));
    const auto r = run_dlrm(system, c.spec, c.plan, eo);
    Measured m;
    m.median_s = r.median_s;
    m.p10_s = r.p10_s;
    m.p90_s = r.p90_s;
    m.world = r.world;
    m.timer = r.timer;
    m.first_loss = r.first_loss;
    m.last_loss = r.last_loss;
    if (!r.devices.empty()) {
      m.gpu = r.devices.front().name;
      m.driver = cuda_version_text(r.devices.front().driver_version);
      m.cuda = cuda_version_text(r.devices.front().runtime_version);
    }
    return m;
  };
}

}  // namespace

ValidateOutcome summarize_validation(const std::vector<std::string>& files) {
  const std::vector<std::filesystem::path> paths(files.begin(), files.end());
  const auto summaries = summarize_result_files(paths);
  nlohmann::json j = {{"context", command_context("validate --summarize", files)}, {"files", nlohmann::json::array()}};
  nlohmann::json rows = nlohmann::json::array();
  std::vector<double> all;
  for (const auto& f : summaries) {
    j["files"].push_back({{"file", f.file}, {"lines", f.lines}, {"failed", f.failed}, {"gpus", f.gpus}, {"systems", f.systems},
                          {"summary", summary_json(f.summary)}});
    nlohmann::json row = {{"file", f.file}, {"lines", f.lines}, {"failed", f.failed}};
    row.update(summary_json(f.summary));
    rows.push_back(row);
    all.insert(all.end(), f.errors.begin(), f.errors.end());
  }
  j["summary"] = summary_json(summarize_errors(all));
  return {render_file_summaries(summaries), json_text(j, 2) + "\n", json_rows_to_csv(rows), 0};
}

ValidateOutcome compare_validation(const std::string& system_file, const std::vector<std::string>& files) {
  if (system_file.empty()) throw ConfigError("--system", "", "--compare needs --system (a one-GPU system file)");
  const SystemSpec system = load_system(system_file);
  const std::vector<std::filesystem::path> paths(files.begin(), files.end());
  const auto rows = compare_pytorch_files(system, paths);
  std::vector<double> errors;
  nlohmann::json results = nlohmann::json::array();
  std::string text = fmt::format("perfcast validate --compare: PyTorch measurements against predictions on {}\n", system.name);
  for (const auto& r : rows) {
    errors.push_back(r.error);
    text += fmt::format("{}: {} ({})  measured {:>10}  predicted {:>10}  error {:+.2f}%\n", r.source, r.workload, r.model,
                        format_time(r.measured_s), format_time(r.predicted_s), 100.0 * r.error);
    results.push_back({{"source", r.source}, {"model", r.model}, {"workload", r.workload}, {"measured_s", r.measured_s},
                       {"predicted_s", r.predicted_s}, {"error", r.error}});
  }
  const auto s = summarize_errors(errors);
  text += format_summary(s) + "\n";
  std::vector<std::string> inputs{system_file};
  inputs.insert(inputs.end(), files.begin(), files.end());
  const nlohmann::json j = {{"context", command_context("validate --compare", inputs)}, {"system", system_file},
                            {"results", results}, {"summary", summary_json(s)}};
  return {text, json_text(j, 2) + "\n",
          json_rows_to_csv(results, {"source", "model", "workload", "measured_s", "predicted_s", "error"}), 0};
}

std::string validate_header(const ValidateRequest& a) {
  const SystemSpec system = load_system(a.system);
  return fmt::format("perfcast validate: random DLRM configs #{}-#{} on {} ({} GPU{}), seed {}{}\n", a.first, a.first + a.configs - 1,
                     system.name, system.world_size(), system.world_size() == 1 ? "" : "s", a.seed,
                     a.dry_run ? ", dry run (predictions only)" : "");
}

ValidateOutcome run_validate(const ValidateRequest& a, const ValidateProgress& progress) {
  if (a.system.empty()) throw ConfigError("--system", "", "--system is required (unless --summarize)");
  const SystemSpec system = load_system(a.system);
  const HarnessOptions options = harness_options(a);
  Provenance prov;
  prov.date = utc_now_iso8601();
  prov.commit = build_info::kGitCommit;
  prov.version = build_info::kVersion;
  prov.gpu = system.gpu.name;  // the system file's GPU until a device is queried
  MeasureFn measure;
  std::filesystem::path out_file;
  std::ofstream out;
  if (!a.dry_run) {
    const auto dev = profiler::query_device_info(0);
    prov.gpu = dev.name;
    prov.driver = cuda_version_text(dev.driver_version);
    prov.cuda = cuda_version_text(dev.runtime_version);
    const std::string name =
        a.name.empty() ? fmt::format("{}_seed{}{}", std::filesystem::path(a.system).stem().string(), a.seed,
                                     a.mlp_dtype == "fp32" ? "" : "_" + a.mlp_dtype)
                       : a.name;
    out_file = std::filesystem::path(a.out_dir) / safe_file_name(dev.name) / (name + ".jsonl");
    std::filesystem::create_directories(out_file.parent_path());
    out.open(out_file, std::ios::app);  // lines are appended: several runs may share a file
    if (!out) throw std::runtime_error("cannot write " + out_file.string());
    measure = executor_measure(a, system);
  }
  const auto start = std::chrono::steady_clock::now();
  const HarnessResult result = run_validation(system, options, measure, out.is_open() ? &out : nullptr, prov,
                                              [&](const ConfigResult& r, int done) {
                                                if (progress) progress(format_result(r), done);
                                              });
  nlohmann::json j = {{"context", command_context("validate", {a.system})},
                      {"seed", a.seed},
                      {"system", a.system},
                      {"configs", a.configs},
                      {"first", a.first},
                      {"dry_run", a.dry_run},
                      {"date", prov.date},
                      {"commit", prov.commit},
                      {"version", prov.version},
                      {"results", nlohmann::json::array()},
                      {"summary", summary_json(result.summary)},
                      {"failed", result.failed}};
  for (const auto& r : result.results) j["results"].push_back(result_line(r, system, options, prov));
  ValidateOutcome outcome;
  outcome.json = json_text(j, 2) + "\n";
  outcome.csv = json_rows_to_csv(j["results"]);
  if (!a.dry_run) {
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    outcome.text = fmt::format("\n{}{}\nappended {} lines to {} ({:.1f} s, {:.1f} s per config)\n", format_summary(result.summary),
                               result.failed ? fmt::format(", {} measurements failed", result.failed) : "", result.results.size(),
                               out_file.string(), wall, wall / std::max(1, a.configs));
  }
  outcome.exit_code = !a.dry_run && result.summary.count == 0 && a.configs > 0 ? 1 : 0;
  return outcome;
}

}  // namespace perfcast::validation

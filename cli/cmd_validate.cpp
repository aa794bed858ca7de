// perfcast validate: random DLRM configs (the reference model's generator ranges),
// predicted on a system and measured with the reference executor; one JSON line per config
// in validation/results/<gpu>/<name>.jsonl and the geomean |error|. --dry-run predicts
// only (no GPU needed); --summarize re-reads result files.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/gpu_binary.hpp"
#include "cli/log.hpp"
#include "model/commands/command_context.hpp"
#include "core/output_files.hpp"
#include "perfcast/build_info.hpp"
#include "profiler/device_info.hpp"
#include "core/json_reader.hpp"
#include "validation/executor.hpp"
#include "validation/validate_harness.hpp"
#include "core/utc_time.hpp"
#include "core/json_text.hpp"

namespace perfcast::cli {
namespace {

struct ValidateArgs {
  std::string system, name, out_dir = "validation/results", json, csv, interaction = "cat", mlp_dtype = "fp32";
  std::vector<std::string> summarize, compare;
  int configs = 10;
  int first = 0;
  int warmup = 3;
  int iterations = 10;
  std::int64_t max_rows = validation::GeneratorOptions{}.max_rows;
  std::uint64_t seed = 1;
  bool dry_run = false;
};

/// 12080 -> "12.8" (the CUDA runtime's and driver's 1000 * major + 10 * minor).
std::string cuda_version_text(int v) { return v > 0 ? fmt::format("{}.{}", v / 1000, (v % 1000) / 10) : ""; }

nlohmann::json summary_json(const ErrorSummary& s) {
  return {{"count", s.count}, {"geomean_abs_error", s.geomean_abs}, {"mape", s.mape}, {"max_abs_error", s.max_abs},
          {"mean_error", s.mean_signed}};
}

int run_summarize(const ValidateArgs& a) {
  std::vector<std::filesystem::path> files(a.summarize.begin(), a.summarize.end());
  const auto summaries = validation::summarize_result_files(files);
  std::vector<std::pair<std::string, std::string>> outputs;
  nlohmann::json rows = nlohmann::json::array();
  if (!a.json.empty() || !a.csv.empty()) {
    nlohmann::json j = {{"context", command_context("validate --summarize", a.summarize)}, {"files", nlohmann::json::array()}};
    std::vector<double> all;
    for (const auto& f : summaries) {
      j["files"].push_back({{"file", f.file}, {"lines", f.lines}, {"failed", f.failed}, {"gpus", f.gpus},
                            {"systems", f.systems}, {"summary", summary_json(f.summary)}});
      nlohmann::json row = {{"file", f.file}, {"lines", f.lines}, {"failed", f.failed}};
      row.update(summary_json(f.summary));
      rows.push_back(row);
      all.insert(all.end(), f.errors.begin(), f.errors.end());
    }
    j["summary"] = summary_json(summarize_errors(all));
    if (!a.json.empty()) outputs.emplace_back(a.json, json_text(j, 2) + "\n");
    if (!a.csv.empty()) outputs.emplace_back(a.csv, json_rows_to_csv(rows));
  }
  write_outputs(outputs);
  if (a.json != "-" && a.csv != "-") std::cout << validation::render_file_summaries(summaries);
  return 0;
}

int run_compare(const ValidateArgs& a) {
  if (a.system.empty()) {
    log().error("--compare needs --system (a one-GPU system file)");
    return 2;
  }
  const SystemSpec system = load_system(a.system);
  std::vector<std::filesystem::path> files(a.compare.begin(), a.compare.end());
  const auto rows = validation::compare_pytorch_files(system, files);
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
  text += validation::format_summary(s) + "\n";
  std::vector<std::pair<std::string, std::string>> outputs;
  if (!a.json.empty()) {
    std::vector<std::string> inputs{a.system};
    inputs.insert(inputs.end(), a.compare.begin(), a.compare.end());
    const nlohmann::json j = {{"context", command_context("validate --compare", inputs)}, {"system", a.system},
                              {"results", results}, {"summary", summary_json(s)}};
    outputs.emplace_back(a.json, json_text(j, 2) + "\n");
  }
  if (!a.csv.empty()) outputs.emplace_back(a.csv, json_rows_to_csv(results, {"source", "model", "workload", "measured_s", "predicted_s", "error"}));
  write_outputs(outputs);
  if (a.json != "-" && a.csv != "-") std::cout << text;
  return 0;
}

void progress_bar(int done, int total, std::chrono::steady_clock::time_point start) {
  constexpr int kWidth = 30;
  const int filled = total > 0 ? done * kWidth / total : kWidth;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "\r  [%s%s] %d/%d configs, %.0f s  ", std::string(static_cast<std::size_t>(filled), '#').c_str(),
               std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(), done, total, elapsed);
  std::fflush(stderr);
}

int run_validate(const ValidateArgs& a) {
  if (!a.summarize.empty()) return run_summarize(a);
  if (!a.compare.empty()) return run_compare(a);
  if (a.system.empty()) {
    log().error("--system is required (unless --summarize)");
    return 2;
  }
  // Bad input first (exit 2, nothing written), whatever the machine.
  const SystemSpec system = load_system(a.system);
  validation::HarnessOptions options;
  options.seed = a.seed;
  options.configs = a.configs;
  options.first_index = a.first;
  options.warmup = a.warmup;
  options.iterations = a.iterations;
  options.generator.max_rows = a.max_rows;
  options.generator.interaction = a.interaction == "dot" ? Interaction::kDot : Interaction::kCat;
  options.generator.mlp_dtype = dtype_from_name(a.mlp_dtype).value_or(DType::kFp32);  // IsMember checked it

  validation::Provenance prov;
  prov.date = utc_now_iso8601();
  prov.commit = build_info::kGitCommit;
  prov.version = build_info::kVersion;
  prov.gpu = system.gpu.name;  // the system file's GPU until a device is queried
  validation::MeasureFn measure;
  std::filesystem::path out_file;
  std::ofstream out;
  if (!a.dry_run) {
    if (!profiler::cuda_support_built()) {
      log().error("perfcast validate needs the reference executor: {} (use --dry-run to generate and predict without a GPU)",
                  run_gpu_binary());
      return 1;
    }
    std::string why;
    if (!validation::executor_available(&why)) {
      log().error("perfcast validate needs the reference executor: {} (use --dry-run to generate and predict without a GPU)", why);
      return 1;
    }
    const auto dev = profiler::query_device_info(0);
    prov.gpu = dev.name;
    prov.driver = cuda_version_text(dev.driver_version);
    prov.cuda = cuda_version_text(dev.runtime_version);
    const std::string name =
        a.name.empty() ? fmt::format("{}_seed{}{}", std::filesystem::path(a.system).stem().string(), a.seed,
                                     a.mlp_dtype == "fp32" ? "" : "_" + a.mlp_dtype)
                       : a.name;
    out_file = std::filesystem::path(a.out_dir) / validation::safe_file_name(dev.name) / (name + ".jsonl");
    std::filesystem::create_directories(out_file.parent_path());
    out.open(out_file, std::ios::app);  // lines are appended: several runs may share a file
    if (!out) throw std::runtime_error("cannot write " + out_file.string());
    measure = [&a, &system](const validation::GeneratedConfig& c) {
      validation::ExecutorOptions eo;
      eo.warmup = a.warmup;
      eo.iterations = a.iterations;
      eo.seed = validation::mix_seed(c.seed ^ static_cast<std::uint64_t>(c.index));
      const auto r = validation::run_dlrm(system, c.spec, c.plan, eo);
      validation::Measured m;
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

  const bool to_stdout = a.json != "-" && a.csv != "-";
  const bool tty = progress_enabled();
  if (to_stdout) {
    std::cout << fmt::format("perfcast validate: random DLRM configs #{}-#{} on {} ({} GPU{}), seed {}{}\n", a.first,
                             a.first + a.configs - 1, system.name, system.world_size(), system.world_size() == 1 ? "" : "s", a.seed,
                             a.dry_run ? ", dry run (predictions only)" : "");
    std::cout.flush();
  }
  const auto start = std::chrono::steady_clock::now();
  if (tty) progress_bar(0, a.configs, start);
  const auto result = validation::run_validation(
      system, options, measure, out.is_open() ? &out : nullptr, prov, [&](const validation::ConfigResult& r, int done) {
        if (tty) std::fprintf(stderr, "\r%70s\r", "");
        if (to_stdout) {
          std::cout << validation::format_result(r) << "\n";
          std::cout.flush();
        }
        if (tty && done < a.configs) progress_bar(done, a.configs, start);
      });

  if (!a.json.empty() || !a.csv.empty()) {
    nlohmann::json j = {{"context", command_context("validate", {a.system})}, {"seed", a.seed},       {"system", a.system},   {"configs", a.configs}, {"first", a.first}, {"dry_run", a.dry_run},
                        {"date", prov.date},    {"commit", prov.commit}, {"version", prov.version},
                        {"results", nlohmann::json::array()}, {"summary", summary_json(result.summary)},
                        {"failed", result.failed}};
    for (const auto& r : result.results) j["results"].push_back(validation::result_line(r, system, options, prov));
    std::vector<std::pair<std::string, std::string>> outputs;
    if (!a.json.empty()) outputs.emplace_back(a.json, json_text(j, 2) + "\n");
    if (!a.csv.empty()) outputs.emplace_back(a.csv, json_rows_to_csv(j["results"]));
    write_outputs(outputs);
  }
  if (to_stdout) {
    if (!a.dry_run) {
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::cout << fmt::format("\n{}{}\nappended {} lines to {} ({:.1f} s, {:.1f} s per config)\n",
                               validation::format_summary(result.summary),
                               result.failed ? fmt::format(", {} measurements failed", result.failed) : "",
                               result.results.size(), out_file.string(), wall, wall / std::max(1, a.configs));
    }
  }
  return !a.dry_run && result.summary.count == 0 && a.configs > 0 ? 1 : 0;
}

}  // namespace

Action add_validate(CLI::App& app) {
  auto* cmd = app.add_subcommand("validate", "Predict and measure random DLRM configs; report the prediction error");
  auto a = std::make_shared<ValidateArgs>();
  cmd->add_option("--system", a->system, "system file (the GPUs the executor runs on)");
  cmd->add_option("--configs", a->configs, "random configs to run (default 10)")->check(CLI::Range(1, 100000));
  cmd->add_option("--first", a->first, "index of the first config (default 0): split a long run over several commands")
      ->check(CLI::Range(0, 100000000));
  cmd->add_option("--seed", a->seed, "generator seed: config i of a seed is always the same");
  cmd->add_option("--name", a->name, "result file name (default <system>_seed<S>, plus _<dtype> unless fp32)");
  cmd->add_option("--out-dir", a->out_dir, "results folder; lines go to <dir>/<gpu>/<name>.jsonl (default validation/results)");
  cmd->add_option("--warmup", a->warmup, "executor warm-up iterations per config (default 3)")->check(CLI::Range(0, 100000));
  cmd->add_option("--iterations", a->iterations, "executor timed iterations per config (default 10)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--interaction", a->interaction, "cat: D per table (default, as the reference); dot: one D per config")
      ->check(CLI::IsMember({"cat", "dot"}));
  cmd->add_option("--mlp-dtype", a->mlp_dtype,
                  "MLP math of every config: fp32 (default, as the reference), tf32, or bf16 / fp16 mixed precision "
                  "(result file <system>_seed<S>_<dtype>)")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}));
  cmd->add_option("--max-rows", a->max_rows, "largest table drawn, rows (default 4000000)")->check(CLI::Range(100, 1 << 30));
  cmd->add_option("--json", a->json, "also write all results and the summary as JSON to FILE, or - for standard output");
  cmd->add_option("--csv", a->csv, "also write one CSV row per result (per file with --summarize) to FILE");
  cmd->add_flag("--dry-run", a->dry_run, "generate and predict only (no executor, no GPU, no result file)");
  cmd->add_option("--summarize", a->summarize, "re-summarize existing result files (JSON lines) and exit")->expected(1, -1);
  cmd->add_option("--compare", a->compare,
                  "predict the runs of PyTorch result files (validation/pytorch/*_bench.py) on --system and report errors")
      ->expected(1, -1);
  return [a]() { return run_validate(*a); };
}

}  // namespace perfcast::cli

// perfcast profile: run microbenchmark sweeps (configs/sweeps/*.json) on a GPU and write the
// measurements as JSON lines (predictors/measurement.hpp).

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/gpu_binary.hpp"
#include "cli/log.hpp"
#include "core/json_text.hpp"
#include "core/output_files.hpp"
#include "core/run_context.hpp"
#include "predictors/measurement.hpp"
#include "profiler/bench_runner.hpp"
#include "profiler/device_info.hpp"
#include "profiler/sweep.hpp"

namespace perfcast::cli {
namespace {

struct ProfileArgs {
  std::vector<std::string> sweeps;
  std::string out;
  std::string json;  ///< the --json result: FILE, "-" or "" (none)
  profiler::ProfileOptions options;
  double time_budget_s = 0;
  bool append = false;
  bool dry_run = false;
  bool no_cupti = false;
};

int run_profile(const ProfileArgs& a) {
  // Validate every sweep first: a bad file is exit 2 (ConfigError) whatever the machine.
  std::vector<profiler::Sweep> sweeps;
  std::size_t total = 0;
  for (const auto& f : a.sweeps) {
    sweeps.push_back(profiler::load_sweep(f));
    total += sweeps.back().cases.size();
  }
  nlohmann::json result = {{"context", command_context("profile", a.sweeps)}, {"dry_run", a.dry_run}, {"sweeps", nlohmann::json::array()},
                            {"cases", total}};
  for (const auto& s : sweeps) {
    result["sweeps"].push_back({{"file", s.file}, {"name", s.name}, {"cases", s.cases.size()}, {"warmup", s.settings.warmup},
                                {"repetitions", s.settings.repetitions}, {"flush_l2", s.settings.flush_l2}});
  }
  if (a.dry_run) {
    if (!a.json.empty()) write_outputs({{a.json, json_text(result, 2) + "\n"}});
    if (a.json == "-") return 0;
    for (const auto& s : sweeps) {
      std::cout << fmt::format("{}: sweep \"{}\", {} cases, {} warm-up + {} timed runs each{}\n", s.file, s.name,
                               s.cases.size(), s.settings.warmup, s.settings.repetitions,
                               s.settings.flush_l2 ? ", L2 flushed" : "");
    }
    std::cout << fmt::format("{} cases in all\n", total);
    return 0;
  }
  if (!a.json.empty() && a.json != "-") check_output_targets({a.out, a.json});
  if (!profiler::cuda_support_built()) {
    log().error("perfcast profile needs a GPU: {}", run_gpu_binary());
    return 1;
  }
  if (!profiler::cuda_device_available()) {
    log().error("no CUDA device: perfcast profile must run on a machine with an NVIDIA GPU");
    return 1;
  }
  if (a.options.device >= profiler::cuda_device_count()) {
    log().error("no CUDA device {} ({} available)", a.options.device, profiler::cuda_device_count());
    return 1;
  }
  // Lines go to <out>.partial as they are measured (a run cut short keeps what it measured);
  // the file is renamed to <out> when the run ends.
  const std::filesystem::path out(a.out);
  std::filesystem::path partial = out;
  partial += ".partial";
  if (a.append && std::filesystem::exists(out)) std::filesystem::copy_file(out, partial, std::filesystem::copy_options::overwrite_existing);
  std::ofstream file(partial, a.append ? std::ios::app : std::ios::trunc);
  if (!file) throw std::runtime_error("cannot write " + partial.string());
  auto options = a.options;
  options.time_budget_s = a.time_budget_s;
  options.use_cupti = !a.no_cupti;
  const auto summary = profiler::run_sweeps(sweeps, options, [&](const Measurement& m) {
    file << measurement_to_jsonl(m);
    file.flush();
  });
  file.close();
  if (!file) throw std::runtime_error("cannot write " + partial.string());
  std::filesystem::rename(partial, out);
  log().info("perfcast profile: {} measured, {} failed, {} not run (limit / time budget); timer {}{}", summary.measured,
             summary.failed, summary.not_run, summary.timer, summary.cupti_error.empty() ? "" : " (" + summary.cupti_error + ")");
  for (const auto& f : summary.failures) log().warn("failed: {}", f);
  log().info("wrote {}", a.out);
  if (!a.json.empty()) {
    result.update({{"measured", summary.measured}, {"failed", summary.failed}, {"not_run", summary.not_run},
                   {"timer", summary.timer}, {"cupti_error", summary.cupti_error}, {"failures", summary.failures},
                   {"written", a.out}});
    write_outputs({{a.json, json_text(result, 2) + "\n"}});
  }
  return summary.measured == 0 && summary.failed > 0 ? 1 : 0;
}

}  // namespace

Action add_profile(CLI::App& app) {
  auto* cmd = app.add_subcommand("profile", "Run microbenchmark sweeps on a GPU and write measurements (JSON lines)");
  auto a = std::make_shared<ProfileArgs>();
  cmd->add_option("--sweep", a->sweeps, "sweep file (configs/sweeps/*.json), repeatable")->required();
  cmd->add_option("--out", a->out, "measurement file to write (JSON lines)");
  cmd->add_option("--device", a->options.device, "CUDA device ordinal")->check(CLI::Range(0, 1023));
  cmd->add_option("--offset", a->options.offset, "skip the first N cases of the sweeps (resume a run)");
  cmd->add_option("--limit", a->options.limit, "run at most N cases (0: all)");
  cmd->add_option("--time-budget", a->time_budget_s, "start no new case after this many seconds (0: none)")
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_flag("--append", a->append, "append to --out instead of replacing it");
  cmd->add_flag("--no-cupti", a->no_cupti, "time with CUDA events instead of CUPTI");
  cmd->add_flag("--progress,!--no-progress", a->options.progress, "progress bar on standard error (a terminal only)");
  cmd->add_flag("--dry-run", a->dry_run, "validate the sweeps and print their case counts; run nothing");
  cmd->add_option("--json", a->json, "also write the sweeps' case counts and the run's summary as JSON to FILE, or - for standard output");
  a->options.progress = true;
  return [a]() {
    if (!a->dry_run && a->out.empty()) {
      log().error("--out is required (unless --dry-run)");
      return 2;
    }
    return run_profile(*a);
  };
}

}  // namespace perfcast::cli

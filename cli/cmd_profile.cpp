// perfcast profile: parses the options and reports; the library calls
// (validation/commands/profile_command.hpp) load the sweeps (configs/sweeps/*.json) and run
// them on a GPU, writing the measurements as JSON lines (predictors/measurement.hpp).

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/gpu_binary.hpp"
#include "cli/log.hpp"
#include "core/json_text.hpp"
#include "core/output_files.hpp"
#include "profiler/device_info.hpp"
#include "validation/commands/profile_command.hpp"

namespace perfcast::cli {
namespace {

struct ProfileArgs {
  validation::ProfileRequest request;
  std::string json;  ///< the --json result: FILE, "-" or "" (none)
  bool dry_run = false;
  bool no_cupti = false;
};

int run_profile(const ProfileArgs& a) {
  // Every sweep first: a bad file is exit 2 (ConfigError) whatever the machine.
  const validation::LoadedSweeps loaded = validation::load_profile_sweeps(a.request.sweeps);
  if (a.dry_run) {
    if (!a.json.empty()) write_outputs({{a.json, json_text(loaded.json, 2) + "\n"}});
    if (a.json != "-") std::cout << loaded.text;
    return 0;
  }
  if (!a.json.empty() && a.json != "-") check_output_targets({a.request.out, a.json});
  if (!profiler::cuda_support_built()) {
    log().error("perfcast profile needs a GPU: {}", run_gpu_binary());
    return 1;
  }
  if (!profiler::cuda_device_available()) {
    log().error("no CUDA device: perfcast profile must run on a machine with an NVIDIA GPU");
    return 1;
  }
  if (a.request.options.device >= profiler::cuda_device_count()) {
    log().error("no CUDA device {} ({} available)", a.request.options.device, profiler::cuda_device_count());
    return 1;
  }
  validation::ProfileRequest request = a.request;
  request.options.use_cupti = !a.no_cupti;
  const validation::ProfileOutcome r = validation::run_profile_sweeps(request, loaded);
  const auto& s = r.summary;
  log().info("perfcast profile: {} measured, {} failed, {} not run (limit / time budget); timer {}{}", s.measured, s.failed,
             s.not_run, s.timer, s.cupti_error.empty() ? "" : " (" + s.cupti_error + ")");
  for (const auto& f : s.failures) log().warn("failed: {}", f);
  log().info("wrote {}", request.out);
  if (!a.json.empty()) write_outputs({{a.json, json_text(r.json, 2) + "\n"}});
  return s.measured == 0 && s.failed > 0 ? 1 : 0;
}

}  // namespace

Action add_profile(CLI::App& app) {
  auto* cmd = app.add_subcommand("profile", "Run microbenchmark sweeps on a GPU and write measurements (JSON lines)");
  auto a = std::make_shared<ProfileArgs>();
  auto& q = a->request;
  cmd->add_option("--sweep", q.sweeps, "sweep file (configs/sweeps/*.json), repeatable")->required();
  cmd->add_option("--out", q.out, "measurement file to write (JSON lines)");
  cmd->add_option("--device", q.options.device, "CUDA device ordinal")->check(CLI::Range(0, 1023));
  cmd->add_option("--offset", q.options.offset, "skip the first N cases of the sweeps (resume a run)");
  cmd->add_option("--limit", q.options.limit, "run at most N cases (0: all)");
  cmd->add_option("--time-budget", q.time_budget_s, "start no new case after this many seconds (0: none)")->check(CLI::Range(0.0, 1e7));
  cmd->add_flag("--append", q.append, "append to --out instead of replacing it");
  cmd->add_flag("--no-cupti", a->no_cupti, "time with CUDA events instead of CUPTI");
  cmd->add_flag("--progress,!--no-progress", q.options.progress, "progress bar on standard error (a terminal only)");
  cmd->add_flag("--dry-run", a->dry_run, "validate the sweeps and print their case counts; run nothing");
  cmd->add_option("--json", a->json, "also write the sweeps' case counts and the run's summary as JSON to FILE, or - for standard output");
  q.options.progress = true;
  return [a]() {
    if (!a->dry_run && a->request.out.empty()) {
      log().error("--out is required (unless --dry-run)");
      return 2;
    }
    return run_profile(*a);
  };
}

}  // namespace perfcast::cli

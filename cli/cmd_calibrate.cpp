// perfcast calibrate comms|kernels|runtime: parses the options, runs the library call
// (model/commands/calibrate_command.hpp), writes the calibration and the --json report,
// prints the report. A refused fit is exit 1 with nothing written but the report.
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/log.hpp"
#include "core/output_files.hpp"
#include "model/commands/calibrate_command.hpp"

namespace perfcast::cli {
namespace {

/// Writes what `r` produced (the calibration unless refused, the JSON report to `json`
/// when asked and produced), prints the report unless it went to standard output, logs
/// its warnings and errors. Exit 1 when the fit was refused.
int finish(const CalibrateOutcome& r, const std::string& json) {
  for (const auto& w : r.warnings) log().warn("{}", w);
  std::vector<std::pair<std::string, std::string>> files;
  if (!r.content.empty()) files.emplace_back(r.out, r.content);
  if (!json.empty() && !r.json.empty()) files.emplace_back(json, r.json);
  write_outputs(files);
  if (json != "-") {
    std::cout << r.text;
    if (!r.content.empty()) std::cout << "wrote " << r.out << r.usage << "\n";
  }
  for (const auto& e : r.errors) log().error("{}", e);
  return r.errors.empty() ? 0 : 1;
}

}  // namespace

Action add_calibrate(CLI::App& app) {
  auto* cmd = app.add_subcommand("calibrate", "Fit model parameters to measurements");
  cmd->require_subcommand(1);
  auto json = std::make_shared<std::string>();
  const char* json_help = "write the fit report as JSON to FILE, or - for standard output";

  auto* comms = cmd->add_subcommand("comms", "Fit the collective model to nccl-tests logs or CSV tables");
  auto a = std::make_shared<CalibrateCommsRequest>();
  comms->add_option("--system", a->system, "system file the measurements come from")->required();
  comms->add_option("--nccl-tests", a->logs, "nccl-tests output or CSV table (repeatable)")->required();
  comms->add_option("--collective", a->collective, "collective, when the files do not say (all_reduce, ...)");
  comms->add_option("--ranks", a->ranks, "rank count, when the files do not say")->check(CLI::Range(2, 1 << 20));
  comms->add_option("--out", a->out, "calibration file to write (default: <system>.comms.json beside the system)");
  comms->add_option("--json", *json, json_help);
  comms->add_flag("--leave-one-out", a->leave_one_out, "also report errors for each rank count fitted without it");
  comms->add_flag("--leave-one-source-out", a->leave_one_source_out,
                  "also report, for each source (file, or source of a measurement table), the error of a fit on the others");
  comms->add_option("--only", a->only, "measurement tables: keep the sources whose GPU, source or env contains TEXT (repeatable)");
  comms->add_flag("--force", a->force, "write the fit even when it is worse than the prior on held-out sizes");

  auto* kernels = cmd->add_subcommand("kernels", "Fit the kernel predictors to measurement files (perfcast profile output)");
  auto k = std::make_shared<CalibrateKernelsRequest>();
  kernels->add_option("--system", k->system, "system whose GPU the measurements are of (its spec gives the peaks)")->required();
  kernels->add_option("--measurements", k->measurements, "measurement JSONL files (repeatable)")->required();
  kernels->add_option("--out", k->out, "calibration file (default: configs/calibration/<gpu>.json beside the systems folder)");
  kernels->add_option("--json", *json, json_help);
  kernels->add_option("--families", k->families,
                      "write only these fitted families (e.g. gemm.fp32,memcpy.h2d); the others stay spec-derived")
      ->delimiter(',');
  kernels->add_option("--note", k->note, "free-text provenance to record in the calibration (data split, left-out families)");

  auto* runtime = cmd->add_subcommand("runtime", "Fit a runtime profile's host cost per op to measured iteration times of your runs");
  auto rt = std::make_shared<CalibrateRuntimeRequest>();
  runtime->add_option("--system", rt->system, "system file the runs were measured on")->required();
  runtime->add_option("--measurements", rt->measurements, "CSV: workload,measured[,set,plan,split] (docs/collectives-and-runtimes.md)")
      ->required();
  runtime->add_option("--out", rt->out, "profile to write, configs/runtimes/<name>.json (its stem is the --set runtime=NAME)")
      ->required();
  runtime->add_option("--base", rt->base, "runtime profile whose other values the fit keeps (default: the workloads' own)");
  runtime->add_option("--json", *json, json_help);
  runtime->add_flag("--force", rt->force, "write the profile even when the held-out runs come out worse than with the base");

  return [comms, kernels, a, k, rt, json]() {
    if (comms->parsed()) return finish(calibrate_comms(*a), *json);
    if (kernels->parsed()) return finish(calibrate_kernels(*k), *json);
    // Every output is checked before the fit, which predicts every run many times.
    check_output_targets(json->empty() ? std::vector<std::string>{rt->out} : std::vector<std::string>{rt->out, *json});
    return finish(calibrate_runtime(*rt), *json);
  };
}

}  // namespace perfcast::cli

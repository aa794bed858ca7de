#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "cli/commands.hpp"
#include "model/commands/command_context.hpp"
#include "cli/log.hpp"
#include "core/output_files.hpp"
#include "model/commands/trace_commands.hpp"

namespace perfcast::cli {

Action add_replay(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "replay", "Simulate traced iterations with their measured kernel durations and compare with the measured times");
  auto files = std::make_shared<std::vector<std::string>>();
  auto json_out = std::make_shared<std::string>();
  auto csv_out = std::make_shared<std::string>();
  auto options = std::make_shared<ReplayOptions>();
  auto et_files = std::make_shared<std::vector<std::string>>();
  auto system_file = std::make_shared<std::string>();
  auto calibration_file = std::make_shared<std::string>();
  auto measurements_out = std::make_shared<std::string>();
  auto ranks_text = std::make_shared<std::string>();
  auto steps_text = std::make_shared<std::string>();
  cmd->add_option("--kineto", *files, "Kineto traces, one per rank (.json, .json.gz, or a .tar.gz of several)")
      ->required();
  cmd->add_option("--json", *json_out, "write the result as JSON to FILE, or - for standard output");
  cmd->add_option("--csv", *csv_out, "write one CSV row per (rank, step): measured_s, simulated_s, error, to FILE or -");
  const std::map<std::string, ReplayHostModel> hosts = {{"measured", ReplayHostModel::kMeasured},
                                                        {"mean", ReplayHostModel::kMean}};
  cmd->add_option("--host", options->host,
                  "host time per op: measured (the trace's, default) or mean (the rank's mean per GPU op)")
      ->transform(CLI::CheckedTransformer(hosts, CLI::ignore_case));
  cmd->add_option("--et", *et_files,
                  "PyTorch execution traces of the same step, one per rank (.json, .json.gz, or a .tar.gz of several)");
  const std::map<std::string, ReplayKernels> kernels = {{"measured", ReplayKernels::kMeasured},
                                                        {"predicted", ReplayKernels::kPredicted}};
  cmd->add_option("--kernels", options->kernels,
                  "kernel durations: measured (the trace's, default) or predicted (our spec-derived predictors and "
                  "collective model on --system, where the trace gives the shape)")
      ->transform(CLI::CheckedTransformer(kernels, CLI::ignore_case));
  const std::map<std::string, ReplayCollectives> collectives = {{"auto", ReplayCollectives::kAuto},
                                                                 {"model", ReplayCollectives::kModel},
                                                                 {"measured", ReplayCollectives::kMeasured}};
  cmd->add_option("--collectives", options->collectives,
                  "with --kernels predicted, collective durations: auto (default: the collective model where every rank "
                  "of the communicator is traced, else the measured one, which includes the wait for untraced peers), "
                  "model, or measured")
      ->transform(CLI::CheckedTransformer(collectives, CLI::ignore_case));
  cmd->add_option("--system", *system_file,
                  "system that predicts kernels with --kernels predicted (e.g. configs/systems/dgx1_v100.json for the "
                  "V100 traces, configs/systems/dgx_a100.json for A100)");
  cmd->add_flag("--infer-waits", options->infer_waits,
                "also add a dependency wherever a measured GPU start is later than launch, stream order and the rules "
                "explain (GPU contention, missed waits); fits the replay to the measurement");
  cmd->add_option("--calibration", *calibration_file,
                  "with --kernels predicted: kernel calibration (perfcast calibrate kernels output) to apply where it "
                  "covers a family; without it kernels are spec-derived (the automatic configs/calibration/ file is "
                  "not applied by replay)");
  cmd->add_option("--measurements-out", *measurements_out,
                  "write one measurement line (JSONL, timer \"kineto\") per recognized op of a calibratable family in "
                  "the selected ranks and steps, for perfcast calibrate kernels");
  cmd->add_option("--ranks", *ranks_text,
                  "ranks to select, e.g. 0-3 or 0,2,4-5 (default all): what --measurements-out writes and what the "
                  "per-family errors and the selected step error count");
  cmd->add_option("--steps", *steps_text,
                  "ProfilerStep#N numbers to select, e.g. 1009-1011 (default all); as --ranks");
  return [files, json_out, csv_out, options, et_files, system_file, calibration_file, measurements_out, ranks_text, steps_text]() {
    if (*json_out == "-" && *measurements_out == "-")
      throw ConfigError("--measurements-out", "-", "--json and --measurements-out cannot both write to standard output");
    ReplayRequest req;
    req.kineto = *files;
    req.et = *et_files;
    req.options = *options;
    req.system = *system_file;
    req.calibration = *calibration_file;
    req.ranks = *ranks_text;
    req.steps = *steps_text;
    req.measurements_out = *measurements_out;
    const ReplayOutcome r = run_replay(std::move(req));
    for (const auto& w : r.warnings) log().warn("{}", w);
    std::vector<std::pair<std::string, std::string>> outputs;
    if (!measurements_out->empty()) outputs.emplace_back(*measurements_out, r.measurements);
    if (!json_out->empty()) outputs.emplace_back(*json_out, r.json);
    if (!csv_out->empty()) outputs.emplace_back(*csv_out, r.csv);
    write_outputs(outputs);
    if (*json_out != "-" && *measurements_out != "-" && *csv_out != "-") std::cout << r.text;
    return 0;
  };
}

}  // namespace perfcast::cli

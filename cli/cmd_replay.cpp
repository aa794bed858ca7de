#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/log.hpp"
#include "cli/output_file.hpp"
#include "model/traces/execution_trace.hpp"
#include "model/traces/kineto_trace.hpp"
#include "model/traces/trace_measurements.hpp"
#include "model/traces/trace_replay.hpp"
#include "model/traces/trace_reports.hpp"
#include "predictors/kernel_calibration.hpp"
#include "predictors/measurement.hpp"
#include "topology/system_spec.hpp"

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
    ReplayOptions opts = *options;
    if (!ranks_text->empty()) opts.evaluate.ranks = parse_ranges(*ranks_text, "--ranks");
    if (!steps_text->empty()) opts.evaluate.steps = parse_ranges(*steps_text, "--steps");
    const auto traces = load_kineto_traces(*files);
    std::optional<SystemSpec> system;
    std::optional<KernelCalibration> calibration;
    if (opts.kernels == ReplayKernels::kPredicted) {
      if (system_file->empty())
        throw ConfigError("--system", "", "--kernels predicted needs --system FILE (the machine the trace ran on)");
      system = load_system(*system_file);
      opts.system = &*system;
      if (!calibration_file->empty()) {
        calibration = parse_kernel_calibration(load_json_file(*calibration_file));
        // Our own microbenchmarks record the CUDA device name, which may differ from the
        // system file's; a mismatch is worth a word, not a refusal.
        if (calibration->gpu != system->gpu.name)
          log().warn("{} was measured on \"{}\"; the system's GPU is \"{}\" ({})", *calibration_file, calibration->gpu,
                     system->gpu.name, *system_file);
        opts.calibration = &*calibration;
        opts.calibration_file = *calibration_file;
      }
    } else if (!system_file->empty()) {
      throw ConfigError("--system", *system_file, "--system is used only with --kernels predicted");
    } else if (!calibration_file->empty()) {
      throw ConfigError("--calibration", *calibration_file, "--calibration is used only with --kernels predicted");
    }
    std::vector<ExecutionTrace> ets;
    if (!et_files->empty()) {
      ets = load_execution_traces(*et_files);
      const auto pairing = pair_execution_traces(ets, traces);
      for (std::size_t i = 0; i < traces.size(); ++i) {
        ExecutionTrace& et = ets[static_cast<std::size_t>(pairing[i])];
        link_execution_trace(et, traces[i]);
        opts.execution_traces.push_back(&et);
      }
    }
    std::string measurement_lines;
    if (!measurements_out->empty()) {
      std::size_t count = 0;
      for (std::size_t i = 0; i < traces.size(); ++i) {
        const int rank = replay_rank(traces, i);  // the numbering --ranks and the family errors use
        for (const auto& m : trace_measurements(traces[i], rank, opts.execution_traces.empty() ? nullptr : opts.execution_traces[i],
                                                opts.evaluate)) {
          measurement_lines += measurement_to_jsonl(m);
          count++;
        }
      }
      if (count == 0)
        throw ConfigError("--measurements-out", *measurements_out,
                          fmt::format("no recognized op of a calibratable family in the selected {}; nothing to write",
                                      opts.evaluate.describe()));
    }
    const ReplayResult r = replay_traces(traces, opts);
    std::vector<std::string> inputs = *files;
    inputs.insert(inputs.end(), et_files->begin(), et_files->end());
    if (system) inputs.push_back(*system_file);
    if (calibration) inputs.push_back(*calibration_file);
    std::vector<std::pair<std::string, std::string>> outputs;
    if (!measurements_out->empty()) outputs.emplace_back(*measurements_out, measurement_lines);
    if (!json_out->empty()) outputs.emplace_back(*json_out, render_replay_json(r, inputs));
    if (!csv_out->empty()) {
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& rr : r.ranks)
        for (const auto& s : rr.steps)
          rows.push_back({{"rank", rr.rank}, {"step", s.step}, {"measured_s", s.measured}, {"simulated_s", s.simulated},
                          {"error", s.error()}});
      outputs.emplace_back(*csv_out, json_rows_to_csv(rows, {"rank", "step", "measured_s", "simulated_s", "error"}));
    }
    const std::string text = render_replay_text(r);
    write_outputs(outputs);
    if (*json_out != "-" && *measurements_out != "-" && *csv_out != "-") std::cout << text;
    return 0;
  };
}

}  // namespace perfcast::cli

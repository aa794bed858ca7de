#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "cli/commands.hpp"
#include "cli/output_file.hpp"
#include "model/execution_trace.hpp"
#include "model/kineto_trace.hpp"
#include "model/trace_replay.hpp"
#include "model/trace_reports.hpp"
#include "topology/system_spec.hpp"

namespace perfcast::cli {

Action add_replay(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "replay", "Simulate traced iterations with their measured kernel durations and compare with the measured times");
  auto files = std::make_shared<std::vector<std::string>>();
  auto json_out = std::make_shared<std::string>();
  auto options = std::make_shared<ReplayOptions>();
  auto et_files = std::make_shared<std::vector<std::string>>();
  auto system_file = std::make_shared<std::string>();
  cmd->add_option("--kineto", *files, "Kineto traces, one per rank (.json, .json.gz, or a .tar.gz of several)")
      ->required();
  cmd->add_option("--json", *json_out, "write the result as JSON to FILE, or - for standard output");
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
  return [files, json_out, options, et_files, system_file]() {
    const auto traces = load_kineto_traces(*files);
    ReplayOptions opts = *options;
    std::optional<SystemSpec> system;
    if (opts.kernels == ReplayKernels::kPredicted) {
      if (system_file->empty())
        throw ConfigError("--system", "", "--kernels predicted needs --system FILE (the machine the trace ran on)");
      system = load_system(*system_file);
      opts.system = &*system;
    } else if (!system_file->empty()) {
      throw ConfigError("--system", *system_file, "--system is used only with --kernels predicted");
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
    const ReplayResult r = replay_traces(traces, opts);
    std::vector<std::string> inputs = *files;
    inputs.insert(inputs.end(), et_files->begin(), et_files->end());
    if (system) inputs.push_back(*system_file);
    std::vector<std::pair<std::string, std::string>> outputs;
    if (!json_out->empty()) outputs.emplace_back(*json_out, render_replay_json(r, inputs));
    const std::string text = render_replay_text(r);
    write_outputs(outputs);
    if (*json_out != "-") std::cout << text;
    return 0;
  };
}

}  // namespace perfcast::cli

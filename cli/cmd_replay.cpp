#include <iostream>
#include <map>
#include <memory>

#include "cli/commands.hpp"
#include "cli/output_file.hpp"
#include "model/kineto_trace.hpp"
#include "model/trace_replay.hpp"
#include "model/trace_reports.hpp"

namespace perfcast::cli {

Action add_replay(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "replay", "Simulate traced iterations with their measured kernel durations and compare with the measured times");
  auto files = std::make_shared<std::vector<std::string>>();
  auto json_out = std::make_shared<std::string>();
  auto options = std::make_shared<ReplayOptions>();
  cmd->add_option("--kineto", *files, "Kineto traces, one per rank (.json, .json.gz, or a .tar.gz of several)")
      ->required();
  cmd->add_option("--json", *json_out, "write the result as JSON to FILE, or - for standard output");
  const std::map<std::string, ReplayHostModel> hosts = {{"measured", ReplayHostModel::kMeasured},
                                                        {"mean", ReplayHostModel::kMean}};
  cmd->add_option("--host", options->host,
                  "host time per op: measured (the trace's, default) or mean (the rank's mean per GPU op)")
      ->transform(CLI::CheckedTransformer(hosts, CLI::ignore_case));
  cmd->add_flag("--infer-waits", options->infer_waits,
                "also add a dependency wherever a measured GPU start is later than launch, stream order and the rules "
                "explain (GPU contention, missed waits); fits the replay to the measurement");
  return [files, json_out, options]() {
    const auto traces = load_kineto_traces(*files);
    const ReplayResult r = replay_traces(traces, *options);
    std::vector<std::pair<std::string, std::string>> outputs;
    if (!json_out->empty()) outputs.emplace_back(*json_out, render_replay_json(r, *files));
    const std::string text = render_replay_text(r);
    write_outputs(outputs);
    if (*json_out != "-") std::cout << text;
    return 0;
  };
}

}  // namespace perfcast::cli

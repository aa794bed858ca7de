#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "core/output_files.hpp"
#include "model/commands/trace_commands.hpp"

namespace perfcast::cli {

Action add_trace_stats(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "trace-stats", "Per-iteration times, GPU busy, communication and top kernels of PyTorch profiler (Kineto) traces");
  auto req = std::make_shared<TraceStatsRequest>();
  auto json_out = std::make_shared<std::string>();
  cmd->add_option("files", req->files, "traces: .json, .json.gz, or a .tar.gz of several ranks' traces")->required();
  cmd->add_option("--json", *json_out, "write the result as JSON to FILE, or - for standard output");
  cmd->add_option("--top", req->top, "kernels to list per trace")->check(CLI::Range(0, 100000));
  return [req, json_out]() {
    const TraceStatsOutcome r = run_trace_stats(*req);
    std::vector<std::pair<std::string, std::string>> outputs;
    if (!json_out->empty()) outputs.emplace_back(*json_out, r.json);
    write_outputs(outputs);
    if (*json_out != "-") std::cout << r.text;
    return 0;
  };
}

}  // namespace perfcast::cli

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/output_file.hpp"
#include "model/traces/kineto_trace.hpp"
#include "model/traces/trace_reports.hpp"
#include "model/traces/trace_stats.hpp"

namespace perfcast::cli {

Action add_trace_stats(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "trace-stats", "Per-iteration times, GPU busy, communication and top kernels of PyTorch profiler (Kineto) traces");
  auto files = std::make_shared<std::vector<std::string>>();
  auto json_out = std::make_shared<std::string>();
  auto top = std::make_shared<int>(10);
  cmd->add_option("files", *files, "traces: .json, .json.gz, or a .tar.gz of several ranks' traces")->required();
  cmd->add_option("--json", *json_out, "write the result as JSON to FILE, or - for standard output");
  cmd->add_option("--top", *top, "kernels to list per trace")->check(CLI::Range(0, 100000));
  return [files, json_out, top]() {
    const auto traces = load_kineto_traces(*files);
    const auto stats = compute_trace_stats(traces);
    std::vector<std::pair<std::string, std::string>> outputs;
    if (!json_out->empty()) outputs.emplace_back(*json_out, render_trace_stats_json(stats, *files, *top));
    const std::string text = render_trace_stats_text(stats, *top);
    write_outputs(outputs);
    if (*json_out != "-") std::cout << text;
    return 0;
  };
}

}  // namespace perfcast::cli

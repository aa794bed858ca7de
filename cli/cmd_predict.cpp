#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/output_file.hpp"
#include "model/predict/predict.hpp"
#include "model/report/report.hpp"

namespace perfcast::cli {

Action add_predict(CLI::App& app) {
  auto* cmd = app.add_subcommand("predict", "Predict the per-iteration training time of a workload on a system");
  auto req = std::make_shared<PredictRequest>();
  auto json_out = std::make_shared<std::string>();
  auto trace_out = std::make_shared<std::string>();
  auto top = std::make_shared<int>(8);
  std::string system, workload, plan;
  cmd->add_option("--system", req->system, "system file (configs/systems/*.json)")->required();
  cmd->add_option("--workload", req->workload, "workload file (configs/workloads/*.json)")->required();
  cmd->add_option_function<std::string>("--plan", [req](const std::string& p) { req->plan = p; },
                                        "sharding plan file (TorchRec ParameterSharding fields); default: table-wise round-robin");
  cmd->add_option("--set", req->overrides,
                  "what-if override PATH=VALUE, e.g. workload.batch_size=4096, system.nodes=2, system.gpu=h200.json, "
                  "workload.embedding.tables[0].rows=2000000 (repeatable)");
  cmd->add_option("--json", *json_out, "write the result as JSON to FILE, or - for standard output");
  cmd->add_option("--trace", *trace_out, "write the simulated timeline as a Chrome trace (Perfetto) to FILE");
  cmd->add_option("--iterations", req->iterations, "iterations to simulate; the last period is reported")
      ->check(CLI::Range(2, 100));
  cmd->add_option("--top", *top, "critical-path ops to list")->check(CLI::Range(0, 1000));
  return [cmd, req, json_out, trace_out, top]() {
    (void)cmd;
    const auto p = predict(*req);
    std::vector<std::pair<std::string, std::string>> files;
    if (!json_out->empty()) files.emplace_back(*json_out, render_json(*p));
    if (!trace_out->empty()) files.emplace_back(*trace_out, render_chrome_trace(*p));
    const bool json_to_stdout = *json_out == "-";
    const std::string text = render_text(*p, *top);
    write_outputs(files);
    if (!json_to_stdout) std::cout << text;
    return 0;
  };
}

}  // namespace perfcast::cli

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "core/output_files.hpp"
#include "model/report/html_report.hpp"

namespace perfcast::cli {
namespace {

struct ReportOptions {
  std::vector<std::string> inputs;
  std::string out = "report.html";
  std::string title = "perfcast report";
};

}  // namespace

Action add_report(CLI::App& app) {
  auto* cmd = app.add_subcommand("report", "Write one self-contained HTML page with charts of perfcast result files "
                                           "(the --json of predict, plan, comm, shard, replay, validate, kernels, trace-stats, "
                                           "index-stats, calibrate and profile; validation .jsonl)");
  auto o = std::make_shared<ReportOptions>();
  cmd->add_option("results", o->inputs, "result files, one section each, in order")->required();
  cmd->add_option("--out", o->out, "HTML file to write, or - for standard output (default report.html)");
  cmd->add_option("--title", o->title, "page title");
  return [o]() {
    std::vector<ReportInput> inputs;
    for (const auto& f : o->inputs) inputs.push_back(load_report_input(f));
    write_outputs({{o->out, render_html_report(inputs, o->title)}});
    if (o->out != "-") std::cout << "perfcast report: " << inputs.size() << " section(s) written to " << o->out << "\n";
    return 0;
  };
}

}  // namespace perfcast::cli

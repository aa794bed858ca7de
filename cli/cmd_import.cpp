#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "core/output_files.hpp"
#include "model/commands/trace_commands.hpp"

namespace perfcast::cli {

Action add_import(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "import", "Turn PyTorch profiler (Kineto) traces, and optionally execution traces, into a workload predict accepts");
  auto req = std::make_shared<ImportRequest>();
  auto out = std::make_shared<std::string>();
  cmd->add_option("--kineto", req->kineto, "Kineto traces, one per rank (.json, .json.gz, or a .tar.gz of several)")->required();
  cmd->add_option("--et", req->et,
                  "PyTorch execution traces of the same step, one per rank (.json, .json.gz, or a .tar.gz of several)");
  cmd->add_option("--out", *out, "workload file to write (model \"trace\")")->required();
  cmd->add_option("--name", req->name, "workload name (default: the first trace's name)");
  cmd->add_option("--batch", req->batch, "samples in the imported window: global batch x imported steps (for samples/s; 0: unknown)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 50));
  return [req, out]() {
    const ImportOutcome r = run_import(*req);
    write_outputs({{*out, r.workload}});
    // The summary's first line ends with the ops count; name the file written after it.
    const auto eol = r.text.find('\n');
    std::cout << r.text.substr(0, eol) << " -> " << *out << r.text.substr(eol);
    return 0;
  };
}

}  // namespace perfcast::cli

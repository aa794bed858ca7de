#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "core/output_files.hpp"
#include "model/commands/comm_command.hpp"

namespace perfcast::cli {

Action add_comm(CLI::App& app) {
  auto* cmd = app.add_subcommand("comm", "Predict a collective's time and bandwidth over a range of sizes (nccl-tests style)");
  auto a = std::make_shared<CommRequest>();
  auto system = std::make_shared<std::string>();
  auto json = std::make_shared<std::string>();
  auto csv = std::make_shared<std::string>();
  cmd->add_option("--system", *system, "system file")->required();
  cmd->add_option("--collective", a->collective, "all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce");
  cmd->add_option("--sizes", a->sizes, "FROM:TO doubling (default 8B:16GiB) or a comma list; nccl-tests byte convention");
  cmd->add_option("--ranks", a->ranks, "ranks taking part (default: all GPUs of the nodes used)")->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--nodes", a->nodes, "nodes used, or a list like 1,2,4 for one table each (default: as few as hold the ranks)");
  cmd->add_option("--set", a->overrides, "system what-if PATH=VALUE, e.g. system.nodes=2 (repeatable)");
  cmd->add_option("--json", *json, "write results as JSON to FILE, or - for standard output");
  cmd->add_option("--csv", *csv, "write results as CSV (one row per node count and size) to FILE, or - for standard output");
  return [a, system, json, csv]() {
    CommRequest req = *a;
    req.system = load_json_file(*system);
    const CommOutcome r = run_comm(std::move(req));
    std::vector<std::pair<std::string, std::string>> files;
    if (!json->empty()) files.emplace_back(*json, r.json);
    if (!csv->empty()) files.emplace_back(*csv, r.csv);
    write_outputs(files);
    if (*json != "-" && *csv != "-") std::cout << r.text;
    return 0;
  };
}

}  // namespace perfcast::cli

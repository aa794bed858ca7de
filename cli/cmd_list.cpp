// perfcast list: prints (or writes as JSON) what model/commands/list_command.hpp lists.
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "core/output_files.hpp"
#include "model/commands/list_command.hpp"

namespace perfcast::cli {

Action add_list(CLI::App& app) {
  auto* cmd = app.add_subcommand("list",
                                 "List the predictors and collective models, and the system files, with the sources of their constants");
  auto systems = std::make_shared<std::string>();
  auto json = std::make_shared<std::string>();
  cmd->add_option("--systems", *systems,
                  "folder of system files to list (default: configs/systems under the current folder, when it exists)");
  cmd->add_option("--json", *json, "write the listing as JSON to FILE, or - for standard output");
  return [systems, json]() {
    const ListOutcome r = run_list(*systems);
    if (!json->empty()) write_outputs({{*json, r.json}});
    if (*json != "-") std::cout << r.text;
    return 0;
  };
}

}  // namespace perfcast::cli

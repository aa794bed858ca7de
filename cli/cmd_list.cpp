#include <iostream>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "predictors/registry.hpp"

namespace perfcast::cli {

Action add_list(CLI::App& app) {
  app.add_subcommand("list", "List the predictors and collective models with the sources of their constants");
  return []() {
    for (const auto& e : builtin_registry()) {
      std::cout << fmt::format("{:<28} [{}]\n    {}\n    source: {}\n", e.name, e.family, e.description, e.source);
    }
    return 0;
  };
}

}  // namespace perfcast::cli

#pragma once
/// \file list_command.hpp
/// `perfcast list` as a library call: the built-in predictors and collective models with
/// the sources of their constants, and every system file of a folder (its shape, fabric,
/// where its collective times come from, the sources of its constants).

#include <string>

namespace perfcast {

struct ListOutcome {
  std::string text;  ///< the listing
  std::string json;  ///< {"context", "predictors": [...], "systems_folder", "systems": [...]}
};

/// `systems_dir` "": configs/systems under the current folder when it exists (no systems
/// otherwise); a folder that does not exist is a ConfigError. A system file that does not
/// load is a ConfigError naming it.
[[nodiscard]] ListOutcome run_list(const std::string& systems_dir);

}  // namespace perfcast

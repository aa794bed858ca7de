#pragma once
/// \file run_context.hpp
/// The `context` block that starts every JSON result of perfcast: version, commit, date,
/// the command, its input files with their sizes and FNV-1a 64-bit hashes, and the
/// overrides given.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace perfcast {

/// {"perfcast_version", "git_commit", "date", "command", "inputs": [{"file", "bytes",
/// "fnv1a64"}], "overrides"}; bytes is -1 for a file that cannot be opened.
[[nodiscard]] nlohmann::json command_context(const std::string& command, const std::vector<std::string>& inputs,
                                             const std::vector<std::string>& overrides = {});

}  // namespace perfcast

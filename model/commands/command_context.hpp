#pragma once
/// \file command_context.hpp
/// Shared pieces of machine output for commands that do not run the predict pipeline:
/// the `context` block (version, commit, date, inputs with their sizes and FNV-1a 64-bit
/// hashes, overrides) and CSV from a JSON array of objects.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace perfcast {

/// {"perfcast_version", "git_commit", "date", "command", "inputs": [{"file", "bytes",
/// "fnv1a64"}], "overrides"}.
[[nodiscard]] nlohmann::json command_context(const std::string& command, const std::vector<std::string>& inputs,
                                             const std::vector<std::string>& overrides = {});

/// One CSV row per object of `rows`. Columns: `columns` when given, else every scalar key
/// (number, string, boolean, null) in the order the objects list them (alphabetical for
/// nlohmann::json); nested objects and arrays are left out.
[[nodiscard]] std::string json_rows_to_csv(const nlohmann::json& rows, std::vector<std::string> columns = {});

/// A positive wall-clock duration given to `option` ("10s", "500ms"), in seconds;
/// ConfigError naming the option otherwise.
[[nodiscard]] double parse_duration_option(const char* option, const std::string& text);

}  // namespace perfcast

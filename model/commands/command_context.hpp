#pragma once
/// \file command_context.hpp
/// Shared pieces of machine output for commands that do not run the predict pipeline:
/// the `context` block (core/run_context.hpp), CSV from a JSON array of objects, and
/// duration options.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/run_context.hpp"  // command_context

namespace perfcast {

/// One CSV row per object of `rows`. Columns: `columns` when given, else every scalar key
/// (number, string, boolean, null) in the order the objects list them (alphabetical for
/// nlohmann::json); nested objects and arrays are left out.
[[nodiscard]] std::string json_rows_to_csv(const nlohmann::json& rows, std::vector<std::string> columns = {});

/// A positive wall-clock duration given to `option` ("10s", "500ms"), in seconds;
/// ConfigError naming the option otherwise.
[[nodiscard]] double parse_duration_option(const char* option, const std::string& text);

}  // namespace perfcast

#pragma once
/// \file json_text.hpp
/// The one way perfcast turns a JSON value into text for an output or a message.

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace perfcast {

/// JSON text of `j` (`indent` as nlohmann::json::dump: -1 compact). A string that is not
/// valid UTF-8 (a file name, a log line or a CSV cell with other bytes; JSON inputs are
/// checked when parsed) has each bad byte replaced by U+FFFD, so that an output is always
/// valid JSON and never fails on a name the user gave.
[[nodiscard]] std::string json_text(const nlohmann::json& j, int indent = -1);

}  // namespace perfcast

#pragma once
/// \file file_kind.hpp
/// What a file given to the wrong option looks like, and which command takes it. A reader
/// that finds a file of another kind than it expects (a CSV where JSON belongs, a Kineto
/// trace given as a workload, a result given as a plan) adds this sentence to its error.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace perfcast {

/// A parsed JSON document's kind and the command that reads it, e.g. "this is a PyTorch
/// profiler (Kineto) trace: `perfcast import --kineto FILE` makes a workload of it". Empty
/// when the document is none of the kinds perfcast knows.
[[nodiscard]] std::string describe_json_kind(const nlohmann::json& root);

/// The same for text that is not JSON: a CSV table, an nccl-tests log, a Kineto trace
/// archive. Empty when the text is none of these.
[[nodiscard]] std::string describe_text_kind(std::string_view text);

}  // namespace perfcast

#pragma once
/// \file accuracy_json.hpp
/// The `--json FILE` output of the accuracy checks in bench/ (scripts/accuracy_tables.py
/// reads it to regenerate the README's and docs/accuracy.md's tables):
///   {"check": NAME, "subsets": {LABEL: {"count", "geomean_abs", "mape", "max_abs", "bias"}},
///    "values": {...}}
/// Errors are fractions (0.044 is 4.4%), signed as predicted / measured - 1; "values" holds
/// anything else a table quotes (fitted constants, predicted and measured times, s).

#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error_stats.hpp"
#include "core/json_text.hpp"

namespace perfcast::bench {

[[nodiscard]] inline nlohmann::json error_summary_json(const std::vector<double>& errors) {
  const ErrorSummary s = summarize_errors(errors);
  return {{"count", s.count}, {"geomean_abs", s.geomean_abs}, {"mape", s.mape}, {"max_abs", s.max_abs},
          {"bias", s.mean_signed}};
}

/// Writes the check's JSON to `path` ("-": standard output); nothing when `path` is empty.
/// Throws std::runtime_error when the file cannot be written.
inline void write_accuracy_json(const std::string& path, const std::string& check,
                                const std::map<std::string, std::vector<double>>& subsets,
                                const nlohmann::json& values = nlohmann::json::object()) {
  if (path.empty()) return;
  nlohmann::json j = {{"check", check}, {"subsets", nlohmann::json::object()}, {"values", values}};
  for (const auto& [label, errors] : subsets) j["subsets"][label] = error_summary_json(errors);
  const std::string text = json_text(j, 2) + "\n";
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  std::ofstream f(path);
  f << text;
  if (!f.flush()) throw std::runtime_error("cannot write " + path);
}

}  // namespace perfcast::bench

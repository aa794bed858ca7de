#include "model/commands/command_context.hpp"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "core/json_reader.hpp"
#include "core/units.hpp"
#include "model/report/grid_report.hpp"
#include "core/json_text.hpp"

namespace perfcast {

std::string json_rows_to_csv(const nlohmann::json& rows, std::vector<std::string> columns) {
  std::vector<std::string> cols = std::move(columns);
  if (cols.empty()) {
    for (const auto& r : rows) {
      if (!r.is_object()) continue;
      for (auto it = r.begin(); it != r.end(); ++it) {
        if (it.value().is_structured()) continue;
        if (std::find(cols.begin(), cols.end(), it.key()) == cols.end()) cols.push_back(it.key());
      }
    }
  }
  std::string out;
  for (std::size_t c = 0; c < cols.size(); ++c) out += (c ? "," : "") + csv_field(cols[c]);
  out += "\n";
  for (const auto& r : rows) {
    if (!r.is_object()) continue;
    for (std::size_t c = 0; c < cols.size(); ++c) {
      if (c) out += ",";
      if (!r.contains(cols[c]) || r[cols[c]].is_null()) continue;
      const auto& v = r[cols[c]];
      if (v.is_string()) out += csv_field(v.get<std::string>());
      else if (v.is_number_float()) out += fmt::format("{:.9g}", v.get<double>());
      else out += json_text(v);
    }
    out += "\n";
  }
  return out;
}

double parse_duration_option(const char* option, const std::string& text) {
  double v = 0;
  try {
    v = parse_quantity(text, Dimension::kTime);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(option, "", e.what());
  }
  if (v <= 0) throw ConfigError(option, "", fmt::format("expected a duration > 0 such as \"10s\", got \"{}\"", text));
  return v;
}

}  // namespace perfcast

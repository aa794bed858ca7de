#include "core/csv_record.hpp"

#include <fmt/format.h>

#include "core/json_reader.hpp"

namespace perfcast {

std::vector<std::string> split_csv_record(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(field);
      field.clear();
    } else if (c != '\r') {
      field += c;
    }
  }
  out.push_back(field);
  return out;
}

std::string trim_blanks(const std::string& text) {
  const auto b = text.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return text.substr(b, text.find_last_not_of(" \t\r\n") - b + 1);
}

std::map<std::string, std::size_t> csv_header_columns(const std::vector<std::string>& header, const std::string& file,
                                                     const std::string& where) {
  std::map<std::string, std::size_t> columns;
  for (std::size_t i = 0; i < header.size(); ++i) {
    const std::string name = trim_blanks(header[i]);
    if (!columns.emplace(name, i).second)
      throw ConfigError(file, where, fmt::format("column \"{}\" appears twice in the header (fields {} and {})", name, columns[name] + 1, i + 1));
  }
  return columns;
}

}  // namespace perfcast

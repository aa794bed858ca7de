#include "topology/measurement_table_csv.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "core/csv_record.hpp"
#include "core/input_file.hpp"
#include "core/limits.hpp"
#include "core/json_reader.hpp"

namespace perfcast {
namespace {

/// A non-negative finite number, or nullopt for a blank field; throws for anything else.
std::optional<double> number_field(const std::string& text, const std::string& file, std::size_t line, const std::string& column) {
  const std::string t = trim_blanks(text);
  if (t.empty()) return std::nullopt;
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != t.size() || !std::isfinite(v) || v < 0) {
    throw ConfigError(file, fmt::format("line {}", line), fmt::format("column {}: expected a non-negative number, got \"{}\"", column, t));
  }
  return v;
}

/// A whole count in [1, max], or nullopt for a blank field; throws for anything else (a fraction, zero, or a count
/// beyond what perfcast models, which would not fit the int the samples hold).
std::optional<int> count_field(const std::string& text, const std::string& file, std::size_t line, const std::string& column,
                               int max) {
  const auto v = number_field(text, file, line, column);
  if (!v) return std::nullopt;
  if (*v < 1 || *v > max || std::floor(*v) != *v) {
    throw ConfigError(file, fmt::format("line {}", line),
                      fmt::format("column {}: expected a whole number in [1, {}], got \"{}\"", column, max, trim_blanks(text)));
  }
  return static_cast<int>(*v);
}

}  // namespace

std::string algorithm_from_nccl_algo(const std::string& env) {
  const auto pos = env.find("NCCL_ALGO=");
  if (pos == std::string::npos) return "";
  std::string v;
  for (std::size_t i = pos + 10; i < env.size() && (std::isalnum(static_cast<unsigned char>(env[i])) != 0); ++i)
    v += static_cast<char>(std::tolower(static_cast<unsigned char>(env[i])));
  if (v == "nvlstree") return "nvls_tree";
  if (v == "collnetchain") return "collnet_chain";
  if (v == "collnetdirect") return "collnet_direct";
  if (v == "nvls" || v == "ring" || v == "tree" || v == "pat") return v;
  return "";
}

bool is_measurement_table_csv(const std::string& path) {
  // Only the first line is looked at, and at most kMaxTextLineBytes of it (never a whole
  // device or a line without end).
  std::ifstream in(path, std::ios::binary);
  std::string first(limits::kMaxTextLineBytes, '\0');
  if (!in || !input_path_status(path).regular()) return false;
  in.read(first.data(), static_cast<std::streamsize>(first.size()));
  first.resize(static_cast<std::size_t>(in.gcount()));
  first = first.substr(0, first.find('\n'));
  if (first.size() >= 3 && static_cast<unsigned char>(first[0]) == 0xEF) first = first.substr(3);  // UTF-8 BOM
  return first.rfind("source_url,", 0) == 0;
}

std::vector<SourcedLog> parse_measurement_table_csv(const std::string& path) {
  return parse_measurement_table_csv_text(read_input_file(path), path);
}

std::vector<SourcedLog> parse_measurement_table_csv_text(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  std::size_t line_no = 0;
  std::map<std::string, std::size_t> col;
  std::vector<SourcedLog> logs;
  std::map<std::string, std::size_t> by_key;
  const char* required[] = {"source_url", "gpu", "gpus_per_node", "nodes", "nccl_version", "env", "collective",
                            "bytes", "time_us", "notes", "inplace_time_us", "inplace_busbw_GBps"};
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1 && line.size() >= 3 && static_cast<unsigned char>(line[0]) == 0xEF) line = line.substr(3);
    if (trim_blanks(line).empty()) continue;
    const auto fields = split_csv_record(line);
    if (col.empty()) {
      col = csv_header_columns(fields, name);
      for (const char* r : required)
        if (!col.count(r)) throw ConfigError(name, "line 1", fmt::format("missing column \"{}\"", r));
      continue;
    }
    if (fields.size() != col.size()) {
      throw ConfigError(name, fmt::format("line {}", line_no),
                        fmt::format("expected {} fields as in the header, got {}", col.size(), fields.size()));
    }
    auto get = [&](const char* c) { return trim_blanks(fields[col.at(c)]); };
    const auto kind = collective_from_name(get("collective"));
    if (!kind) throw ConfigError(name, fmt::format("line {}", line_no), fmt::format("unknown collective \"{}\"", get("collective")));
    const auto per_node = count_field(get("gpus_per_node"), name, line_no, "gpus_per_node", limits::kMaxGpus);
    if (!per_node) throw ConfigError(name, fmt::format("line {}", line_no), "column gpus_per_node: expected >= 1");
    const auto nodes_field = count_field(get("nodes"), name, line_no, "nodes", limits::kMaxGpus);
    const int nodes = nodes_field.value_or(1);
    if (static_cast<long long>(*per_node) * nodes > limits::kMaxGpus) {
      throw ConfigError(name, fmt::format("line {}", line_no),
                        fmt::format("{} GPUs per node x {} nodes: perfcast models at most {} GPUs", *per_node, nodes, limits::kMaxGpus));
    }
    const int ranks = *per_node * nodes;
    const auto bytes = number_field(get("bytes"), name, line_no, "bytes");
    if (!bytes || *bytes <= 0) throw ConfigError(name, fmt::format("line {}", line_no), "column bytes: expected a positive byte count");
    double time_s = 0;
    std::string basis;
    if (const auto t = number_field(get("time_us"), name, line_no, "time_us"); t && *t > 0) {
      time_s = *t * 1e-6;
      basis = "out-of-place time";
    } else if (const auto ti = number_field(get("inplace_time_us"), name, line_no, "inplace_time_us"); ti && *ti > 0) {
      time_s = *ti * 1e-6;
      basis = "in-place time";
    } else if (const auto bw = number_field(get("inplace_busbw_GBps"), name, line_no, "inplace_busbw_GBps"); bw && *bw > 0) {
      time_s = *bytes * bus_factor(*kind, ranks) / (*bw * 1e9);
      basis = "in-place busBw (derived)";
    } else {
      throw ConfigError(name, fmt::format("line {}", line_no), "no time: expected time_us, inplace_time_us or inplace_busbw_GBps");
    }
    const std::string key = get("source_url") + "\x1f" + get("gpu") + "\x1f" + get("nodes") + "\x1f" + get("env");
    auto it = by_key.find(key);
    if (it == by_key.end()) {
      SourcedLog l;
      l.log.file = fmt::format("{}#line{}", name, line_no);
      l.log.format = "csv-table";
      l.log.gpu = get("gpu");
      l.log.nccl_version = get("nccl_version");
      l.source_url = get("source_url");
      l.env = get("env");
      l.forced_algorithm = algorithm_from_nccl_algo(l.env);
      l.time_basis = basis;
      l.nodes_assumed = !nodes_field.has_value();
      it = by_key.emplace(key, logs.size()).first;
      logs.push_back(std::move(l));
    }
    SourcedLog& l = logs[it->second];
    if (l.time_basis != basis && l.time_basis.find("mixed") == std::string::npos) l.time_basis = "mixed: " + l.time_basis + ", " + basis;
    l.suspect = l.suspect || get("notes").find("suspect") != std::string::npos;
    l.log.samples.push_back({*kind, ranks, nodes, *bytes, time_s, l.log.file});
  }
  if (col.empty()) throw ConfigError(name, "line 1", "empty file: expected the header line");
  return logs;
}

}  // namespace perfcast

#include "model/commands/list_command.hpp"

#include <algorithm>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_reader.hpp"
#include "core/json_text.hpp"
#include "core/run_context.hpp"
#include "predictors/registry.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {
namespace {

/// The scale-out fabric of `s` in a few words: NICs, rails, tiers, SHARP.
std::string network_summary(const SystemSpec& s) {
  if (s.network.nics_per_node == 0) return "no scale-out network";
  std::string out = fmt::format("{} NICs of {:.0f} Gb/s per node", s.network.nics_per_node, s.network.nic_bandwidth * 8 / 1e9);
  out += s.network.rail_optimized ? ", rail-optimized" : ", not rail-optimized";
  for (const auto& l : s.network.levels) out += fmt::format(", {} {}:1", l.name, l.oversubscription);
  if (s.network.levels.empty() && s.network.oversubscription > 1) out += fmt::format(", {}:1 oversubscribed", s.network.oversubscription);
  if (s.network.sharp) out += ", SHARP";
  return out;
}

/// Where the system's collective times come from, in words.
std::string collectives_basis(const SystemSpec& s) {
  return s.comms_calibration.empty() ? std::string("spec-derived (no collective calibration)")
                                     : "calibrated where " + s.comms_calibration.filename().string() +
                                           " has a fit, spec-derived elsewhere";
}

/// One system file: its shape, fabric, collectives' basis and the source of every group of
/// constants (the file's "sources"), as text and as a JSON object.
std::pair<std::string, nlohmann::json> describe_system(const std::filesystem::path& file) {
  const SystemSpec s = load_system(file);
  std::string text = fmt::format("{:<28} [system] {}\n", file.filename().string(), s.name);
  text += fmt::format("    {} GPUs ({} node(s) of {} {}), NVLink domain of {} GPUs{}; {}\n", s.world_size(), s.nodes, s.gpus_per_node,
                      s.gpu.name, s.domain_size(), s.nvls ? " with NVLS" : "", network_summary(s));
  text += fmt::format("    collectives: {}\n", collectives_basis(s));
  nlohmann::json sources = nlohmann::json::object();
  for (const auto& [key, source] : s.sources) {
    text += fmt::format("    source ({}): {}\n", key, source);
    sources[key] = source;
  }
  nlohmann::json j = {{"file", file.string()},
                      {"name", s.name},
                      {"gpus", s.world_size()},
                      {"nodes", s.nodes},
                      {"gpus_per_node", s.gpus_per_node},
                      {"gpu", s.gpu.name},
                      {"nvlink_domain", s.domain_size()},
                      {"nvls", s.nvls},
                      {"network", network_summary(s)},
                      {"collectives", collectives_basis(s)},
                      {"comms_calibration", s.comms_calibration.empty() ? nlohmann::json() : nlohmann::json(s.comms_calibration.string())},
                      {"sources", sources}};
  return {text, j};
}

/// Every system file (schema perfcast.system) of `dir`, by file name.
std::vector<std::filesystem::path> system_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const auto& p = entry.path();
    if (p.extension() != ".json" || p.filename().string().find(".comms.") != std::string::npos) continue;
    const JsonDocument doc = load_json_file(p);
    if (doc.root.is_object() && doc.root.value("schema", "") == "perfcast.system") out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

ListOutcome run_list(const std::string& systems_dir) {
  const std::filesystem::path dir = systems_dir.empty() ? std::filesystem::path("configs/systems") : std::filesystem::path(systems_dir);
  const bool listed = std::filesystem::is_directory(dir);
  if (!listed && !systems_dir.empty()) throw ConfigError(systems_dir, "", "expected a folder of system files");
  ListOutcome r;
  nlohmann::json predictors = nlohmann::json::array();
  for (const auto& e : builtin_registry()) {
    r.text += fmt::format("{:<28} [{}]\n    {}\n    source: {}\n", e.name, e.family, e.description, e.source);
    predictors.push_back({{"name", e.name}, {"family", e.family}, {"description", e.description}, {"source", e.source}});
  }
  nlohmann::json systems = nlohmann::json::array();
  if (!listed) {
    r.text += "systems: no configs/systems folder here (run from the repository root or pass --systems FOLDER)\n";
  } else {
    for (const auto& file : system_files(dir)) {
      auto [text, j] = describe_system(file);
      r.text += text;
      systems.push_back(std::move(j));
    }
  }
  const nlohmann::json j = {{"context", command_context("list", {})},
                            {"predictors", predictors},
                            {"systems_folder", listed ? nlohmann::json(dir.string()) : nlohmann::json()},
                            {"systems", systems}};
  r.json = json_text(j, 2) + "\n";
  return r;
}

}  // namespace perfcast

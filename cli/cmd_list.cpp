#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "core/json_reader.hpp"
#include "predictors/registry.hpp"
#include "topology/system_spec.hpp"

namespace perfcast::cli {

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

/// One system file: its shape, fabric, where its collective times come from, and the
/// source of every group of constants (the file's "sources").
void print_system(const std::filesystem::path& file) {
  const SystemSpec s = load_system(file);
  std::cout << fmt::format("{:<28} [system] {}\n", file.filename().string(), s.name);
  std::cout << fmt::format("    {} GPUs ({} node(s) of {} {}), NVLink domain of {} GPUs{}; {}\n", s.world_size(), s.nodes,
                           s.gpus_per_node, s.gpu.name, s.domain_size(), s.nvls ? " with NVLS" : "", network_summary(s));
  std::cout << fmt::format("    collectives: {}\n", s.comms_calibration.empty()
                                                        ? std::string("spec-derived (no collective calibration)")
                                                        : "calibrated where " + s.comms_calibration.filename().string() +
                                                              " has a fit, spec-derived elsewhere");
  for (const auto& [key, text] : s.sources) std::cout << fmt::format("    source ({}): {}\n", key, text);
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

Action add_list(CLI::App& app) {
  auto* cmd = app.add_subcommand("list",
                                 "List the predictors and collective models, and the system files, with the sources of their constants");
  auto systems = std::make_shared<std::string>();
  cmd->add_option("--systems", *systems,
                  "folder of system files to list (default: configs/systems under the current folder, when it exists)");
  return [systems]() {
    const std::filesystem::path dir = systems->empty() ? std::filesystem::path("configs/systems") : std::filesystem::path(*systems);
    const bool listed = std::filesystem::is_directory(dir);
    if (!listed && !systems->empty()) throw ConfigError(*systems, "", "expected a folder of system files");
    for (const auto& e : builtin_registry()) {
      std::cout << fmt::format("{:<28} [{}]\n    {}\n    source: {}\n", e.name, e.family, e.description, e.source);
    }
    if (!listed) {
      std::cout << "systems: no configs/systems folder here (run from the repository root or pass --systems FOLDER)\n";
      return 0;
    }
    for (const auto& file : system_files(dir)) print_system(file);
    return 0;
  };
}

}  // namespace perfcast::cli

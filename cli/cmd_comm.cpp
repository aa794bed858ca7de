#include <cmath>
#include <iostream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "core/limits.hpp"
#include "cli/output_file.hpp"
#include "perfcast/build_info.hpp"
#include "topology/collective_calibration.hpp"
#include "core/json_reader.hpp"
#include "topology/system_spec.hpp"

namespace perfcast::cli {
namespace {

struct CommArgs {
  std::string system;
  std::string collective = "all_reduce";
  std::string sizes = "8B:16GiB";
  int ranks = 0;
  int nodes = 0;
  std::string json;
};

double parse_size(const std::string& text) {
  try {
    return parse_quantity(text, Dimension::kBytes);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("--sizes", "", e.what());
  }
}

/// "8B:16GiB" doubles from the first to the last; "1MB,64MB" lists sizes.
std::vector<double> parse_sizes(const std::string& spec) {
  std::vector<double> out;
  const auto colon = spec.find(':');
  if (colon != std::string::npos) {
    const double lo = parse_size(spec.substr(0, colon)), hi = parse_size(spec.substr(colon + 1));
    if (lo <= 0 || hi < lo) throw ConfigError("--sizes", "", fmt::format("expected FROM:TO with 0 < FROM <= TO, got \"{}\"", spec));
    for (double s = lo; s <= hi * (1 + 1e-12); s *= 2) out.push_back(s);
  } else {
    std::stringstream in(spec);
    std::string item;
    while (std::getline(in, item, ',')) {
      out.push_back(parse_size(item));
      if (out.size() > static_cast<std::size_t>(limits::kMaxSweepSizes)) break;
    }
  }
  if (out.empty()) throw ConfigError("--sizes", "", "no sizes");
  if (out.size() > static_cast<std::size_t>(limits::kMaxSweepSizes))
    throw ConfigError("--sizes", "", fmt::format("{} sizes; at most {} in one run", out.size(), limits::kMaxSweepSizes));
  return out;
}

CollectiveKind parse_kind(const std::string& s) {
  if (auto k = collective_from_name(s)) return *k;
  std::string msg = fmt::format("unknown collective \"{}\"", s);
  const std::string guess = closest_match(s, {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce"});
  if (!guess.empty()) msg += fmt::format(" (did you mean \"{}\"?)", guess);
  throw ConfigError("--collective", "", msg);
}

}  // namespace

Action add_comm(CLI::App& app) {
  auto* cmd = app.add_subcommand("comm", "Predict a collective's time and bandwidth over a range of sizes (nccl-tests style)");
  auto a = std::make_shared<CommArgs>();
  cmd->add_option("--system", a->system, "system file")->required();
  cmd->add_option("--collective", a->collective, "all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce");
  cmd->add_option("--sizes", a->sizes, "FROM:TO doubling (default 8B:16GiB) or a comma list; nccl-tests byte convention");
  cmd->add_option("--ranks", a->ranks, "ranks taking part (default: all GPUs of the nodes used)")->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--nodes", a->nodes, "nodes used (default: as few as hold the ranks)")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--json", a->json, "write results as JSON to FILE, or - for standard output");
  return [a]() {
    JsonDocument doc = load_json_file(a->system);
    if (a->nodes > 0) apply_override(doc, "nodes", std::to_string(a->nodes));
    const SystemSpec s = parse_system(doc);
    const CollectiveKind kind = parse_kind(a->collective);
    const std::vector<double> sizes = parse_sizes(a->sizes);
    const int n = a->ranks > 0 ? a->ranks : s.world_size();
    if (n > s.world_size()) {
      throw ConfigError("--ranks", "", fmt::format("{} has {} ranks{}", s.name, s.world_size(), a->nodes > 0 ? "" : " (use --nodes)"));
    }
    if (n < 2) throw ConfigError(a->system, "/gpus_per_node", "a collective needs at least 2 ranks (use --nodes)");
    // Spread the ranks evenly over the nodes used, as a job launched with N ranks per node.
    const int nodes_used = a->nodes > 0 ? a->nodes : (n + s.gpus_per_node - 1) / s.gpus_per_node;
    if (n % nodes_used != 0) throw ConfigError("--ranks", "", fmt::format("{} ranks do not spread evenly over {} nodes", n, nodes_used));
    RankGroup g;
    for (int node = 0; node < nodes_used; ++node)
      for (int i = 0; i < n / nodes_used; ++i) g.ranks.push_back(node * s.gpus_per_node + i);
    const auto model = make_collective_model(s);
    nlohmann::json rows = nlohmann::json::array();
    std::string text = fmt::format("# {} on {}: {} ranks on {} node(s), model {}\n#{:>14} {:>12} {:>11} {:>11} {:>18} {:>7} {:>8}\n",
                                   collective_name(kind), s.name, n, nodes_used, model->name(), "size (B)", "time (us)",
                                   "algbw GB/s", "busbw GB/s", "algorithm", "proto", "bound");
    for (double bytes : sizes) {
      const auto e = model->estimate(CollectiveDesc{kind, bytes, {}}, g);
      const double algbw = e.time > 0 ? bytes / e.time / 1e9 : 0;
      const double busbw = algbw * bus_factor(kind, n);
      text += fmt::format(" {:>14.0f} {:>12.2f} {:>11.2f} {:>11.2f} {:>18} {:>7} {:>8}\n", bytes, e.time * 1e6, algbw, busbw,
                          e.algorithm, e.protocol, e.bottleneck);
      rows.push_back({{"bytes", bytes}, {"time_s", e.time}, {"algbw_GBps", algbw}, {"busbw_GBps", busbw},
                      {"algorithm", e.algorithm}, {"protocol", e.protocol}, {"bottleneck", e.bottleneck}});
    }
    std::vector<std::pair<std::string, std::string>> files;
    if (!a->json.empty()) {
      nlohmann::json j = {{"context", {{"perfcast_version", build_info::kVersion}, {"git_commit", build_info::kGitCommit},
                                       {"system", s.name}, {"file", s.file}, {"collective", collective_name(kind)},
                                       {"ranks", n}, {"nodes", nodes_used}, {"model", model->name()}}},
                          {"results", rows}};
      files.emplace_back(a->json, j.dump(2) + "\n");
    }
    write_outputs(files);
    if (a->json != "-") std::cout << text;
    return 0;
  };
}

}  // namespace perfcast::cli

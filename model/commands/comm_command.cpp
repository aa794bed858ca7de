#include "model/commands/comm_command.hpp"

#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/limits.hpp"
#include "perfcast/build_info.hpp"
#include "topology/collective_calibration.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {
namespace {

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

CommOutcome run_comm(CommRequest req) {
  const std::string system_file = req.system.file;
  if (req.nodes < 0) throw ConfigError("--nodes", std::to_string(req.nodes), "expected at least 1 node");
  if (req.ranks < 0) throw ConfigError("--ranks", std::to_string(req.ranks), "expected at least 2 ranks");
  if (req.nodes > 0) apply_override(req.system, "nodes", std::to_string(req.nodes));
  const SystemSpec s = parse_system(req.system);
  const CollectiveKind kind = parse_kind(req.collective);
  const std::vector<double> sizes = parse_sizes(req.sizes);
  const int n = req.ranks > 0 ? req.ranks : s.world_size();
  if (n > s.world_size()) {
    throw ConfigError("--ranks", "", fmt::format("{} has {} ranks{}", s.name, s.world_size(), req.nodes > 0 ? "" : " (use --nodes)"));
  }
  if (n < 2) throw ConfigError(system_file, "/gpus_per_node", "a collective needs at least 2 ranks (use --nodes)");
  // Spread the ranks evenly over the nodes used, as a job launched with N ranks per node.
  const int nodes_used = req.nodes > 0 ? req.nodes : (n + s.gpus_per_node - 1) / s.gpus_per_node;
  if (n % nodes_used != 0) throw ConfigError("--ranks", "", fmt::format("{} ranks do not spread evenly over {} nodes", n, nodes_used));
  RankGroup g;
  for (int node = 0; node < nodes_used; ++node)
    for (int i = 0; i < n / nodes_used; ++i) g.ranks.push_back(node * s.gpus_per_node + i);
  const auto model = make_collective_model(s);
  nlohmann::json rows = nlohmann::json::array();
  CommOutcome out;
  out.text = fmt::format("# {} on {}: {} ranks on {} node(s), model {}\n#{:>14} {:>12} {:>11} {:>11} {:>18} {:>7} {:>8}\n",
                         collective_name(kind), s.name, n, nodes_used, model->name(), "size (B)", "time (us)", "algbw GB/s",
                         "busbw GB/s", "algorithm", "proto", "bound");
  for (double bytes : sizes) {
    const auto e = model->estimate(CollectiveDesc{kind, bytes, {}}, g);
    const double algbw = e.time > 0 ? bytes / e.time / 1e9 : 0;
    const double busbw = algbw * bus_factor(kind, n);
    out.text += fmt::format(" {:>14.0f} {:>12.2f} {:>11.2f} {:>11.2f} {:>18} {:>7} {:>8}\n", bytes, e.time * 1e6, algbw, busbw,
                            e.algorithm, e.protocol, e.bottleneck);
    rows.push_back({{"bytes", bytes}, {"time_s", e.time}, {"algbw_GBps", algbw}, {"busbw_GBps", busbw},
                    {"algorithm", e.algorithm}, {"protocol", e.protocol}, {"bottleneck", e.bottleneck}});
  }
  const nlohmann::json j = {{"context", {{"perfcast_version", build_info::kVersion}, {"git_commit", build_info::kGitCommit},
                                         {"system", s.name}, {"file", s.file}, {"collective", collective_name(kind)},
                                         {"ranks", n}, {"nodes", nodes_used}, {"model", model->name()}}},
                            {"results", rows}};
  out.json = j.dump(2) + "\n";
  return out;
}

}  // namespace perfcast

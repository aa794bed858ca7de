#include "model/commands/comm_command.hpp"

#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/deadline.hpp"
#include "core/limits.hpp"
#include "model/commands/command_context.hpp"
#include "model/report/grid_report.hpp"
#include "perfcast/build_info.hpp"
#include "topology/collective_calibration.hpp"
#include "topology/system_spec.hpp"
#include "core/json_text.hpp"

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

/// "1,2,4" -> {1, 2, 4}; "" -> {0} (0: as few nodes as hold the ranks).
std::vector<int> parse_node_list(const std::string& spec) {
  if (spec.empty()) return {0};
  std::vector<int> out;
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || item.empty() || v < 1 || v > limits::kMaxGpus)
      throw ConfigError("--nodes", "", fmt::format("expected node counts like 1,2,4, each at least 1 and at most {}, got \"{}\"", limits::kMaxGpus, spec));
    out.push_back(v);
  }
  if (out.empty()) throw ConfigError("--nodes", "", "no node counts");
  return out;
}

}  // namespace

CommOutcome run_comm(CommRequest req) {
  const std::string system_file = req.system.file;
  if (req.ranks < 0) throw ConfigError("--ranks", std::to_string(req.ranks), "expected at least 2 ranks");
  const CollectiveKind kind = parse_kind(req.collective);
  const std::vector<double> sizes = parse_sizes(req.sizes);
  CommOutcome out;
  out.csv = "nodes,ranks,bytes,time_s,algbw_GBps,busbw_GBps,algorithm,protocol,bottleneck,basis\n";
  nlohmann::json tables = nlohmann::json::array();
  std::string system_name, model_name;
  // An all-to-all's cost is summed over rank pairs, once per size: its work is bounded as
  // ranks^2 x sizes over all node counts (2^30: 64 sizes at 4,096 ranks take a few seconds).
  constexpr double kMaxPairEvaluations = 1073741824.0;
  double pair_evaluations = 0;
  for (int nodes : parse_node_list(req.nodes)) {
    JsonDocument doc = req.system;
    for (const auto& o : req.overrides) {
      const bool prefixed = o.rfind("system.", 0) == 0;
      const std::string rest = prefixed ? o.substr(7) : o;
      const auto eq = rest.find('=');
      if (eq == std::string::npos || eq == 0) throw ConfigError("--set", o, "expected PATH=VALUE, e.g. system.nic_bandwidth=50GB/s");
      apply_override(doc, rest.substr(0, eq), rest.substr(eq + 1));
    }
    if (nodes > 0) apply_override(doc, "nodes", std::to_string(nodes));
    const SystemSpec s = parse_system(doc);
    const int n = req.ranks > 0 ? req.ranks : s.world_size();
    if (n > s.world_size()) {
      throw ConfigError("--ranks", "", fmt::format("{} has {} ranks{}", s.name, s.world_size(), nodes > 0 ? "" : " (use --nodes)"));
    }
    if (n < 2) throw ConfigError(system_file, "/gpus_per_node", "a collective needs at least 2 ranks (use --nodes)");
    // Spread the ranks evenly over the nodes used, as a job launched with N ranks per node.
    const int nodes_used = nodes > 0 ? nodes : (n + s.gpus_per_node - 1) / s.gpus_per_node;
    if (n % nodes_used != 0) throw ConfigError("--ranks", "", fmt::format("{} ranks do not spread evenly over {} nodes", n, nodes_used));
    if (kind == CollectiveKind::kAllToAll || kind == CollectiveKind::kAllToAllV) {
      if (n > limits::kMaxPairwiseRanks)
        throw ConfigError("--nodes", "", fmt::format("an all-to-all over {} ranks; at most {} (its cost is per pair of ranks)", n,
                                                     limits::kMaxPairwiseRanks));
      pair_evaluations += double(n) * double(n) * double(sizes.size());
      if (pair_evaluations > kMaxPairEvaluations)
        throw ConfigError("--sizes", "", fmt::format("an all-to-all at {} sizes over up to {} ranks is {:.3g} rank pairs to cost; at "
                                                     "most {:.3g} in one run (fewer sizes or node counts)",
                                                     sizes.size(), n, pair_evaluations, kMaxPairEvaluations));
    }
    RankGroup g;
    for (int node = 0; node < nodes_used; ++node)
      for (int i = 0; i < n / nodes_used; ++i) g.ranks.push_back(node * s.gpus_per_node + i);
    const auto model = make_collective_model(s);
    system_name = s.name;
    model_name = std::string(model->name());
    nlohmann::json rows = nlohmann::json::array();
    if (!out.text.empty()) out.text += "\n";
    const int domains = (g.ranks.back() / s.domain_size()) - (g.ranks.front() / s.domain_size()) + 1;
    out.text += fmt::format("# {} on {}: {} ranks on {} node(s){}, model {}\n#{:>14} {:>12} {:>11} {:>11} {:>14} {:>7} {:>7}  {}\n",
                            collective_name(kind), s.name, n, nodes_used,
                            s.domain_size() > s.gpus_per_node ? fmt::format(" in {} NVLink domain(s)", domains) : "", model->name(),
                            "size (B)", "time (us)", "algbw GB/s", "busbw GB/s", "algorithm", "proto", "bound", "time basis");
    for (double bytes : sizes) {
      check_deadline();  // --timeout / timeout=: between two sizes
      const auto e = model->estimate(CollectiveDesc{kind, bytes, {}}, g);
      const double algbw = e.time > 0 ? bytes / e.time / 1e9 : 0;
      const double busbw = algbw * bus_factor(kind, n);
      out.text += fmt::format(" {:>14.0f} {:>12.2f} {:>11.2f} {:>11.2f} {:>14} {:>7} {:>7}  {}\n", bytes, e.time * 1e6, algbw, busbw,
                              e.algorithm, e.protocol, e.bottleneck, e.basis);
      rows.push_back({{"bytes", bytes}, {"time_s", e.time}, {"algbw_GBps", algbw}, {"busbw_GBps", busbw},
                      {"algorithm", e.algorithm}, {"protocol", e.protocol}, {"bottleneck", e.bottleneck}, {"basis", e.basis}});
      out.csv += fmt::format("{},{},{:.0f},{:.9g},{:.9g},{:.9g},{},{},{},{}\n", nodes_used, n, bytes, e.time, algbw, busbw,
                             csv_field(e.algorithm), csv_field(e.protocol), csv_field(e.bottleneck), csv_field(e.basis));
    }
    tables.push_back({{"nodes", nodes_used}, {"ranks", n}, {"results", rows}});
  }
  nlohmann::json context = command_context("comm", {system_file}, req.overrides);
  context["system"] = system_name;
  context["file"] = system_file;
  context["collective"] = collective_name(kind);
  context["model"] = model_name;
  nlohmann::json j = {{"context", context}};
  // One node count keeps the flat layout (ranks, nodes, results) scripts read.
  if (tables.size() == 1) {
    j["context"]["ranks"] = tables[0]["ranks"];
    j["context"]["nodes"] = tables[0]["nodes"];
    j["results"] = tables[0]["results"];
  } else {
    j["tables"] = tables;
  }
  out.json = json_text(j, 2) + "\n";
  return out;
}

}  // namespace perfcast

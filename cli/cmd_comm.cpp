#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/output_file.hpp"
#include "topology/collective.hpp"
#include "topology/json_reader.hpp"
#include "topology/system_spec.hpp"

namespace perfcast::cli {
namespace {

struct CommArgs {
  std::string system;
  std::string collective = "all_reduce";
  std::vector<std::string> sizes{"1MB", "16MB", "256MB"};
  int ranks = 0;
  std::string json;
};

CollectiveKind parse_kind(const std::string& s) {
  const std::vector<std::pair<std::string, CollectiveKind>> kinds = {
      {"all_reduce", CollectiveKind::kAllReduce}, {"all_gather", CollectiveKind::kAllGather},
      {"reduce_scatter", CollectiveKind::kReduceScatter}, {"all_to_all", CollectiveKind::kAllToAll},
      {"broadcast", CollectiveKind::kBroadcast}, {"reduce", CollectiveKind::kReduce}};
  std::vector<std::string> names;
  for (const auto& [n, k] : kinds) {
    if (n == s) return k;
    names.push_back(n);
  }
  std::string msg = fmt::format("unknown collective \"{}\"", s);
  const std::string guess = closest_match(s, names);
  if (!guess.empty()) msg += fmt::format(" (did you mean \"{}\"?)", guess);
  throw ConfigError("--collective", "", msg);
}

}  // namespace

Action add_comm(CLI::App& app) {
  auto* cmd = app.add_subcommand("comm", "Predict one collective's time and bus bandwidth on a system");
  auto a = std::make_shared<CommArgs>();
  cmd->add_option("--system", a->system, "system file")->required();
  cmd->add_option("--collective", a->collective, "all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce");
  cmd->add_option("--size", a->sizes, "message sizes in nccl-tests convention, e.g. 64MB (repeatable)");
  cmd->add_option("--ranks", a->ranks, "ranks taking part (first N of the system; default: all)")->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--json", a->json, "write results as JSON to FILE, or - for standard output");
  return [a]() {
    const SystemSpec s = load_system(a->system);
    const CollectiveKind kind = parse_kind(a->collective);
    const int n = a->ranks > 0 ? a->ranks : s.world_size();
    if (n > s.world_size()) throw ConfigError("--ranks", "", fmt::format("the system has only {} ranks", s.world_size()));
    if (n < 2) throw ConfigError(a->system, "/gpus_per_node", "a collective needs at least 2 ranks");
    RankGroup g;
    for (int r = 0; r < n; ++r) g.ranks.push_back(r);
    const AlphaBetaCollectiveModel model(s);
    nlohmann::json rows = nlohmann::json::array();
    std::string text = fmt::format("{} on {} ({} ranks), model {}\n{:>12} {:>12} {:>12} {:>8} {:>7} {:>8}\n", a->collective,
                                   s.name, n, model.name(), "size", "time", "busbw GB/s", "algo", "proto", "bound");
    for (const auto& size_text : a->sizes) {
      double bytes = 0;
      try {
        bytes = parse_quantity(size_text, Dimension::kBytes);
      } catch (const std::invalid_argument& e) {
        throw ConfigError("--size", "", e.what());
      }
      const auto e = model.estimate(CollectiveDesc{kind, bytes, {}}, g);
      text += fmt::format("{:>12} {:>12} {:>12.1f} {:>8} {:>7} {:>8}\n", format_bytes(bytes), format_time(e.time),
                          e.bus_bandwidth / 1e9, e.algorithm, e.protocol, e.bottleneck);
      rows.push_back({{"bytes", bytes}, {"time_s", e.time}, {"bus_bandwidth_Bps", e.bus_bandwidth},
                      {"algorithm", e.algorithm}, {"protocol", e.protocol}, {"bottleneck", e.bottleneck}});
    }
    std::vector<std::pair<std::string, std::string>> files;
    if (!a->json.empty()) {
      nlohmann::json j = {{"context", {{"system", s.name}, {"file", s.file}, {"collective", a->collective}, {"ranks", n},
                                       {"model", model.name()}}},
                          {"results", rows}};
      files.emplace_back(a->json, j.dump(2) + "\n");
    }
    write_outputs(files);
    if (a->json != "-") std::cout << text;
    return 0;
  };
}

}  // namespace perfcast::cli

#include "core/file_kind.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace perfcast {
namespace {

/// perfcast's own file kinds (the "schema" key of configs, calibrations and measurements)
/// and where each is given.
const std::map<std::string, std::string, std::less<>>& perfcast_kinds() {
  static const std::map<std::string, std::string, std::less<>> kinds = {
      {"perfcast.system", "a perfcast system file: give it with --system"},
      {"perfcast.workload", "a perfcast workload file: give it with --workload"},
      {"perfcast.plan", "a perfcast sharding plan: give it with --plan (predict, run) or write one with `perfcast shard --out`"},
      {"perfcast.runtime", "a perfcast runtime profile: name it with `--set runtime=NAME` (configs/runtimes/NAME.json)"},
      {"perfcast.sweep", "a perfcast microbenchmark sweep: give it to `perfcast profile --sweep`"},
      {"perfcast.comms_calibration", "a collective calibration: a system file names it (configs/systems/NAME.comms.json)"},
      {"perfcast.kernel_calibration", "a kernel calibration: give it with --calibration (predict, replay)"},
      {"perfcast.measurement", "a line of kernel measurements: give the file to `perfcast calibrate kernels --measurements`"},
      {"perfcast.index_stats", "embedding index statistics: a workload table's distribution names it"},
      {"perfcast.validation_result", "a validation result line: give the file to `perfcast validate --summarize`"},
      {"perfcast.pytorch_result", "a PyTorch benchmark result line: give the file to `perfcast validate --compare`"},
  };
  return kinds;
}

bool looks_like_torchrec_plan(const nlohmann::json& root) {
  // ShardingPlan._serialize(): {"plan": {module: {table: {"sharding_type": ...}}}}; or the
  // module -> table -> ParameterSharding mapping itself.
  const nlohmann::json* modules = root.contains("plan") && root["plan"].is_object() ? &root["plan"] : &root;
  for (const auto& [module, tables] : modules->items()) {
    if (!tables.is_object()) return false;
    for (const auto& [table, sharding] : tables.items()) {
      return sharding.is_object() && sharding.contains("sharding_type");
    }
  }
  return false;
}

}  // namespace

std::string describe_json_kind(const nlohmann::json& root) {
  if (!root.is_object()) return "";
  if (root.contains("schema") && root["schema"].is_string()) {
    const std::string schema = root["schema"];
    const auto it = perfcast_kinds().find(schema);
    if (it != perfcast_kinds().end()) return "this is " + it->second;
  }
  if (root.contains("traceEvents")) {
    return "this is a PyTorch profiler (Kineto) trace: `perfcast import --kineto FILE --out workload.json` makes a "
           "workload of it, `perfcast replay --kineto FILE` re-simulates it, `perfcast trace-stats FILE` summarises it";
  }
  if (root.contains("nodes") && root.contains("schema")) {
    return "this is a PyTorch execution trace: give it with --et beside its Kineto trace (`perfcast import`, "
           "`perfcast replay`)";
  }
  if (root.contains("context") && root["context"].is_object() && root["context"].contains("command")) {
    const auto& c = root["context"]["command"];
    return fmt::format("this is a perfcast result (written by `perfcast {} --json`)",
                       c.is_string() ? c.get<std::string>() : std::string("..."));
  }
  if (looks_like_torchrec_plan(root)) {
    return "this is a TorchRec sharding plan: give it with --plan (predict, run), which reads TorchRec's shape";
  }
  return "";
}

std::string describe_text_kind(std::string_view text) {
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f && static_cast<unsigned char>(text[1]) == 0x8b) {
    return "this is gzip-compressed: Kineto traces (.json.gz, .tar.gz) go to `perfcast replay --kineto`, "
           "`perfcast import --kineto` or `perfcast trace-stats`";
  }
  if (text.size() > 262 && text.substr(257, 5) == "ustar") {
    return "this is a tar archive: archives of Kineto traces go to `perfcast replay --kineto`, `perfcast import "
           "--kineto` or `perfcast trace-stats`";
  }
  std::string_view first = text.substr(0, text.find('\n'));
  if (first.size() >= 3 && static_cast<unsigned char>(first[0]) == 0xEF) first.remove_prefix(3);  // UTF-8 BOM
  if (first.find("nThread") != std::string_view::npos || first.find("# nccl-tests") != std::string_view::npos ||
      text.find("# Avg bus bandwidth") != std::string_view::npos) {
    return "this is an nccl-tests log: give it to `perfcast calibrate comms --nccl-tests`";
  }
  const auto commas = std::count(first.begin(), first.end(), ',');
  if (commas >= 2 && first.find('{') == std::string_view::npos && first.find('[') == std::string_view::npos) {
    return fmt::format("this looks like a CSV table (header \"{}\"): perfcast reads CSV in `calibrate comms "
                       "--nccl-tests` (collective tables), `calibrate runtime --measurements` (measured runs) and "
                       "`kernels --measurements` (kernel timings)",
                       first.substr(0, 60));
  }
  return "";
}

}  // namespace perfcast

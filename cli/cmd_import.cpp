#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/output_file.hpp"
#include "model/traces/execution_trace.hpp"
#include "model/traces/kineto_trace.hpp"
#include "model/traces/trace_workload.hpp"
#include "core/units.hpp"

namespace perfcast::cli {

Action add_import(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "import", "Turn PyTorch profiler (Kineto) traces, and optionally execution traces, into a workload predict accepts");
  auto files = std::make_shared<std::vector<std::string>>();
  auto et_files = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto name = std::make_shared<std::string>();
  auto batch = std::make_shared<std::int64_t>(0);
  cmd->add_option("--kineto", *files, "Kineto traces, one per rank (.json, .json.gz, or a .tar.gz of several)")->required();
  cmd->add_option("--et", *et_files,
                  "PyTorch execution traces of the same step, one per rank (.json, .json.gz, or a .tar.gz of several)");
  cmd->add_option("--out", *out, "workload file to write (model \"trace\")")->required();
  cmd->add_option("--name", *name, "workload name (default: the first trace's name)");
  cmd->add_option("--batch", *batch, "samples in the imported window: global batch x imported steps (for samples/s; 0: unknown)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 50));
  return [files, et_files, out, name, batch]() {
    auto traces = load_kineto_traces(*files);
    std::vector<ExecutionTrace> ets;
    std::vector<const ExecutionTrace*> et_of_trace;
    if (!et_files->empty()) {
      ets = load_execution_traces(*et_files);
      const auto pairing = pair_execution_traces(ets, traces);
      for (std::size_t i = 0; i < traces.size(); ++i) {
        ExecutionTrace& et = ets[static_cast<std::size_t>(pairing[i])];
        link_execution_trace(et, traces[i]);
        et_of_trace.push_back(&et);
      }
    }
    ImportStats stats;
    TraceWorkload w = import_trace_workload(traces, et_of_trace, name->empty() ? "imported " + traces[0].file : *name, stats);
    w.batch = *batch;
    nlohmann::json reasons = nlohmann::json::array();
    for (const auto& r : stats.reasons)
      reasons.push_back({{"reason", r.reason}, {"kernels", r.count}, {"time", format_time(r.time)}});
    nlohmann::json source = {{"kineto", *files},
                             {"gpu", traces[0].device_name()},
                             {"gpu_ops", stats.ops},
                             {"recognized", stats.recognized},
                             {"unrecognized", stats.unrecognized},
                             {"recognized_time", format_time(stats.recognized_time)},
                             {"unrecognized_time", format_time(stats.unrecognized_time)},
                             {"unrecognized_by_reason", reasons}};
    if (!et_files->empty()) {
      source["et"] = *et_files;
      source["et_nodes_linked"] = stats.et_linked;
    }
    write_outputs({{*out, trace_workload_to_json(w, source)}});
    const Seconds total = stats.recognized_time + stats.unrecognized_time;
    std::cout << fmt::format("perfcast import: {} rank{} of {}, {} ops -> {}\n", w.graph.ranks.size(),
                             w.graph.ranks.size() > 1 ? "s" : "", traces[0].device_name(), stats.ops, *out);
    std::cout << fmt::format("  recognized (predicted on the target system): {} ops, {} of measured GPU time ({:.1f}%)\n",
                             stats.recognized, format_time(stats.recognized_time),
                             total > 0 ? 100 * stats.recognized_time / total : 0.0);
    std::cout << fmt::format("  not recognized (keep their measured duration): {} ops, {} ({:.1f}%)\n", stats.unrecognized,
                             format_time(stats.unrecognized_time), total > 0 ? 100 * stats.unrecognized_time / total : 0.0);
    for (std::size_t i = 0; i < stats.reasons.size() && i < 8; ++i)
      std::cout << fmt::format("    {:>6} {:>11}  {}\n", stats.reasons[i].count, format_time(stats.reasons[i].time),
                               stats.reasons[i].reason);
    if (!stats.et_linked.empty()) {
      std::string linked;
      for (int n : stats.et_linked) linked += (linked.empty() ? "" : ", ") + std::to_string(n);
      std::cout << fmt::format("  execution-trace nodes linked to Kineto ops per rank: {}\n", linked);
    }
    return 0;
  };
}

}  // namespace perfcast::cli

#include <nlohmann/json.hpp>

#include "model/report/report.hpp"

namespace perfcast {

std::string render_chrome_trace(const Prediction& p) {
  // Chrome trace event format: "X" complete events, microsecond timestamps, pid = rank,
  // tid = lane (0 host, 1 compute, 2 communication, 3 copy), "M" metadata names.
  nlohmann::json events = nlohmann::json::array();
  for (int r = 0; r < p.timeline.world; ++r) {
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", r}, {"args", {{"name", "rank " + std::to_string(r)}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", r}, {"args", {{"sort_index", r}}}});
    for (int l = 0; l < kLaneCount; ++l) {
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", r}, {"tid", l},
                        {"args", {{"name", std::string(lane_name(static_cast<Lane>(l)))}}}});
    }
  }
  for (const auto& e : p.timeline.events) {
    const Op& op = p.graph.ranks[static_cast<std::size_t>(e.rank)].ops[static_cast<std::size_t>(e.op)];
    nlohmann::json args = {{"iteration", e.iteration}, {"phase", phase_name(op.phase)}};
    std::string name = op.name;
    if (e.kernel >= 0) {
      args["kernel"] = kernel_label(op.kernels[static_cast<std::size_t>(e.kernel)]);
      args["predictor"] = p.timed.ops[static_cast<std::size_t>(e.rank)][static_cast<std::size_t>(e.op)]
                              .kernels[static_cast<std::size_t>(e.kernel)]
                              .predictor;
    }
    if (op.collective && e.lane == Lane::kComm) {
      args["collective"] = collective_name(p.graph.collectives[static_cast<std::size_t>(*op.collective)].desc.kind);
    }
    events.push_back({{"ph", "X"}, {"name", name}, {"cat", std::string(lane_name(e.lane))}, {"pid", e.rank},
                      {"tid", static_cast<int>(e.lane)}, {"ts", e.start * 1e6}, {"dur", (e.end - e.start) * 1e6},
                      {"args", args}});
  }
  nlohmann::json j = {{"traceEvents", events}, {"displayTimeUnit", "ms"},
                      {"otherData", nlohmann::json::parse(context_json(p))}};
  return j.dump() + "\n";
}

}  // namespace perfcast

#include "validation/executor_trace.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <utility>

namespace perfcast::validation {

nlohmann::json gpu_ops_chrome_trace(const profiler::CorrelationResult& r) {
  std::uint64_t t0 = std::numeric_limits<std::uint64_t>::max();
  for (const auto& op : r.ops) t0 = std::min(t0, op.gpu.start_ns);
  nlohmann::json events = nlohmann::json::array();
  std::set<std::uint32_t> devices;
  std::set<std::pair<std::uint32_t, std::uint32_t>> streams;
  for (const auto& op : r.ops) {
    const auto& g = op.gpu;
    devices.insert(g.device);
    streams.insert({g.device, g.stream});
    nlohmann::json args = {{"kind", profiler::op_kind_name(g.kind)}, {"correlation_id", g.correlation_id}};
    if (g.kind != profiler::GpuOpKind::kKernel) args["bytes"] = g.bytes;
    events.push_back({{"name", g.name},
                      {"ph", "X"},
                      {"pid", g.device},
                      {"tid", g.stream},
                      {"ts", static_cast<double>(g.start_ns - t0) * 1e-3},
                      {"dur", static_cast<double>(g.end_ns - g.start_ns) * 1e-3},
                      {"args", std::move(args)}});
  }
  for (auto dev : devices) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", dev}, {"args", {{"name", "GPU " + std::to_string(dev)}}}});
  }
  for (auto [dev, stream] : streams) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", dev},
                      {"tid", stream},
                      {"args", {{"name", "stream " + std::to_string(stream)}}}});
  }
  return nlohmann::json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace perfcast::validation

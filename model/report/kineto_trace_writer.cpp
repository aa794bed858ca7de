/// \file kineto_trace_writer.cpp
/// The predicted timeline in the PyTorch profiler's (Kineto's) JSON trace format, one file
/// per rank, so that a prediction can be read by the tools that read measured profiles
/// (HolisticTraceAnalysis, perfcast trace-stats / replay) and diffed against one:
/// "ProfilerStep#N" annotations per simulated iteration, host ops as "cpu_op", one
/// "cuda_runtime" launch call per GPU activity linked by its correlation id, kernels
/// ("kernel") and copies ("gpu_memcpy") with args.stream and args.device, NCCL kernels
/// named as NCCL names them, "distributedInfo" and "deviceProperties".

#include <algorithm>
#include <filesystem>
#include <regex>
#include <limits>

#include <fmt/format.h>

#include "core/staged_output.hpp"
#include "model/report/report.hpp"
#include "model/report/trace_sink.hpp"

namespace perfcast {
namespace {

/// Stream ids as a PyTorch process typically shows them: the default compute stream 7,
/// NCCL's stream, and a side stream for copies.
int stream_of(Lane l) {
  switch (l) {
    case Lane::kCompute: return 7;
    case Lane::kComm: return 13;
    case Lane::kCopy: return 22;
    case Lane::kHost: return -1;
  }
  return 7;
}

/// "ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)"-style names, which trace readers
/// (perfcast's included) map back to the collective.
std::string nccl_kernel_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce: return "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
    case CollectiveKind::kAllGather: return "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
    case CollectiveKind::kReduceScatter: return "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
    case CollectiveKind::kBroadcast: return "ncclDevKernel_Broadcast_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
    default: return "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)";
  }
}

/// Start (s) of each simulated iteration on `rank`: its earliest event; the end of the
/// last is its latest event. Steps are [start_i, start_{i+1}).
std::vector<Seconds> step_bounds(const Prediction& p, const std::vector<std::size_t>& events) {
  const int n = p.timeline.iterations;
  std::vector<Seconds> start(static_cast<std::size_t>(n) + 1, std::numeric_limits<double>::infinity());
  Seconds last_end = 0;
  for (const std::size_t i : events) {
    const TimelineEvent& e = p.timeline.events[i];
    start[static_cast<std::size_t>(e.iteration)] = std::min(start[static_cast<std::size_t>(e.iteration)], e.start);
    if (e.iteration == n - 1) last_end = std::max(last_end, e.end);
  }
  start[static_cast<std::size_t>(n)] = last_end;
  return start;
}

/// Rank `rank`'s trace from `events` of the rank simulated for it (itself, or its
/// representative under symmetric simulation, whose program it runs).
void write_rank(const Prediction& p, int rank, const std::vector<std::size_t>& events, const ChromeTraceOptions& o, TraceSink& sink) {
  const int simulated = p.graph.representative(rank);
  auto& b = sink.buffer();
  const int pid = 1000 + rank;  // the host process; GPU events carry the device as pid
  b.append(std::string_view("{\"schemaVersion\":1,\"deviceProperties\":[{\"id\":"));
  fmt::format_to(std::back_inserter(b), "{},\"name\":", rank);
  append_json_string(b, p.system.gpu.name);
  fmt::format_to(std::back_inserter(b), ",\"totalGlobalMem\":{:.0f}}}],\"distributedInfo\":{{\"backend\":\"nccl\",\"rank\":{},\"world_size\":{}}},",
                 double(p.system.gpu.memory), rank, p.timeline.world);
  b.append(std::string_view("\"otherData\":"));
  b.append(context_json(p));
  b.append(std::string_view(",\"traceEvents\":[\n"));
  fmt::format_to(std::back_inserter(b), R"x({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":"rank {} (predicted)"}}}})x",
                 pid, rank);
  const std::vector<Seconds> bounds = step_bounds(p, events);
  auto keep_iteration = [&](int i) { return o.iterations.empty() || std::find(o.iterations.begin(), o.iterations.end(), i) != o.iterations.end(); };
  for (int i = 0; i < p.timeline.iterations; ++i) {
    if (!keep_iteration(i) || !(bounds[static_cast<std::size_t>(i)] <= bounds[static_cast<std::size_t>(i) + 1])) continue;
    fmt::format_to(std::back_inserter(b),
                   ",\n" R"({{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{}","pid":{},"tid":1,"ts":{:.3f},"dur":{:.3f}}})", i, pid,
                   bounds[static_cast<std::size_t>(i)] * 1e6, (bounds[static_cast<std::size_t>(i) + 1] - bounds[static_cast<std::size_t>(i)]) * 1e6);
  }
  const Seconds launch = p.system.host.launch_overhead;
  long long correlation = 1;
  for (const std::size_t i : events) {
    const TimelineEvent& e = p.timeline.events[i];
    if (!keep_iteration(e.iteration)) continue;
    const Op& op = p.graph.ranks[static_cast<std::size_t>(simulated)].ops[static_cast<std::size_t>(e.op)];
    if (e.lane == Lane::kHost) {
      b.append(std::string_view(",\n{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":"));
      append_json_string(b, op.name);
      fmt::format_to(std::back_inserter(b), R"(,"pid":{},"tid":1,"ts":{:.3f},"dur":{:.3f}}})", pid, e.start * 1e6, (e.end - e.start) * 1e6);
      sink.flush();
      continue;
    }
    const bool copy = e.kernel >= 0 && std::holds_alternative<MemcpyDesc>(op.kernels[static_cast<std::size_t>(e.kernel)]);
    std::string name;
    if (e.lane == Lane::kComm && op.collective) name = nccl_kernel_name(p.graph.collectives[static_cast<std::size_t>(*op.collective)].desc.kind);
    else if (e.kernel >= 0) name = kernel_label(op.kernels[static_cast<std::size_t>(e.kernel)]);
    else name = op.name;
    const Seconds call_start = std::max(0.0, std::min(e.launch, e.start) - launch);
    fmt::format_to(std::back_inserter(b),
                   ",\n" R"({{"ph":"X","cat":"cuda_runtime","name":"{}","pid":{},"tid":1,"ts":{:.3f},"dur":{:.3f},"args":{{"correlation":{}}}}})",
                   copy ? "cudaMemcpyAsync" : "cudaLaunchKernel", pid, call_start * 1e6, launch * 1e6, correlation);
    b.append(std::string_view(",\n{\"ph\":\"X\",\"cat\":\""));
    b.append(std::string_view(copy ? "gpu_memcpy" : "kernel"));
    b.append(std::string_view("\",\"name\":"));
    append_json_string(b, name);
    fmt::format_to(std::back_inserter(b),
                   R"(,"pid":{0},"tid":{1},"ts":{2:.3f},"dur":{3:.3f},"args":{{"device":{0},"stream":{1},"correlation":{4},"op":)", rank,
                   stream_of(e.lane), e.start * 1e6, (e.end - e.start) * 1e6, correlation);
    append_json_string(b, op.name);
    b.append(std::string_view("}}"));
    ++correlation;
    sink.flush();
  }
  b.append(std::string_view("\n]}\n"));
}

}  // namespace

void write_kineto_traces(const Prediction& p, const std::string& dir, const ChromeTraceOptions& o) {
  check_trace_options(p, o);
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec))
    throw ConfigError("--trace", dir, "with --trace-format kineto, --trace names a folder (one rank<N>.json per rank); this is a file");
  // The folder is staged and swapped in whole (core/staged_output.hpp): no rank file of an
  // earlier, larger run stays; an existing folder may hold only such rank files.
  static const std::regex rank_file(R"(rank\d+\.json)");
  StagedFolder folder(dir, "--trace", [](const std::string& name) { return std::regex_match(name, rank_file); });
  // Event indices per rank, in timeline order.
  std::vector<std::vector<std::size_t>> per_rank(static_cast<std::size_t>(p.timeline.world));
  for (std::size_t i = 0; i < p.timeline.events.size(); ++i) per_rank[static_cast<std::size_t>(p.timeline.events[i].rank)].push_back(i);
  for (int r = 0; r < p.timeline.world; ++r) {
    if (!o.ranks.empty() && std::find(o.ranks.begin(), o.ranks.end(), r) == o.ranks.end()) continue;
    TraceSink sink((folder.path() / fmt::format("rank{}.json", r)).string(), false);
    write_rank(p, r, per_rank[static_cast<std::size_t>(p.graph.representative(r))], o, sink);
    sink.close();
  }
  folder.commit();
}

}  // namespace perfcast

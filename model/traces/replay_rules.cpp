/// \file replay_rules.cpp
/// How the replay reads trace records: which runtime calls synchronize or join, which
/// copies block the host, which stream is which lane, and the phase and label of an op.

#include <cctype>
#include <set>

#include <fmt/format.h>

#include "model/traces/replay_rank_builder.hpp"

namespace perfcast::replay {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

}  // namespace

bool is_stream_sync(std::string_view n) {
  return n == "cudaStreamSynchronize" || n == "cudaEventSynchronize" || n == "cuStreamSynchronize" ||
         n == "cuEventSynchronize";
}
bool is_device_sync(std::string_view n) { return n == "cudaDeviceSynchronize" || n == "cuCtxSynchronize"; }
bool is_stream_wait(std::string_view n) { return n == "cudaStreamWaitEvent" || n == "cuStreamWaitEvent"; }

bool host_blocking_copy(const GpuActivity& a, const RuntimeCall& c) {
  if (a.kind != GpuActivityKind::kMemcpy) return false;
  return c.name == "cudaMemcpy" || c.name == "cuMemcpyDtoH" || (contains(a.name, "DtoH") && contains(a.name, "Pageable"));
}

LaneMap map_lanes(const KinetoTrace& t) {
  std::set<std::int64_t> nccl, all;
  std::map<std::int64_t, Seconds> kernel_time;
  for (const auto& a : t.gpu) {
    all.insert(a.stream);
    if (a.is_nccl()) nccl.insert(a.stream);
    else if (a.kind == GpuActivityKind::kKernel) kernel_time[a.stream] += a.duration;
  }
  std::int64_t compute = -1;
  Seconds best = -1;
  for (const auto& [s, time] : kernel_time) {
    if (!nccl.count(s) && time > best) {
      best = time;
      compute = s;
    }
  }
  LaneMap m;
  for (auto s : all) {
    const Stream lane = nccl.count(s) ? Stream::kComm : s == compute ? Stream::kCompute : Stream::kCopy;
    m.of[s] = lane;
    m.labels.push_back(fmt::format("stream {} -> {}", s, stream_name(lane)));
  }
  return m;
}

Phase phase_of(const KinetoTrace& t, int call) {
  for (int o = t.runtime[static_cast<std::size_t>(call)].op; o >= 0; o = t.ops[static_cast<std::size_t>(o)].parent) {
    const std::string n = lower(t.ops[static_cast<std::size_t>(o)].name);
    if (contains(n, "backward") || n.rfind("autograd::", 0) == 0) return Phase::kBackward;
    if (contains(n, "optimizer")) return Phase::kOptimizer;
  }
  return Phase::kForward;
}

std::string op_label(const KinetoTrace& t, int call) {
  const RuntimeCall& c = t.runtime[static_cast<std::size_t>(call)];
  if (const int top = t.top_level_cpu_op(call); top >= 0) return t.ops[static_cast<std::size_t>(top)].name;
  if (c.op >= 0) return t.ops[static_cast<std::size_t>(c.op)].name;
  return c.name;
}

}  // namespace perfcast::replay

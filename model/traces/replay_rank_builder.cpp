/// \file replay_rank_builder.cpp
/// One rank's replay program: step markers, one op per GPU activity, host syncs, and the
/// host time between them (see replay_rank_builder.hpp for the data flow).

#include "model/traces/replay_rank_builder.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "predictors/registry.hpp"

namespace perfcast::replay {

ReplayRankBuilder::ReplayRankBuilder(const KinetoTrace& t, int k0, int k1, Seconds offset, bool infer_waits,
                                     ReplayRankInfo& info, const std::vector<TraceKernelShape>* shapes, const GpuSpec* gpu,
                                     const KernelCalibration* calibration)
    : t_(t), k0_(k0), k1_(k1), offset_(offset), infer_waits_(infer_waits), info_(info), lanes_(map_lanes(t)),
      shapes_(shapes), gpu_(gpu), calibration_(calibration), pending_(t) {
  typical_launch_ = typical_launch_call(t);
  has_nccl_.assign(t.ops.size(), 0);
  for (const auto& a : t.gpu) {
    if (!a.is_nccl() || a.launch < 0) continue;
    for (int o = t.runtime[static_cast<std::size_t>(a.launch)].op; o >= 0; o = t.ops[static_cast<std::size_t>(o)].parent)
      has_nccl_[static_cast<std::size_t>(o)] = 1;
  }
  info_.lanes = lanes_.labels;
}

void ReplayRankBuilder::build() {
  std::vector<std::vector<int>> calls(t_.steps.size());
  for (std::size_t i = 0; i < t_.runtime.size(); ++i) {
    const int k = t_.step_at(t_.runtime[i].start);
    if (k >= k0_ && k <= k1_) calls[static_cast<std::size_t>(k)].push_back(static_cast<int>(i));
  }
  cursor_ = t_.steps[static_cast<std::size_t>(k0_)].start;
  for (int k = k0_; k <= k1_; ++k) {
    const TraceStep& s = t_.steps[static_cast<std::size_t>(k)];
    marker(fmt::format("ProfilerStep#{}", s.number), k == k0_ ? offset_ : std::max(0.0, s.start - cursor_));
    cursor_ = std::max(cursor_, s.start);
    info_.step_numbers.push_back(s.number);
    info_.measured.push_back(t_.step_wall(k));
    step_number_ = s.number;
    for (int c : calls[static_cast<std::size_t>(k)]) process(c);
  }
  const auto next = static_cast<std::size_t>(k1_) + 1;
  const Seconds end = next < t_.steps.size() ? t_.steps[next].start : t_.steps[static_cast<std::size_t>(k1_)].end();
  marker("end", std::max(0.0, end - cursor_));
  info_.launch_call_mean = launch_calls_ > 0 ? launch_time_ / launch_calls_ : 0;
  const Seconds to_sim = offset_ - t_.steps[static_cast<std::size_t>(k0_)].start;
  for (std::size_t i = 0; i < measured_end_.size(); ++i) {
    info_.measured_start.push_back(measured_start_[i] + to_sim);
    info_.measured_end.push_back(measured_end_[i] + to_sim);
  }
}

int ReplayRankBuilder::push(Op op, Seconds host_time, Seconds measured_start, Seconds measured_end,
                            std::vector<Estimate> kernels) {
  program.ops.push_back(std::move(op));
  OpTiming tm;
  tm.kernels = std::move(kernels);
  tm.host_time = host_time;
  info_.host_time += host_time;
  timing.push_back(std::move(tm));
  measured_start_.push_back(measured_start);
  measured_end_.push_back(measured_end);
  info_.activity.push_back(std::exchange(current_activity_, -1));
  return static_cast<int>(program.ops.size()) - 1;
}

void ReplayRankBuilder::marker(std::string name, Seconds host_time) {
  Op op;
  op.name = std::move(name);
  op.phase = Phase::kInput;
  info_.step_markers.push_back(push(std::move(op), host_time, kNoTime, kNoTime, {}));
}

void ReplayRankBuilder::process(int ci) {
  const RuntimeCall& c = t_.runtime[static_cast<std::size_t>(ci)];
  ThreadState& th = threads_[c.tid];
  if (!c.activities.empty()) {
    launch(ci, c, th);
  } else if (is_stream_sync(c.name) || is_device_sync(c.name)) {
    sync(ci, c, th);
  } else if (is_stream_wait(c.name)) {
    const int inner = t_.innermost_cpu_op(ci);
    if (inner >= 0 && has_nccl_[static_cast<std::size_t>(inner)]) return;  // part of a collective call
    th.join_pending = true;
    for (int l = 0; l < kStreamCount; ++l)
      th.join_snapshot[static_cast<std::size_t>(l)] = history_[static_cast<std::size_t>(l)].size();
  }
}

void ReplayRankBuilder::launch(int ci, const RuntimeCall& c, ThreadState& th) {
  bool first = true;
  for (int ai : c.activities) {
    launch_activity(ci, c, th, ai, first);
    first = false;
  }
}

PendingLaunches::PendingLaunches(const KinetoTrace& t) {
  for (const auto& a : t.gpu) {
    if (a.launch < 0) continue;
    auto& [calls, ends] = of_[a.stream];
    calls.push_back(t.runtime[static_cast<std::size_t>(a.launch)].start);
    ends.push_back(a.end());
  }
  for (auto& [stream, v] : of_) {
    std::sort(v.first.begin(), v.first.end());
    std::sort(v.second.begin(), v.second.end());
  }
}

std::int64_t PendingLaunches::at(std::int64_t stream, Seconds at) const {
  const auto it = of_.find(stream);
  if (it == of_.end()) return 0;
  const auto& [calls, ends] = it->second;
  const auto called = std::lower_bound(calls.begin(), calls.end(), at) - calls.begin();
  const auto finished = std::upper_bound(ends.begin(), ends.end(), at) - ends.begin();
  return std::max<std::int64_t>(0, called - finished);
}

Seconds typical_launch_call(const KinetoTrace& t) {
  std::vector<Seconds> d;
  for (const auto& c : t.runtime) {
    if (c.activities.empty()) continue;
    const GpuActivity& a = t.gpu[static_cast<std::size_t>(c.activities.front())];
    if (!host_blocking_copy(a, c)) d.push_back(c.duration);
  }
  if (d.empty()) return 0;
  const std::size_t p10 = d.size() / 10;
  std::nth_element(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(p10), d.end());
  return d[p10];
}

namespace {

/// The wait of a blocking call on the trace clock: until the awaited GPU end, within the call.
Seconds clamp_wait(Seconds gpu_end, const RuntimeCall& c) {
  return std::clamp(std::isnan(gpu_end) ? c.start : gpu_end, c.start, c.end());
}

}  // namespace

void ReplayRankBuilder::launch_activity(int ci, const RuntimeCall& c, ThreadState& th, int ai, bool first) {
  const GpuActivity& a = t_.gpu[static_cast<std::size_t>(ai)];
  const bool blocking = host_blocking_copy(a, c);
  Seconds host = 0;
  // A launch that waited for a full queue: longer than a typical call, with half a queue of
  // its stream's launches pending. The wait is the simulator's to recompute, not host time.
  const Seconds excess = c.duration - typical_launch_;
  const Seconds stall =
      first && !blocking && excess > kQueueStallMin && pending_.at(a.stream, c.start) >= kQueueStallPending ? excess : 0.0;
  if (stall > 0) {
    info_.queue_blocked += stall;
    info_.queue_blocked_calls++;
  }
  if (first) host = std::max(0.0, (blocking ? c.start : c.end() - stall) - cursor_);
  Op op;
  op.phase = phase_of(t_, ci);
  op.stream = a.is_nccl() ? Stream::kComm : lanes_.of.at(a.stream);
  op.host_waits = blocking;
  add_join_dependencies(op, a, th);
  std::vector<Estimate> kernels;
  if (a.is_nccl()) {
    add_issuer_dependency(op, a, th);
    op.name = a.collective->name.empty() ? std::string(collective_name(a.collective->kind)) : a.collective->name;
    op.collective = static_cast<int>(nccl.size());  // the k-th NCCL kernel is graph collective k
    info_.collectives++;
  } else {
    op.name = op_label(t_, ci);
    kernels.push_back(kernel_estimate(ai, a, op));
    info_.gpu_ops++;
  }
  if (infer_waits_) infer_wait(op, a, c);
  std::sort(op.deps.begin(), op.deps.end());
  op.deps.erase(std::unique(op.deps.begin(), op.deps.end()), op.deps.end());
  const Stream lane = op.stream;
  stream_last_[a.stream] = static_cast<int>(program.ops.size());
  current_activity_ = ai;
  const int idx = push(std::move(op), host, a.start, a.end(), std::move(kernels));
  if (a.is_nccl()) {
    nccl.push_back(&a);
  } else {
    th.current = lane;
  }
  history_[static_cast<std::size_t>(lane)].push_back(idx);
  th.last_gpu_op = idx;
  if (blocking) {
    info_.host_syncs++;
    const Seconds done = clamp_wait(a.end(), c);
    info_.blocked += done - c.start;
    cursor_ = std::max(cursor_, done);
  } else if (first) {
    cursor_ = std::max(cursor_, c.end());
    launch_time_ += c.duration;
    launch_calls_++;
  }
}

void ReplayRankBuilder::sync(int ci, const RuntimeCall& c, ThreadState& th) {
  Op op;
  op.name = c.name;
  op.phase = phase_of(t_, ci);
  op.host_waits = true;
  Seconds awaited_end = kNoTime;
  if (is_device_sync(c.name)) {
    op.stream = Stream::kCompute;
    for (const auto& h : history_) {
      if (h.empty()) continue;
      op.deps.push_back(h.back());
      const Seconds e = measured_end_[static_cast<std::size_t>(h.back())];
      awaited_end = std::isnan(awaited_end) ? e : std::max(awaited_end, e);
    }
  } else if (th.last_gpu_op >= 0) {
    op.stream = program.ops[static_cast<std::size_t>(th.last_gpu_op)].stream;
    op.deps.push_back(th.last_gpu_op);
    awaited_end = measured_end_[static_cast<std::size_t>(th.last_gpu_op)];
  }
  if (op.deps.empty()) return;  // nothing to wait for: plain host time
  std::sort(op.deps.begin(), op.deps.end());
  const KernelDesc k = MeasuredKernelDesc{c.name, 0.0};
  op.kernels.push_back(k);
  push(std::move(op), std::max(0.0, c.start - cursor_), kNoTime, kNoTime, {predict_kernel(k, GpuSpec{})});
  info_.host_syncs++;
  const Seconds done = clamp_wait(awaited_end, c);
  info_.blocked += done - c.start;
  cursor_ = std::max(cursor_, done);
}

}  // namespace perfcast::replay

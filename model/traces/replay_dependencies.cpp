/// \file replay_dependencies.cpp
/// The replay's dependency rules (after Algorithm 1 of the reference, trace_replay.hpp):
/// joins at cudaStreamWaitEvent, a collective waiting for its issuing stream, dependencies
/// stepped back where the measurement contradicts them, and inferred waits.

#include <algorithm>
#include <cmath>

#include "model/traces/replay_rank_builder.hpp"

namespace perfcast::replay {

int ReplayRankBuilder::consistent_producer(Stream lane, std::size_t upto, Seconds consumer_start) {
  const auto& h = history_[static_cast<std::size_t>(lane)];
  const std::size_t stop = upto > static_cast<std::size_t>(kWalkBackLimit) ? upto - kWalkBackLimit : 0;
  for (std::size_t j = upto; j > stop; --j) {
    const int op = h[j - 1];
    if (measured_end_[static_cast<std::size_t>(op)] <= consumer_start + kDependencyTolerance) {
      if (j != upto) info_.stepped_back++;
      return op;
    }
  }
  if (upto > 0) info_.stepped_back++;
  return -1;
}

void ReplayRankBuilder::add_join_dependencies(Op& op, const GpuActivity& a, ThreadState& th) {
  if (!th.join_pending) return;
  bool added = false;
  for (int l = 0; l < kStreamCount; ++l) {
    const auto lane = static_cast<Stream>(l);
    if (lane == op.stream) continue;
    const int d = consistent_producer(lane, th.join_snapshot[static_cast<std::size_t>(l)], a.start);
    if (d >= 0) {
      op.deps.push_back(d);
      added = true;
    }
  }
  if (added) info_.joins++;
  th.join_pending = false;
}

void ReplayRankBuilder::add_issuer_dependency(Op& op, const GpuActivity& a, const ThreadState& th) {
  const Stream issuer = th.current == Stream::kComm ? Stream::kCompute : th.current;
  const int d = consistent_producer(issuer, history_[static_cast<std::size_t>(issuer)].size(), a.start);
  if (d >= 0) op.deps.push_back(d);
}

void ReplayRankBuilder::infer_wait(Op& op, const GpuActivity& a, const RuntimeCall& c) {
  Seconds explained = c.end();
  if (const auto it = stream_last_.find(a.stream); it != stream_last_.end())
    explained = std::max(explained, measured_end_[static_cast<std::size_t>(it->second)]);
  for (int d : op.deps) explained = std::max(explained, measured_end_[static_cast<std::size_t>(d)]);
  if (a.start <= explained + kUnexplainedStart) return;
  int best = -1;
  const int n = static_cast<int>(measured_end_.size());
  for (int i = n - 1; i >= 0 && i >= n - kInferSearchLimit; --i) {
    const Seconds e = measured_end_[static_cast<std::size_t>(i)];
    if (std::isnan(e) || e > a.start + kDependencyTolerance || e < a.start - kUnexplainedStart) continue;
    if (best < 0 || e > measured_end_[static_cast<std::size_t>(best)]) best = i;
  }
  if (best >= 0) {
    op.deps.push_back(best);
    info_.inferred++;
  }
}

}  // namespace perfcast::replay

/// \file transformer_interleaved_schedule.cpp
/// One rank's program under Megatron's interleaved 1F1B schedule
/// (megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving,
/// without overlapped p2p communication): each pipeline rank holds vp model chunks; chunk v
/// of stage s is virtual stage v x pp + s, so activations go around the ring of stages vp
/// times (the last stage sends chunk v's output to stage 0's chunk v + 1, and gradients go
/// the other way).
///
/// Virtual micro-batch k (0 .. M x vp - 1) is micro-batch (k / (pp vp)) pp + k mod pp of
/// model chunk (k mod pp vp) / pp; backwards take the chunks in reverse. Stage s runs
/// (pp - s - 1) x 2 + (vp - 1) x pp warmup forwards, then one forward and one backward per
/// step, then the remaining backwards. After each step it makes one batched p2p call
/// (send to the next / previous stage of the ring, receive from them) with the flags the
/// schedule computes; every send meets the receive of the same position on the other side.
/// With overlap_p2p_comm (Megatron-LM's default, stream-ordered runtimes) the call is split
/// into its forward transfers, waited for before the next forward, and its backward
/// transfers, waited for before the next backward, so each runs beside the other step.

#include <algorithm>

#include "model/graph/transformer_rank_passes.hpp"

namespace perfcast::transformer {
namespace {

/// Python's modulo (non-negative for a positive divisor), as the schedule computes chunk ids
/// of negative virtual micro-batch numbers.
std::int64_t py_mod(std::int64_t a, std::int64_t b) { return ((a % b) + b) % b; }

class InterleavedSchedule {
 public:
  InterleavedSchedule(const TransformerSpec& w, int rank, SharedCollectives& shared)
      : w_(w), c_(w, rank, shared), d_(c_, shared), P_(w.pp), V_(w.vp), s_(c_.stage), M_(w.micro_batches()),
        overlap_(w.overlap_p2p_comm && !w.pipeline_host_blocking) {
    const int me = rank;
    const int next = c_.rank_of_stage((s_ + 1) % P_), prev = c_.rank_of_stage((s_ + P_ - 1) % P_);
    to_next_ = shared.directed_group(me, next);
    from_prev_ = shared.directed_group(prev, me);
    to_prev_ = shared.directed_group(me, prev);
    from_next_ = shared.directed_group(next, me);
  }

  RankProgram build() {
    const std::int64_t total = M_ * V_;
    const std::int64_t warmup = std::min<std::int64_t>(std::int64_t(P_ - s_ - 1) * 2 + std::int64_t(V_ - 1) * P_, total);
    const std::int64_t remaining = total - warmup;
    const bool first = s_ == 0, last = s_ + 1 == P_;
    if (!first) call("recv_forward", Phase::kForward, false, false, true, false);
    for (std::int64_t k = 0; k < warmup; ++k) {
      forward(k);
      bool recv_prev = !(first && chunk(k + 1, true) == 0);
      if (k == total - 1) recv_prev = false;
      const bool send_fwd = !(last && chunk(k, true) == V_ - 1);
      const bool recv_next = k == warmup - 1 && remaining > 0 && !last;
      call(recv_next ? "send_forward_recv_forward_backward" : "send_forward_recv_forward", Phase::kForward, send_fwd, false,
           recv_prev, recv_next);
    }
    for (std::int64_t k = 0; k < remaining; ++k) {
      const std::int64_t fk = k + warmup, bk = k;
      forward(fk);
      backward(bk);
      const bool send_fwd = !(last && chunk(fk, true) == V_ - 1);
      const bool send_bwd = !(first && chunk(bk, false) == 0);
      bool recv_prev = !(first && chunk(fk - (P_ - 1), true) == V_ - 1);
      const bool recv_next = !(last && chunk(bk - (P_ - 1), false) == 0);
      if (k == remaining - 1) recv_prev = false;
      call("send_forward_backward_recv_forward_backward", Phase::kBackward, send_fwd, send_bwd, recv_prev, recv_next);
    }
    if (remaining == 0 && !last) call("recv_backward", Phase::kBackward, false, false, false, true);
    for (std::int64_t k = remaining; k < total; ++k) {
      backward(k);
      bool recv_next = !(last && chunk(k + 1, false) == V_ - 1);
      if (k == total - 1) recv_next = false;
      const bool send_bwd = !(first && chunk(k, false) == 0);
      call("send_backward_recv_backward", Phase::kBackward, false, send_bwd, false, recv_next);
    }
    c_.chunk = -1;
    d_.clear_micro_batch();
    d_.join_next(forward_pending_);
    d_.join_next(backward_pending_);
    for (const NamedTransformerPass& pass : kOptimizerPasses) pass.run(c_, d_);
    return std::move(d_.program);
  }

 private:
  /// Model chunk of virtual micro-batch k (schedules.py get_model_chunk_id).
  [[nodiscard]] int chunk(std::int64_t k, bool forward) const {
    const auto c = static_cast<int>(py_mod(k, std::int64_t(P_) * V_) / P_);
    return forward ? c : V_ - 1 - c;
  }
  /// Micro-batch of virtual micro-batch k within its chunk (get_microbatch_id_in_model_chunk).
  [[nodiscard]] int micro_batch(std::int64_t k) const {
    const std::int64_t group = std::int64_t(P_) * V_;
    return static_cast<int>(k / group * P_ + py_mod(k, group) % P_);
  }

  void forward(std::int64_t k) {
    d_.join_next(forward_pending_);
    forward_pending_.clear();
    c_.chunk = chunk(k, true);
    d_.set_micro_batch(micro_batch(k), c_.chunk);
    for (const NamedTransformerPass& pass : kForwardPasses) pass.run(c_, d_);
  }
  void backward(std::int64_t k) {
    d_.join_next(backward_pending_);
    backward_pending_.clear();
    c_.chunk = chunk(k, false);
    d_.set_micro_batch(micro_batch(k), c_.chunk);
    for (const NamedTransformerPass& pass : kBackwardPasses) pass.run(c_, d_);
  }

  /// One batched p2p call with the schedule's flags (activations forward, gradients back).
  void call(const char* name, Phase ph, bool send_next, bool send_prev, bool recv_prev, bool recv_next) {
    const double b = c_.p2p_bytes;
    std::vector<TransformerDraft::Transfer> forward_parts, backward_parts;
    if (send_next) forward_parts.push_back({to_next_, b, "send_next"});
    if (recv_prev) forward_parts.push_back({from_prev_, b, "recv_prev"});
    if (send_prev) backward_parts.push_back({to_prev_, b, "send_prev"});
    if (recv_next) backward_parts.push_back({from_next_, b, "recv_next"});
    if (!overlap_) {
      forward_parts.insert(forward_parts.end(), backward_parts.begin(), backward_parts.end());
      d_.p2p_batch(name, ph, forward_parts);
      return;
    }
    for (int op : d_.p2p_batch(std::string(name) + ".forward", ph, forward_parts, false)) forward_pending_.push_back(op);
    for (int op : d_.p2p_batch(std::string(name) + ".backward", ph, backward_parts, false)) backward_pending_.push_back(op);
  }

  const TransformerSpec& w_;
  TransformerRankContext c_;
  TransformerDraft d_;
  int P_, V_, s_;
  std::int64_t M_;
  bool overlap_;
  std::vector<int> forward_pending_, backward_pending_;  ///< transfers the next forward / backward waits for
  int to_next_ = -1, from_prev_ = -1, to_prev_ = -1, from_next_ = -1;
};

}  // namespace

RankProgram build_interleaved_rank_program(const TransformerSpec& w, int rank, SharedCollectives& shared) {
  return InterleavedSchedule(w, rank, shared).build();
}

}  // namespace perfcast::transformer

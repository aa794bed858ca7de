#include "model/sim/annotate.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>

#include "core/deadline.hpp"
#include "predictors/registry.hpp"
#include "topology/nccl_tuning.hpp"

namespace perfcast {

void Annotator::add_sm_sharing(const ExecutionGraph& g, TimedGraph& t) const {
  const double sms = system_->gpu.sm_count;
  if (sms <= 0) return;
  for (std::size_t r = 0; r < g.ranks.size(); ++r) {
    const auto& ops = g.ranks[r].ops;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      if (op.sm_sharing_op < 0 || op.sm_sharing_sms <= 0 || t.ops[r][i].kernels.empty()) continue;
      const Op& side = ops[static_cast<std::size_t>(op.sm_sharing_op)];
      if (!side.collective) continue;
      Seconds busy = 0;
      for (const auto& k : t.ops[r][i].kernels) busy += k.time;
      const Seconds comm = t.collectives[static_cast<std::size_t>(*side.collective)].time;
      // The kernels progress at (sms - n) / sms of their rate while the collective holds n
      // SMs: a collective that ends first costs them comm x n / sms; one that outlasts them
      // stretches them all by n / (sms - n). Spread over the kernels by time.
      const double n = std::min<double>(op.sm_sharing_sms, sms - 1);
      const Seconds stretched = busy * sms / (sms - n);
      const Seconds extra = comm < stretched ? comm * n / sms : busy * n / (sms - n);
      if (busy <= 0 || extra <= 0) continue;
      for (auto& k : t.ops[r][i].kernels) k.time += extra * (k.time / busy);
    }
  }
}

namespace {

/// The stretch factors of one rank's ops into `stretch` (left empty when no NCCL kernel
/// overlaps compute; its storage is kept for the next call).
void rank_nccl_stretch(const RankProgram& prog, const std::vector<OpTiming>& timing,
                       const std::vector<CollectiveEstimate>& collectives, double sms, std::vector<double>& stretch) {
  stretch.clear();
  const auto& ops = prog.ops;
  auto eligible = [&](std::size_t i) {
    return ops[i].collective && collectives[static_cast<std::size_t>(*ops[i].collective)].sms > 0;
  };
  bool any = false;
  for (std::size_t i = 0; i < ops.size() && !any; ++i) any = eligible(i);
  if (!any) return;
  // Userbuffers collectives: Annotator::add_sm_sharing counts their SMs against their GEMM.
  thread_local std::vector<char> userbuffers;
  userbuffers.assign(ops.size(), 0);
  for (const Op& op : ops)
    if (op.sm_sharing_op >= 0) userbuffers[static_cast<std::size_t>(op.sm_sharing_op)] = 1;
  struct Busy {
    Seconds start, end;
    double n;
  };
  thread_local std::vector<Busy> nccl;
  thread_local std::vector<Seconds> end;
  nccl.clear();
  end.assign(ops.size(), 0.0);
  std::array<Seconds, kStreamCount> stream_free{};
  std::size_t live = 0;  // nccl[live..]: the collectives that may still overlap later compute
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const auto s = static_cast<std::size_t>(op.stream);
    Seconds ready = stream_free[s];
    for (int d : op.deps) ready = std::max(ready, end[static_cast<std::size_t>(d)]);
    if (op.collective) {
      const CollectiveEstimate& c = collectives[static_cast<std::size_t>(*op.collective)];
      end[i] = ready + c.time;
      if (eligible(i) && !userbuffers[i] && c.time > 0) nccl.push_back({ready, end[i], std::min<double>(c.sms, sms - 1)});
    } else {
      Seconds busy = 0;
      bool measured = false;
      for (std::size_t k = 0; k < op.kernels.size(); ++k) {
        busy += timing[i].kernels[k].time;
        measured = measured || std::holds_alternative<MeasuredKernelDesc>(op.kernels[k]);
      }
      Seconds extra = 0;
      if (op.stream == Stream::kCompute && busy > 0 && !measured) {
        // Compute ops start in order on their stream: a collective that ended before this
        // one starts overlaps none after it either.
        while (live < nccl.size() && nccl[live].end <= ready) ++live;
        for (std::size_t b = live; b < nccl.size(); ++b) {
          const Seconds overlap = std::min(nccl[b].end, ready + busy) - std::max(nccl[b].start, ready);
          if (overlap > 0) extra += overlap * nccl[b].n / (sms - nccl[b].n);
        }
      }
      if (extra > 0) {
        if (stretch.empty()) stretch.assign(ops.size(), 1.0);
        stretch[i] = (busy + extra) / busy;
      }
      end[i] = ready + busy + extra;
    }
    stream_free[s] = end[i];
  }
}

}  // namespace

void add_nccl_sm_sharing(const ExecutionGraph& g, TimedGraph& t, int sm_count) {
  // Rows are refilled in place: a sharding search re-runs this for every plan it evaluates.
  t.kernel_stretch.resize(g.ranks.size());
  for (std::size_t r = 0; r < g.ranks.size(); ++r) {
    if (sm_count <= 1) t.kernel_stretch[r].clear();
    else rank_nccl_stretch(g.ranks[r], t.ops[r], t.collectives, sm_count, t.kernel_stretch[r]);
  }
}

TimedGraph Annotator::annotate(const ExecutionGraph& g) {
  TimedGraph t;
  t.graph = &g;
  t.ops.resize(g.ranks.size());
  for (std::size_t r = 0; r < g.ranks.size(); ++r) {
    const auto& ops = g.ranks[r].ops;
    t.ops[r].resize(ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      check_deadline();  // --timeout: between two ops' kernel predictions
      auto& timing = t.ops[r][i];
      timing.kernels.reserve(ops[i].kernels.size());
      for (const auto& k : ops[i].kernels) {
        auto it = cache_.find(k);
        if (it == cache_.end()) it = cache_.emplace(k, predict_with_calibration(k, system_->gpu, calibration_)).first;
        timing.kernels.push_back(it->second);
      }
    }
  }
  t.collectives.reserve(g.collectives.size());
  // A graph repeats its collectives (a layer's TP collectives in every layer and micro-batch):
  // the model's estimate depends only on the descriptor and the group, so each distinct pair
  // is estimated once. All-to-allv byte matrices are estimated each time.
  std::map<std::tuple<int, int, double>, std::size_t> first_of;
  for (const auto& c : g.collectives) {
    if (c.desc.pair_bytes.empty()) {
      const auto key = std::make_tuple(c.group, static_cast<int>(c.desc.kind), c.desc.bytes);
      const auto [it, inserted] = first_of.try_emplace(key, t.collectives.size());
      if (!inserted) {
        t.collectives.push_back(t.collectives[it->second]);
        continue;
      }
    }
    const RankGroup& group = g.groups[static_cast<std::size_t>(c.group)];
    t.collectives.push_back(comm_->estimate(c.desc, group));
    t.collectives.back().sms = nccl_kernel_sms(*system_, group, c.desc, t.collectives.back().algorithm);
  }
  add_sm_sharing(g, t);
  add_nccl_sm_sharing(g, t, system_->gpu.sm_count);
  return t;
}

}  // namespace perfcast

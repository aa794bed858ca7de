#include "model/sim/annotate.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "core/deadline.hpp"
#include "predictors/registry.hpp"

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
    t.collectives.push_back(comm_->estimate(c.desc, g.groups[static_cast<std::size_t>(c.group)]));
  }
  add_sm_sharing(g, t);
  return t;
}

}  // namespace perfcast

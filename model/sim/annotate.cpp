#include "model/sim/annotate.hpp"

#include <map>
#include <tuple>

#include "core/deadline.hpp"
#include "predictors/registry.hpp"

namespace perfcast {

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
  return t;
}

}  // namespace perfcast

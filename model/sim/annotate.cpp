#include "model/sim/annotate.hpp"

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
  for (const auto& c : g.collectives) t.collectives.push_back(comm_->estimate(c.desc, g.groups[static_cast<std::size_t>(c.group)]));
  return t;
}

}  // namespace perfcast

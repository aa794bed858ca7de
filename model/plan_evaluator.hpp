#pragma once
/// \file plan_evaluator.hpp
/// The sharding search's objective: a plan's simulated steady-state iteration time (the
/// same pipeline as `predict`), or infeasible with the memory verdict. Kernel estimates
/// are cached across plans, so a plan that moves one table only re-estimates the lookup
/// kernels of the ranks it touches.

#include <string>
#include <vector>

#include "model/annotate.hpp"
#include "model/memory_estimate.hpp"
#include "model/sharding_plan.hpp"
#include "model/workload_spec.hpp"
#include "topology/collective.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {

struct PlanEvaluation {
  bool feasible = false;
  Seconds iteration_time = 0;   ///< simulated, also for infeasible plans
  std::string reason;           ///< why infeasible
  std::vector<Seconds> rank_embedding_time;  ///< lookup + backward kernel time per rank
  std::vector<Bytes> rank_memory;            ///< total per rank
};

class PlanEvaluator {
 public:
  PlanEvaluator(const SystemSpec& s, const DlrmSpec& w, const CollectiveModel& comm, int iterations = 3);
  [[nodiscard]] PlanEvaluation evaluate(const ShardingPlan& plan);
  [[nodiscard]] std::size_t evaluations() const { return evaluations_; }

 private:
  const SystemSpec* system_;
  const DlrmSpec* workload_;
  Annotator annotator_;
  int iterations_;
  std::size_t evaluations_ = 0;
};

}  // namespace perfcast

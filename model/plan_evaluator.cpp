#include "model/plan_evaluator.hpp"

#include "model/dlrm_builder.hpp"
#include "model/simulator.hpp"

namespace perfcast {

PlanEvaluator::PlanEvaluator(const SystemSpec& s, const DlrmSpec& w, const CollectiveModel& comm, int iterations)
    : system_(&s), workload_(&w), annotator_(s, comm), iterations_(iterations) {}

PlanEvaluation PlanEvaluator::evaluate(const ShardingPlan& plan) {
  ++evaluations_;
  PlanEvaluation e;
  const ExecutionGraph g = build_dlrm_graph(*workload_, plan, system_->world_size());
  const TimedGraph t = annotator_.annotate(g);
  SimulationOptions opt;
  opt.iterations = iterations_;
  e.iteration_time = simulate(t, system_->host, opt).iteration_time;
  e.rank_embedding_time.assign(g.ranks.size(), 0.0);
  for (std::size_t r = 0; r < g.ranks.size(); ++r) {
    for (std::size_t i = 0; i < g.ranks[r].ops.size(); ++i) {
      const auto& op = g.ranks[r].ops[i];
      for (std::size_t k = 0; k < op.kernels.size(); ++k) {
        if (std::holds_alternative<EmbeddingDesc>(op.kernels[k])) e.rank_embedding_time[r] += t.ops[r][i].kernels[k].time;
      }
    }
  }
  const auto memory = estimate_memory(*workload_, plan, *system_);
  for (const auto& m : memory) e.rank_memory.push_back(m.total());
  e.reason = memory_verdict(memory);
  e.feasible = e.reason.empty();
  return e;
}

}  // namespace perfcast

#pragma once
/// \file plan_evaluator.hpp
/// The sharding search's objective: a plan's simulated steady-state iteration time (the
/// same pipeline as `predict`), or infeasible with the memory verdict.
///
/// Incremental: the graph comes from a DlrmGraphBuilder that rebuilds only the ranks
/// whose shards changed since the previous plan; only those ranks' kernels are
/// re-annotated (through a kernel estimate cache) and only collectives whose descriptor
/// changed are re-estimated (those of one size on one group, all but the all-to-allv,
/// through an estimate cache); the simulation then runs one rank per distinct program
/// (DlrmGraphBuilder's symmetric graphs: ranks holding the same shards share one). The
/// result is the same as building, annotating and simulating the plan from scratch
/// (tests/model/plan_evaluator_test.cpp checks equality).

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/sim/annotate.hpp"
#include "predictors/kernel_calibration.hpp"
#include "model/graph/dlrm_builder.hpp"
#include "model/graph/memory_estimate.hpp"
#include "model/sim/simulator.hpp"
#include "model/graph/sharding_plan.hpp"
#include "model/graph/workload_spec.hpp"
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

/// A collective of one kind and size on one group (an all-to-allv's byte matrix is not
/// part of it: those are estimated every time).
struct SizedCollectiveKey {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  Bytes bytes = 0;
  std::vector<int> ranks;
  bool operator==(const SizedCollectiveKey&) const = default;
};
struct SizedCollectiveKeyHash {
  std::size_t operator()(const SizedCollectiveKey& k) const;
};

class PlanEvaluator {
 public:
  /// `incremental` false: every plan is built and annotated from scratch (the reference
  /// the incremental path is tested against).
  /// `calibration`: the kernel calibration `predict` applies on this system
  /// (load_system_kernel_calibration), or nullptr for the spec-derived predictors; it must
  /// outlive the evaluator.
  PlanEvaluator(const SystemSpec& s, const DlrmSpec& w, const CollectiveModel& comm, int iterations = 3,
                bool incremental = true, const KernelCalibration* calibration = nullptr);
  [[nodiscard]] PlanEvaluation evaluate(const ShardingPlan& plan);
  [[nodiscard]] std::size_t evaluations() const { return evaluations_; }
  /// Ranks whose programs were rebuilt and re-annotated, summed over evaluations.
  [[nodiscard]] std::size_t ranks_rebuilt() const { return ranks_rebuilt_; }
  /// Ranks simulated (their representatives' timelines standing for the others), summed
  /// over evaluations.
  [[nodiscard]] std::size_t ranks_simulated() const { return ranks_simulated_; }
  /// Evaluations whose graph was rebuilt whole (the plan changed which collectives exist).
  [[nodiscard]] std::size_t whole_rebuilds() const { return whole_rebuilds_; }

 private:
  const SystemSpec* system_;
  const DlrmSpec* workload_;
  const CollectiveModel* comm_;
  const KernelCalibration* calibration_;
  int iterations_;
  bool incremental_;
  std::unique_ptr<DlrmGraphBuilder> builder_;
  TimedGraph timed_;                         ///< annotation of builder_'s current graph
  std::vector<Seconds> rank_embedding_time_; ///< of builder_'s current graph
  Timeline timeline_;                        ///< the last simulation (its storage is reused)
  std::unordered_map<KernelDesc, Estimate, KernelDescHash> estimates_;
  /// Estimates (with their NCCL SMs) of the collectives with no byte matrix: a search
  /// re-estimates the same few sizes on the same groups thousands of times.
  std::unordered_map<SizedCollectiveKey, CollectiveEstimate, SizedCollectiveKeyHash> collective_estimates_;
  std::size_t evaluations_ = 0;
  std::size_t ranks_rebuilt_ = 0;
  std::size_t ranks_simulated_ = 0;
  std::size_t whole_rebuilds_ = 0;
};

}  // namespace perfcast

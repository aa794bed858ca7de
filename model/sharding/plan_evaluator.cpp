#include "model/sharding/plan_evaluator.hpp"

#include "topology/nccl_tuning.hpp"

#include "model/sim/simulator.hpp"
#include "predictors/kernel_calibration.hpp"

namespace perfcast {

std::size_t SizedCollectiveKeyHash::operator()(const SizedCollectiveKey& k) const {
  std::size_t h = std::hash<double>{}(k.bytes) * 31 + static_cast<std::size_t>(k.kind);
  for (int r : k.ranks) h = h * 1000003u ^ static_cast<std::size_t>(r);
  return h;
}

namespace {
/// Entries kept before the collective estimate cache starts over (a bound on its memory in
/// long searches; a search uses a few hundred).
constexpr std::size_t kCollectiveCacheLimit = 1 << 14;
}  // namespace

PlanEvaluator::PlanEvaluator(const SystemSpec& s, const DlrmSpec& w, const CollectiveModel& comm, int iterations,
                             bool incremental, const KernelCalibration* calibration)
    : system_(&s), workload_(&w), comm_(&comm), calibration_(calibration), iterations_(iterations),
      incremental_(incremental) {}

PlanEvaluation PlanEvaluator::evaluate(const ShardingPlan& plan) {
  ++evaluations_;
  if (!builder_ || !incremental_) {
    // Incremental evaluation also simulates one rank per distinct program (symmetric).
    builder_ = std::make_unique<DlrmGraphBuilder>(*workload_, system_->world_size(), system_->gpus_per_node,
                                                  host_link_of(*system_), /*symmetric=*/incremental_);
  }
  GraphChanges changes;
  const ExecutionGraph& g = builder_->build(plan, &changes);
  whole_rebuilds_ += changes.all ? 1 : 0;
  timed_.graph = &g;
  timed_.ops.resize(g.ranks.size());
  rank_embedding_time_.resize(g.ranks.size(), 0.0);
  // Re-annotate the rebuilt ranks only (the same predictor call as Annotator, cached by
  // descriptor), and sum their embedding kernel time. An op whose kernels equal those of
  // the op at the same index in the rank's previous program keeps its timing: the
  // estimate is a function of the descriptor alone, so this is exact (and it saves
  // hashing the descriptors of the ops a move does not touch, most of them).
  for (std::size_t r = 0; r < g.ranks.size(); ++r) {
    if (!changes.all && !changes.ranks[r]) continue;
    ++ranks_rebuilt_;
    const auto& ops = g.ranks[r].ops;
    const auto& before = builder_->previous_program(r).ops;  // what timed_.ops[r] annotates
    auto& timings = timed_.ops[r];
    if (before.empty()) timings.clear();
    timings.resize(ops.size());
    Seconds embedding = 0;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      OpTiming& t = timings[i];
      const bool same = i < before.size() && ops[i].kernels == before[i].kernels;
      if (!same) {
        t.kernels.clear();  // keeps its storage: most re-annotated ops have as many kernels as before
        t.host_time.reset();
        t.kernels.reserve(ops[i].kernels.size());
        for (const auto& k : ops[i].kernels) {
          auto it = estimates_.find(k);
          if (it == estimates_.end()) it = estimates_.emplace(k, predict_with_calibration(k, system_->gpu, calibration_)).first;
          t.kernels.push_back(it->second);
        }
      }
      for (std::size_t k = 0; k < ops[i].kernels.size(); ++k)
        if (std::holds_alternative<EmbeddingDesc>(ops[i].kernels[k])) embedding += t.kernels[k].time;
    }
    rank_embedding_time_[r] = embedding;
  }
  // A mirrored rank's program is empty: its embedding time is its representative's.
  for (std::size_t r = 0; r < g.ranks.size(); ++r)
    if (!g.simulated(static_cast<int>(r))) rank_embedding_time_[r] = rank_embedding_time_[static_cast<std::size_t>(g.representative(static_cast<int>(r)))];
  timed_.collectives.resize(g.collectives.size());
  for (std::size_t c = 0; c < g.collectives.size(); ++c) {
    if (!changes.all && !changes.collectives[c]) continue;
    const RankGroup& group = g.groups[static_cast<std::size_t>(g.collectives[c].group)];
    const CollectiveDesc& desc = g.collectives[c].desc;
    auto estimate = [&] {
      CollectiveEstimate e = comm_->estimate(desc, group);
      e.sms = nccl_kernel_sms(*system_, group, desc, e.algorithm);
      return e;
    };
    if (!desc.pair_bytes.empty()) {
      timed_.collectives[c] = estimate();
      continue;
    }
    SizedCollectiveKey key{desc.kind, desc.bytes, group.ranks};
    auto it = collective_estimates_.find(key);
    if (it == collective_estimates_.end()) {
      if (collective_estimates_.size() >= kCollectiveCacheLimit) collective_estimates_.clear();
      it = collective_estimates_.emplace(std::move(key), estimate()).first;
    }
    timed_.collectives[c] = it->second;
  }
  for (std::size_t r = 0; r < g.ranks.size(); ++r) ranks_simulated_ += g.simulated(static_cast<int>(r)) ? 1 : 0;
  add_nccl_sm_sharing(g, timed_, system_->gpu.sm_count);
  PlanEvaluation e;
  SimulationOptions opt;
  opt.iterations = iterations_;
  timeline_ = simulate(timed_, system_->host, opt, std::move(timeline_));
  e.iteration_time = timeline_.iteration_time;
  e.rank_embedding_time = rank_embedding_time_;
  const auto memory = estimate_memory(*workload_, plan, *system_);
  for (const auto& m : memory) e.rank_memory.push_back(m.total());
  e.reason = memory_verdict(memory);
  e.feasible = e.reason.empty();
  return e;
}

}  // namespace perfcast

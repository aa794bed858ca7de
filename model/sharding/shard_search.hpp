#pragma once
/// \file shard_search.hpp
/// Ask-and-tell sharding search (as Timeloop and TorchRec's planner do it): proposers propose plans and get
/// feedback; they never call the evaluator. One loop (`run_search`) owns evaluation, the
/// plan cache (by hash), the budget and the best plan.
///
/// Determinism: for a seed and an evaluation budget the result is fixed; a time budget
/// cuts the same sequence at a machine-dependent point.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "model/sharding/plan_evaluator.hpp"
#include "model/sharding/sharding_baselines.hpp"

namespace perfcast {

struct Candidate {
  std::string origin;  ///< proposer and move, e.g. "local:move"
  ShardingPlan plan;
  /// plan_hash(plan) when the proposer knows it already (computed incrementally), else unset.
  std::optional<std::size_t> hash;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  /// Next plan to try, or nothing when this proposer is done.
  [[nodiscard]] virtual std::optional<Candidate> propose() = 0;
  /// The evaluation of a plan. Every proposer is told every evaluation (its own and the
  /// others'), so a local search can start from the best baseline.
  virtual void feedback(const Candidate& c, const PlanEvaluation& e) = 0;
  /// Hands one of this proposer's candidates back after every proposer had its feedback,
  /// so its buffers can be reused for the next proposal (plans are copied per proposal).
  virtual void recycle(Candidate&& /*c*/) {}
};

/// Proposes a fixed list of plans once each (the baselines).
class FixedPlansProposer final : public Proposer {
 public:
  explicit FixedPlansProposer(std::vector<NamedPlan> plans) : plans_(std::move(plans)) {}
  std::optional<Candidate> propose() override;
  void feedback(const Candidate&, const PlanEvaluation&) override {}

 private:
  std::vector<NamedPlan> plans_;
  std::size_t next_ = 0;
};

/// Local search from the best plan it has been told about: move a table off the rank with
/// the most embedding time, swap two tables, split a table column-wise over two ranks,
/// merge a column-wise table, make a small table data-parallel or a table with heavy
/// pooling row-wise (on one node half of those two moves take a table-wise table of the
/// busiest rank, the rest any table), and back. On several nodes also: a table row-wise over one node
/// (table_row_wise), column-wise over ranks of its node (table_column_wise), or two
/// column blocks each row-wise over a node (grid). Accepts a neighbour when it is better (feasible first,
/// then faster).
///
/// `memory_tiers`: also move tables between HBM and host memory (one move in four; every
/// move on one GPU): a table to fused_uvm_caching with a load factor of 5, 10, 20 or 50%,
/// a cache twice or half as large, a cached table to fused_uvm or back to HBM.
///
/// `hybrid`: tables whose index distribution has frequent rows (hybrid_frequent_rows > 0)
/// may also become hybrid (their frequent rows data-parallel, the others split over all
/// ranks), in place of half of the row-wise moves; workloads without such tables draw the
/// same sequence as without it.
class LocalSearchProposer final : public Proposer {
 public:
  LocalSearchProposer(const DlrmSpec& w, const SystemSpec& s, std::uint64_t seed, bool memory_tiers = false,
                      bool hybrid = true);
  std::optional<Candidate> propose() override;
  void feedback(const Candidate& c, const PlanEvaluation& e) override;
  void recycle(Candidate&& c) override { scratch_ = std::move(c.plan); }

 private:
  const DlrmSpec* w_;
  const SystemSpec* s_;
  std::mt19937_64 rng_;
  Bytes budget_;  ///< embedding bytes a rank can hold (embedding_budget), computed once
  std::optional<ShardingPlan> current_;
  ShardingPlan scratch_;  ///< the next proposal, built by copy-assignment (reuses capacity)
  /// Tables mutate() changed in scratch_ since it last equalled current_ (restored from
  /// current_ before the next proposal), and whether scratch_ needs a whole copy instead
  /// (current_ changed).
  std::vector<std::size_t> touched_;
  std::vector<std::size_t> pick_buffer_;  ///< mutate()'s candidate tables (reused)
  bool full_copy_ = true;
  /// current_'s table_sharding_hash per table and plan_hash, for the proposals' hashes.
  std::vector<std::size_t> current_table_hash_;
  std::size_t current_hash_ = 0;
  TableSharding& touch(ShardingPlan& p, std::size_t t) {
    touched_.push_back(t);
    return p.tables[t];
  }
  PlanEvaluation current_eval_;
  int stale_ = 0;
  bool memory_tiers_ = false;
  /// Applies one random move to `p`; returns its name, or "" when the move did not apply.
  std::string mutate(ShardingPlan& p);
  /// One move of a table between HBM and host memory (memory_tiers), or "".
  std::string tier_move(ShardingPlan& p);
  /// Table `t` to hybrid with its frequent rows from the statistics, or "" when it has none.
  std::string hybrid_move(ShardingPlan& p, std::size_t t);
  std::vector<std::int64_t> hybrid_rows_;  ///< per table: hybrid_frequent_rows (0: not a candidate)
  int busiest_rank() const;
  int idlest_rank() const;
};

struct SearchOptions {
  double budget_s = 10;               ///< wall-clock budget
  std::size_t max_evaluations = 0;    ///< 0: no limit
  double timeout_s = 0;               ///< hard wall-clock limit over the budget and max_evaluations; 0: none
  std::function<void(std::size_t evaluations, double best_s)> progress;  ///< called now and then
};

struct SearchResult {
  std::optional<Candidate> best;   ///< best feasible plan (or least infeasible when none is)
  PlanEvaluation best_eval;
  std::size_t evaluations = 0;     ///< plans simulated
  std::size_t proposals = 0;       ///< plans proposed (cache hits included)
  double wall_s = 0;
  bool timed_out = false;          ///< SearchOptions::timeout_s stopped the search (best so far reported)
};

/// True when `a` is better than `b`: feasible beats infeasible, then shorter time.
[[nodiscard]] bool better(const PlanEvaluation& a, const PlanEvaluation& b);

[[nodiscard]] SearchResult run_search(std::vector<Proposer*> proposers, PlanEvaluator& evaluator, const SearchOptions& options);

}  // namespace perfcast

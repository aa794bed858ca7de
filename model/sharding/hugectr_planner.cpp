#include "model/sharding/hugectr_planner.hpp"

#include <algorithm>
#include <numeric>
#include <set>
#include <utility>

#include "model/sharding/plan_shapes.hpp"

namespace perfcast {
namespace {

/// A placement: the tables on each bucket, and the highest bucket cost.
struct Placement {
  std::vector<std::vector<std::size_t>> buckets;  ///< table indices per bucket
  double max_cost = 0;
};

/// The planner's state: per table its hotness, memory (GB) and current split; the shards to
/// place, hottest first (ties in table order).
class PlannerState {
 public:
  PlannerState(std::vector<double> hot, std::vector<double> gb, std::vector<bool> dp, int buckets, double shard_cost,
               double capacity, std::vector<std::int64_t> max_split)
      : hot_(std::move(hot)), gb_(std::move(gb)), max_split_(std::move(max_split)), buckets_(buckets), shard_cost_(shard_cost),
        capacity_(capacity), split_(hot_.size(), 0) {
    for (std::size_t t = 0; t < hot_.size(); ++t)
      if (!dp[t]) split_[t] = 1;
    rebuild_shards();
  }

  /// Places every shard on the cheapest bucket that does not hold its table and has room.
  /// Returns the table that fits nowhere, or nullopt with `out` the placement.
  std::optional<std::size_t> greedy(Placement& out) const {
    const auto B = static_cast<std::size_t>(buckets_);
    out.buckets.assign(B, {});
    std::vector<double> cost(B, 0.0), memory(B, 0.0);
    // Buckets by (cost, index): the cheapest first, ties to the lower index. Placing a shard
    // changes one bucket's cost, so each placement is O(log B) plus the buckets it skips.
    std::set<std::pair<double, std::size_t>> by_cost;
    for (std::size_t b = 0; b < B; ++b) by_cost.emplace(0.0, b);
    std::vector<std::vector<std::size_t>> holding(hot_.size());  // the buckets each table is on
    for (const std::size_t t : shards_) {
      const double share = 1.0 / double(split_[t]);
      std::optional<std::size_t> chosen;
      for (const auto& [c, b] : by_cost) {
        const auto& on = holding[t];
        if (std::find(on.begin(), on.end(), b) != on.end()) continue;  // one shard of a table per bucket
        if (memory[b] + gb_[t] * share > capacity_) continue;
        chosen = b;
        break;
      }
      if (!chosen) return t;
      const std::size_t b = *chosen;
      by_cost.erase({cost[b], b});
      cost[b] += hot_[t] * share + shard_cost_;
      memory[b] += gb_[t] * share;
      by_cost.emplace(cost[b], b);
      out.buckets[b].push_back(t);
      holding[t].push_back(b);
    }
    out.max_cost = *std::max_element(cost.begin(), cost.end());
    return std::nullopt;
  }

  /// Doubles the split of table `t` when the buckets (and its rows) allow; false otherwise.
  bool split(std::size_t t) {
    if (split_[t] * 2 > buckets_ || split_[t] * 2 > max_split_[t]) return false;
    split_[t] *= 2;
    rebuild_shards();
    return true;
  }

  /// Doubles the split of the hottest shard's table that can split further.
  void split_hottest() {
    for (const std::size_t t : shards_)
      if (split(t)) return;
  }

 private:
  void rebuild_shards() {
    shards_.clear();
    for (std::size_t t = 0; t < hot_.size(); ++t)
      for (std::int64_t k = 0; k < split_[t]; ++k) shards_.push_back(t);
    std::stable_sort(shards_.begin(), shards_.end(),
                     [&](std::size_t a, std::size_t b) { return hot_[a] / double(split_[a]) > hot_[b] / double(split_[b]); });
  }

  std::vector<double> hot_, gb_;
  std::vector<std::int64_t> max_split_;
  std::int64_t buckets_;
  double shard_cost_, capacity_;
  std::vector<std::int64_t> split_;  ///< 0: data-parallel
  std::vector<std::size_t> shards_;
};

/// The ranks of bucket `b`: the GPU, or every GPU of node `b` (hierarchical).
std::vector<int> bucket_ranks(std::size_t b, bool hierarchical, int gpus_per_node) {
  if (!hierarchical) return {static_cast<int>(b)};
  std::vector<int> r;
  for (int g = 0; g < gpus_per_node; ++g) r.push_back(static_cast<int>(b) * gpus_per_node + g);
  return r;
}

}  // namespace

HugectrPlannerOptions hugectr_dgx_h100_options(int nodes) {
  HugectrPlannerOptions o;
  if (nodes > 1) {
    o.hierarchical = true;
    o.mem_comm_bw_ratio = 67;
    o.dp_threshold_gb = 0.0125;
  }
  return o;
}

std::optional<ShardingPlan> hugectr_auto_plan(const DlrmSpec& w, const SystemSpec& s, const HugectrPlannerOptions& o) {
  const int g = o.hierarchical ? s.gpus_per_node : 1;
  const int buckets = o.hierarchical ? s.nodes : s.world_size();
  const std::size_t T = w.tables.size();
  if (T == 0 || buckets < 1) return std::nullopt;
  // generate_plan.py: 8 B an element with Adagrad (its accumulator), else 4.
  const double bytes_per_element = w.embedding_optimizer == EmbeddingOptimizer::kSgd ? 4.0 : 8.0;
  const double capacity = o.memory_cap_gb * g;
  std::vector<double> hot(T), gb(T);
  std::vector<bool> dp(T);
  std::vector<std::int64_t> max_split(T);
  double dp_gb = 0, all_gb = 0, all_hot = 0;
  for (std::size_t t = 0; t < T; ++t) {
    const auto& spec = w.tables[t];
    hot[t] = spec.pooling;
    gb[t] = double(spec.rows) * double(spec.dim) * bytes_per_element * 1e-9;
    dp[t] = gb[t] < o.dp_threshold_gb || spec.rows < g;  // a node's GPUs need a row each (hier_auto)
    max_split[t] = spec.rows / g;  // a row split needs a row on every GPU it spans
    if (dp[t]) dp_gb += gb[t];
    all_gb += gb[t];
    all_hot += hot[t];
  }
  const double shard_cost = o.mem_comm_bw_ratio / o.mem_comm_work_ratio;
  // The plan every table split over every bucket, the first candidate; HugeCTR raises when even it does not fit.
  if (all_gb / buckets > capacity) return std::nullopt;
  Placement best;
  best.buckets.assign(static_cast<std::size_t>(buckets), {});
  for (auto& list : best.buckets) {
    list.resize(T);
    std::iota(list.begin(), list.end(), std::size_t{0});
  }
  best.max_cost = all_hot / buckets + shard_cost * double(T);
  if (capacity - dp_gb >= 0) {
    PlannerState state(hot, gb, dp, buckets, shard_cost, capacity - dp_gb, max_split);
    for (int i = 0; i < o.max_iterations; ++i) {
      Placement p;
      if (const auto no_room = state.greedy(p)) {
        if (!state.split(*no_room)) break;
        continue;
      }
      if (p.max_cost < best.max_cost) best = std::move(p);
      state.split_hottest();
    }
  }
  // Each table's buckets, as perfcast shardings: data-parallel, one bucket, or rows over several.
  ShardingPlan plan;
  plan.source = o.hierarchical ? "hugectr_hier_auto" : "hugectr_auto";
  for (std::size_t t = 0; t < T; ++t) {
    const auto& spec = w.tables[t];
    if (dp[t]) {
      plan.tables.push_back(data_parallel(spec, s.world_size()));
      continue;
    }
    std::vector<int> ranks;
    for (std::size_t b = 0; b < best.buckets.size(); ++b) {
      const auto& list = best.buckets[b];
      if (std::find(list.begin(), list.end(), t) == list.end()) continue;
      for (const int r : bucket_ranks(b, o.hierarchical, g)) ranks.push_back(r);
    }
    if (ranks.size() == 1) plan.tables.push_back(table_wise(spec, ranks[0]));
    else if (o.hierarchical && ranks.size() == static_cast<std::size_t>(g)) plan.tables.push_back(table_row_wise(spec, ranks));
    else plan.tables.push_back(row_wise(spec, ranks));
  }
  return plan;
}

}  // namespace perfcast

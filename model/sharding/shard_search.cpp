#include "model/sharding/shard_search.hpp"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "model/sharding/plan_shapes.hpp"

namespace perfcast {

bool better(const PlanEvaluation& a, const PlanEvaluation& b) {
  if (a.feasible != b.feasible) return a.feasible;
  return a.iteration_time < b.iteration_time;
}

std::optional<Candidate> FixedPlansProposer::propose() {
  if (next_ >= plans_.size()) return std::nullopt;
  const auto& p = plans_[next_++];
  return Candidate{"baseline:" + p.name, p.plan, std::nullopt};
}

LocalSearchProposer::LocalSearchProposer(const DlrmSpec& w, const SystemSpec& s, std::uint64_t seed, bool memory_tiers,
                                         bool hybrid)
    : w_(&w), s_(&s), rng_(seed), budget_(embedding_budget(w, s)), memory_tiers_(memory_tiers) {
  hybrid_rows_.assign(w.tables.size(), 0);
  if (!hybrid || s.world_size() < 2) return;
  for (std::size_t t = 0; t < w.tables.size(); ++t)
    if (!w.tables[t].sequence) hybrid_rows_[t] = hybrid_frequent_rows(w.tables[t], w.batch_size, s.world_size());
}

std::string LocalSearchProposer::hybrid_move(ShardingPlan& p, std::size_t t) {
  if (hybrid_rows_[t] <= 0) return "";
  touch(p, t) = hybrid_sharding(w_->tables[t], s_->world_size(), hybrid_rows_[t]);
  return "hybrid";
}

void LocalSearchProposer::feedback(const Candidate& c, const PlanEvaluation& e) {
  if (!current_ || better(e, current_eval_)) {
    current_ = c.plan;
    current_eval_ = e;
    stale_ = 0;
    full_copy_ = true;
    current_table_hash_.resize(current_->tables.size());
    current_hash_ = 0;
    for (std::size_t t = 0; t < current_->tables.size(); ++t) {
      current_table_hash_[t] = table_sharding_hash(current_->tables[t]);
      current_hash_ += plan_hash_term(t, current_table_hash_[t]);
    }
  } else {
    ++stale_;
  }
}

int LocalSearchProposer::busiest_rank() const {
  const auto& t = current_eval_.rank_embedding_time;
  return static_cast<int>(std::max_element(t.begin(), t.end()) - t.begin());
}

int LocalSearchProposer::idlest_rank() const {
  const auto& t = current_eval_.rank_embedding_time;
  return static_cast<int>(std::min_element(t.begin(), t.end()) - t.begin());
}

namespace {

/// table_wise(t, rank) written into `s` in place (its vectors keep their capacity).
void assign_table_wise(TableSharding& s, const EmbeddingTableSpec& t, int rank) {
  s.type = ShardingType::kTableWise;
  s.ranks.assign(1, rank);
  s.shards.assign(1, Shard{0, t.rows, 0, t.dim, rank});
}

}  // namespace

std::string LocalSearchProposer::tier_move(ShardingPlan& p) {
  static constexpr double kLoadFactors[] = {0.05, 0.1, 0.2, 0.5};
  const std::size_t t = static_cast<std::size_t>(rng_() % p.tables.size());
  if (p.tables[t].type == ShardingType::kDataParallel) return "";
  TableSharding& ts = touch(p, t);
  const auto choice = rng_() % 4;
  switch (ts.storage) {
    case EmbeddingStorage::kHbm:
      ts.storage = EmbeddingStorage::kHostUvmCaching;
      ts.cache_load_factor = kLoadFactors[choice];
      return "to_uvm_caching";
    case EmbeddingStorage::kHostUvmCaching:
      if (choice == 0 && ts.cache_load_factor < 1) {
        ts.cache_load_factor = std::min(1.0, 2 * ts.cache_load_factor);
        return "cache_grow";
      }
      if (choice == 1 && ts.cache_load_factor > 0.01) {
        ts.cache_load_factor = std::max(0.01, ts.cache_load_factor / 2);
        return "cache_shrink";
      }
      ts.cache_load_factor = 0;
      ts.storage = choice == 2 ? EmbeddingStorage::kHostUvm : EmbeddingStorage::kHbm;
      return choice == 2 ? "to_uvm" : "to_hbm";
    case EmbeddingStorage::kHostUvm:
      ts.storage = choice < 2 ? EmbeddingStorage::kHostUvmCaching : EmbeddingStorage::kHbm;
      ts.cache_load_factor = choice < 2 ? kLoadFactors[choice + 1] : 0;
      return choice < 2 ? "to_uvm_caching" : "to_hbm";
  }
  return "";
}

std::string LocalSearchProposer::mutate(ShardingPlan& p) {
  const int n = s_->world_size();
  if (memory_tiers_ && !p.tables.empty() && (n < 2 || rng_() % 4 == 0)) return tier_move(p);
  if (n < 2) return "";
  const auto T = p.tables.size();
  auto pick = [&](std::size_t k) { return static_cast<std::size_t>(rng_() % k); };
  auto random_rank = [&] { return static_cast<int>(rng_() % static_cast<std::uint64_t>(n)); };
  // A table-wise table, preferably on the busiest rank.
  auto tw_table = [&](bool from_busiest) -> std::optional<std::size_t> {
    std::vector<std::size_t>& c = pick_buffer_;  // reused: no allocation per proposal
    c.clear();
    const int busy = busiest_rank();
    for (std::size_t t = 0; t < T; ++t)
      if (p.tables[t].type == ShardingType::kTableWise && (!from_busiest || p.tables[t].ranks[0] == busy)) c.push_back(t);
    if (c.empty()) return std::nullopt;
    return c[pick(c.size())];
  };
  // A model-parallel table of any type, for plans without a table-wise table (HugeCTR's
  // hier_auto splits every such table over a node).
  auto model_parallel_table = [&]() -> std::optional<std::size_t> {
    std::vector<std::size_t>& c = pick_buffer_;
    c.clear();
    for (std::size_t t = 0; t < T; ++t)
      if (p.tables[t].type != ShardingType::kDataParallel && p.tables[t].type != ShardingType::kHybrid) c.push_back(t);
    if (c.empty()) return std::nullopt;
    return c[pick(c.size())];
  };
  // Several nodes: one move in five makes a table node-local (table_row_wise,
  // table_column_wise or grid). One node draws nothing here, so its sequence is unchanged.
  const int g = s_->gpus_per_node, nodes = n / std::max(g, 1);
  if (nodes > 1 && rng_() % 5 == 0) {
    auto t = tw_table(rng_() % 2 == 0);
    if (!t) t = tw_table(false);
    if (!t) t = model_parallel_table();  // draws only where no table is table-wise
    if (!t) return "";
    const auto& spec = w_->tables[*t];
    if (spec.sequence) return "";  // TorchRec has no node-local sharding of sequence tables
    const int home = p.tables[*t].ranks[0];
    auto node_ranks = [&](int node) {
      std::vector<int> r;
      for (int l = 0; l < g; ++l) r.push_back(node * g + l);
      return r;
    };
    const int other_node = rng_() % 2 ? idlest_rank() / g : random_rank() / g;
    switch (rng_() % 3) {
      case 0:  // rows over the GPUs of the idlest (or a random) node
        if (spec.rows < g) return "";
        touch(p, *t) = table_row_wise(spec, node_ranks(other_node));
        return "table_row_wise";
      case 1: {  // columns over 2 or 4 GPUs of the table's node
        const int k = rng_() % 2 ? 2 : 4;
        if (spec.dim < 4 * k || k > g) return "";
        std::vector<int> ranks{home};
        while (static_cast<int>(ranks.size()) < k) {
          const int r = home / g * g + static_cast<int>(rng_() % static_cast<std::uint64_t>(g));
          if (std::find(ranks.begin(), ranks.end(), r) == ranks.end()) ranks.push_back(r);
        }
        touch(p, *t) = table_column_wise(spec, ranks);
        return "table_column_wise";
      }
      default:  // two column blocks, each row-split over one node
        if (spec.dim < 8 || spec.rows < g) return "";
        touch(p, *t) = grid(spec, {node_ranks(home / g), node_ranks(other_node)});
        return "grid";
    }
  }
  const double u = std::uniform_real_distribution<double>(0, 1)(rng_);
  if (u < 0.40) {  // move
    auto t = tw_table(rng_() % 3 != 0);
    if (!t) t = tw_table(false);
    if (!t) return "";
    int to = rng_() % 2 ? idlest_rank() : random_rank();
    if (to == p.tables[*t].ranks[0]) to = (to + 1 + static_cast<int>(pick(static_cast<std::size_t>(n - 1)))) % n;
    assign_table_wise(touch(p, *t), w_->tables[*t], to);
    return "move";
  }
  if (u < 0.60) {  // swap
    const auto a = tw_table(true), b = tw_table(false);
    if (!a || !b || p.tables[*a].ranks[0] == p.tables[*b].ranks[0]) return "";
    const int ra = p.tables[*a].ranks[0], rb = p.tables[*b].ranks[0];
    assign_table_wise(touch(p, *a), w_->tables[*a], rb);
    assign_table_wise(touch(p, *b), w_->tables[*b], ra);
    return "swap";
  }
  if (u < 0.75) {  // split column-wise over 2 or 4 ranks
    const auto t = tw_table(rng_() % 2 == 0);
    if (!t) return "";
    const std::int64_t k = rng_() % 2 ? 2 : 4;
    if (w_->tables[*t].dim < 4 * k || k > n) return "";
    std::vector<int> ranks{p.tables[*t].ranks[0]};
    while (static_cast<std::int64_t>(ranks.size()) < k) {
      const int r = ranks.size() == 1 && rng_() % 2 ? idlest_rank() : random_rank();
      if (std::find(ranks.begin(), ranks.end(), r) == ranks.end()) ranks.push_back(r);
    }
    touch(p, *t) = column_wise(w_->tables[*t], ranks);
    return "split";
  }
  // Tables that are not table-wise: merge back, or switch a table to DP / row-wise.
  std::vector<std::size_t>& other = pick_buffer_;
  other.clear();
  for (std::size_t t = 0; t < T; ++t)
    if (p.tables[t].type != ShardingType::kTableWise) other.push_back(t);
  if (u < 0.85) {
    if (other.empty()) return "";
    const auto t = other[pick(other.size())];
    const auto& ranks = p.tables[t].ranks;
    const int to = ranks[pick(ranks.size())];
    assign_table_wise(touch(p, t), w_->tables[t], to);
    return "merge";
  }
  // One node: half the time a table of the busiest rank. Splitting the table that makes the
  // critical rank critical (a pooling-heavy one) over the node's NVLink is what these moves
  // are for. Over several nodes a table split over all ranks crosses the network: there the
  // table is drawn uniformly (and no extra draw is made, so their sequence is unchanged); the
  // node-local moves above target the busiest rank instead.
  // A table split column-wise may also be re-split row-wise directly: between the two the
  // table-wise plan is often worse than both, a valley the merge move would have to cross.
  const auto busiest = nodes == 1 && rng_() % 2 == 0 ? tw_table(true) : std::nullopt;
  const auto t = busiest ? *busiest : pick(T);
  const bool table_wise = p.tables[t].type == ShardingType::kTableWise;
  const bool resplit = p.tables[t].type == ShardingType::kColumnWise && u >= 0.925;
  if (!table_wise && !resplit) return "";
  if (u < 0.925) {
    // Only small tables are worth replicating: under 1% of the rank's embedding budget.
    if (table_bytes(*w_, w_->tables[t]) > 0.01 * budget_) return "";
    touch(p, t) = data_parallel(w_->tables[t], n);
    return "data_parallel";
  }
  if (table_wise && hybrid_rows_[t] > 0 && rng_() % 2 == 0) return hybrid_move(p, t);
  std::vector<int> all(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) all[static_cast<std::size_t>(r)] = r;
  if (w_->tables[t].rows < n) return "";
  touch(p, t) = row_wise(w_->tables[t], all);
  return "row_wise";
}

std::optional<Candidate> LocalSearchProposer::propose() {
  if (!current_) return std::nullopt;
  for (int attempt = 0; attempt < 64; ++attempt) {
    // scratch_ equals current_ except the tables the last proposals changed (it comes back
    // through recycle()): restore those instead of copying the whole plan.
    ShardingPlan& p = scratch_;
    if (full_copy_ || p.tables.size() != current_->tables.size()) {
      p = *current_;
      full_copy_ = false;
    } else {
      for (const std::size_t t : touched_) p.tables[t] = current_->tables[t];
    }
    touched_.clear();
    // After many proposals without progress, kick harder: several moves at once.
    const int moves = stale_ > 200 ? 3 : 1;
    std::string name;
    for (int m = 0; m < moves; ++m) {
      const std::string one = mutate(p);
      if (!one.empty()) name += (name.empty() ? "" : "+") + one;
    }
    if (name.empty()) continue;
    if (stale_ > 200) stale_ = 0;
    p.source = "search";
    // plan_hash(p) from current_'s: replace the terms of the tables the moves changed.
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
    std::size_t h = current_hash_;
    for (const std::size_t t : touched_) {
      h -= plan_hash_term(t, current_table_hash_[t]);
      h += plan_hash_term(t, table_sharding_hash(p.tables[t]));
    }
    return Candidate{"local:" + name, std::move(p), h};
  }
  return std::nullopt;
}

SearchResult run_search(std::vector<Proposer*> proposers, PlanEvaluator& evaluator, const SearchOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  SearchResult result;
  std::unordered_map<std::size_t, PlanEvaluation> cache;
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  // The first plan is always evaluated, so there is a best result to report however
  // small the budget; after it the budget, the evaluation count or the timeout stop.
  auto out_of_budget = [&] {
    if (!result.best) return false;
    if (options.timeout_s > 0 && elapsed() >= options.timeout_s) {
      result.timed_out = true;
      return true;
    }
    if (options.max_evaluations > 0) return result.evaluations >= options.max_evaluations;
    return elapsed() >= options.budget_s;
  };
  // A round in which no proposer proposes ends the search only when it repeats: the local
  // search's 64 draws can all miss (no table-wise table left to move, say) while its next
  // round finds a move.
  constexpr int kEmptyRoundsToStop = 16;
  int empty_rounds = 0;
  std::size_t idle_rounds = 0;
  while (empty_rounds < kEmptyRoundsToStop && !out_of_budget()) {
    bool any = false;
    for (Proposer* prop : proposers) {
      if (out_of_budget()) break;
      auto c = prop->propose();
      if (!c) continue;
      any = true;
      empty_rounds = 0;
      ++result.proposals;
      const std::size_t h = c->hash ? *c->hash : plan_hash(c->plan);
      auto it = cache.find(h);
      if (it == cache.end()) {
        it = cache.emplace(h, evaluator.evaluate(c->plan)).first;
        ++result.evaluations;
        idle_rounds = 0;
      } else if (++idle_rounds > 100000) {
        empty_rounds = kEmptyRoundsToStop;  // the proposers only repeat known plans
        break;
      }
      const PlanEvaluation& e = it->second;
      if (!result.best || better(e, result.best_eval)) {
        result.best = *c;
        result.best_eval = e;
      }
      for (Proposer* other : proposers) other->feedback(*c, e);
      prop->recycle(std::move(*c));
      if (options.progress && result.evaluations % 256 == 0) options.progress(result.evaluations, result.best_eval.iteration_time);
    }
    if (!any) ++empty_rounds;
  }
  result.wall_s = elapsed();
  return result;
}

}  // namespace perfcast

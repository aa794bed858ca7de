#include <catch2/catch.hpp>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/graph/memory_estimate.hpp"
#include "model/sharding/plan_shapes.hpp"
#include "model/sharding/shard_search.hpp"
#include "topology/collective_calibration.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_shard_search_test {

using namespace perfcast;

namespace {

std::string src(const std::string& rel) { return std::string(PERFCAST_SOURCE_DIR) + "/" + rel; }

/// A small DLRM written in code: `tables` tables of rows x dim, pooling 10.
DlrmSpec small_dlrm(int tables, std::int64_t rows, std::int64_t dim) {
  DlrmSpec w = load_workload(src("configs/workloads/dlrm_default.json"));
  w.bottom_mlp = {16, 32, dim};
  w.top_mlp = {64, 1};
  w.batch_size = 1024;
  w.tables.clear();
  for (int t = 0; t < tables; ++t) w.tables.push_back({"t" + std::to_string(t), rows, dim, 10, IndexDistribution::uniform()});
  return w;
}

}  // namespace

TEST_CASE("memory accounting worked by hand", "[shard][memory]") {
  const SystemSpec s = load_system(src("configs/systems/dgx_h100.json"));
  DlrmSpec w = small_dlrm(1, 1000, 16);
  w.embedding_optimizer = EmbeddingOptimizer::kRowwiseAdagrad;
  ShardingPlan p;
  p.tables = {table_wise(w.tables[0], 3)};
  const auto m = estimate_memory(w, p, s);
  // Rank 3: 1000 x 16 fp32 weights + one fp32 Adagrad state per row.
  CHECK(m[3].embedding == Approx(1000.0 * 16 * 4 + 1000 * 4));
  CHECK(m[0].embedding == 0);
  // I/O on rank 3: global batch 1024 x (10 indices + 1 offset) x 8 B in, 1024 x 16 x 4 B out;
  // every rank also holds its 128 samples' pooled rows and their gradients: 2 x 128 x 16 x 4.
  CHECK(m[3].io == Approx(1024.0 * 11 * 8 + 1024.0 * 16 * 4 + 2 * 128.0 * 16 * 4));
  CHECK(m[0].io == Approx(2 * 128.0 * 16 * 4));
  // 15% of the H100's 81,559 MiB (the total nvidia-smi reports).
  CHECK(m[3].reserved == Approx(0.15 * 81559.0 * 1024 * 1024));
  CHECK(memory_verdict(m).empty());
}

TEST_CASE("an infeasible plan names the rank and its need", "[shard][memory]") {
  const SystemSpec s = load_system(src("configs/systems/dgx_h100.json"));
  // Two tables of 40 GB each (1e8 rows x 100 fp32): they fit on separate ranks, not together.
  DlrmSpec w = small_dlrm(2, 100'000'000, 100);
  ShardingPlan both;
  both.tables = {table_wise(w.tables[0], 0), table_wise(w.tables[1], 0)};
  const auto comm = make_collective_model(s);
  PlanEvaluator ev(s, w, *comm);
  const auto bad = ev.evaluate(both);
  CHECK_FALSE(bad.feasible);
  CHECK_THAT(bad.reason, Catch::StartsWith("rank 0 needs"));
  ShardingPlan apart;
  apart.tables = {table_wise(w.tables[0], 0), table_wise(w.tables[1], 1)};
  CHECK(ev.evaluate(apart).feasible);
  // The greedy baselines respect the budget.
  for (const auto& b : baseline_plans(w, s, 1)) {
    if (b.name == "random" || b.name == "round_robin") continue;
    INFO(b.name);
    CHECK(ev.evaluate(b.plan).feasible);
  }
}

TEST_CASE("plan JSON round trip keeps every shard", "[shard][plan]") {
  const SystemSpec s = load_system(src("configs/systems/dgx_h100.json"));
  const DlrmSpec w = small_dlrm(4, 5000, 64);
  ShardingPlan p;
  p.tables = {table_wise(w.tables[0], 5), column_wise(w.tables[1], {1, 2, 7}), row_wise(w.tables[2], {0, 1, 2, 3, 4, 5, 6, 7}),
              data_parallel(w.tables[3], 8)};
  const std::string text = plan_to_json(p, w, 8, 8);
  const auto j = nlohmann::json::parse(text);
  CHECK(j["tables"]["t1"]["sharding_type"] == "column_wise");
  CHECK(j["tables"]["t1"]["sharding_spec"][2]["placement"] == "rank:7/cuda:7");
  CHECK(j["tables"]["t1"]["sharding_spec"][0]["shard_sizes"] == nlohmann::json::array({5000, 22}));  // 64 = 22 + 21 + 21
  const ShardingPlan back = parse_plan(JsonDocument{j, "round-trip"}, w, 8);
  REQUIRE(back.tables.size() == 4);
  CHECK(plan_hash(back) == plan_hash(p));
}

TEST_CASE("search: never worse than the best baseline, deterministic for a seed", "[shard][search]") {
  const SystemSpec s = load_system(src("configs/systems/dgx_h100.json"));
  const DlrmSpec w = load_workload(src("configs/workloads/dlrm_mlperf.json"));
  const auto comm = make_collective_model(s);
  auto run = [&](std::uint64_t seed) {
    PlanEvaluator ev(s, w, *comm);
    FixedPlansProposer fixed(baseline_plans(w, s, seed));
    LocalSearchProposer local(w, s, seed);
    SearchOptions opt;
    opt.max_evaluations = 300;
    return run_search({&fixed, &local}, ev, opt);
  };
  const SearchResult a = run(7);
  const SearchResult b = run(7);
  REQUIRE(a.best);
  CHECK(plan_hash(a.best->plan) == plan_hash(b.best->plan));
  CHECK(a.best_eval.iteration_time == b.best_eval.iteration_time);
  CHECK(a.evaluations == 300);
  PlanEvaluator ev(s, w, *comm);
  for (const auto& base : baseline_plans(w, s, 7)) {
    const auto e = ev.evaluate(base.plan);
    INFO(base.name);
    CHECK_FALSE(better(e, a.best_eval));
  }
  CHECK(a.best_eval.feasible);
}

TEST_CASE("search: on one node the busiest rank's pooling-heavy table is split within 500 plans", "[shard][search]") {
  // dlrm_mlperf on a DGX H100: the baselines but HugeCTR's planner keep each table whole, and
  // the rank holding the pooling-heavy tables is the critical path. Splitting one of them over
  // the node is the move that pays; drawing the split's table from the busiest rank finds it
  // early. Started from those baselines alone, the search reaches HugeCTR's planner's plan.
  const SystemSpec s = load_system(src("configs/systems/dgx_h100.json"));
  const DlrmSpec w = load_workload(src("configs/workloads/dlrm_mlperf.json"));
  const auto comm = make_collective_model(s);
  PlanEvaluator ev(s, w, *comm);
  std::vector<NamedPlan> whole;
  double hugectr = 0;
  for (auto& b : baseline_plans(w, s, 1)) {
    if (b.name == "hugectr_auto") hugectr = ev.evaluate(b.plan).iteration_time;
    else whole.push_back(std::move(b));
  }
  REQUIRE(hugectr > 0);
  FixedPlansProposer fixed(whole);
  LocalSearchProposer local(w, s, 1);
  SearchOptions opt;
  opt.max_evaluations = 500;
  const SearchResult r = run_search({&fixed, &local}, ev, opt);
  REQUIRE(r.best);
  double best_baseline = 1e300;
  for (const auto& base : whole) best_baseline = std::min(best_baseline, ev.evaluate(base.plan).iteration_time);
  CHECK(r.best_eval.feasible);
  CHECK(r.best_eval.iteration_time < 0.75 * best_baseline);
  CHECK(r.best_eval.iteration_time < 1.02 * hugectr);
  int split = 0;
  for (const auto& t : r.best->plan.tables) split += t.type != ShardingType::kTableWise;
  CHECK(split > 0);
}

TEST_CASE("local search: proposals carry plan_hash, kept incrementally, and scratch restores exactly", "[shard]") {
  const SystemSpec s = load_system(src("configs/systems/dgx_h100.json"));
  const DlrmSpec w = small_dlrm(12, 100'000, 32);
  LocalSearchProposer local(w, s, 7);
  // Start from round-robin; feed back invented evaluations so that some proposals are
  // accepted (current plan changes: whole copy) and most are not (restore of the touched tables).
  Candidate start{"baseline", default_plan(w, s.world_size()), std::nullopt};
  PlanEvaluation e0;
  e0.feasible = true;
  e0.iteration_time = 1.0;
  e0.rank_embedding_time.assign(static_cast<std::size_t>(s.world_size()), 0.0);
  e0.rank_embedding_time[3] = 1.0;
  local.feedback(start, e0);
  ShardingPlan current = start.plan;
  double best = 1.0;
  for (int i = 0; i < 400; ++i) {
    auto c = local.propose();
    REQUIRE(c);
    REQUIRE(c->hash.has_value());
    CHECK(*c->hash == plan_hash(c->plan));
    // Exactly the tables the proposal changed differ from the current plan, every time.
    std::size_t changed = 0;
    for (std::size_t t = 0; t < current.tables.size(); ++t) changed += plan_hash_term(t, table_sharding_hash(c->plan.tables[t])) != plan_hash_term(t, table_sharding_hash(current.tables[t]));
    CHECK(changed >= 1);
    CHECK(changed <= 6);  // at most three moves of two tables
    PlanEvaluation e = e0;
    e.iteration_time = i % 7 == 0 ? best * 0.99 : best * 1.01;  // accept one in seven
    if (e.iteration_time < best) {
      best = e.iteration_time;
      current = c->plan;
    }
    local.feedback(*c, e);
    local.recycle(std::move(*c));
  }
  // plan_hash: equal plans hash equal; a different shard changes it.
  ShardingPlan a = default_plan(w, 8), b = a;
  CHECK(plan_hash(a) == plan_hash(b));
  b.tables[5] = table_wise(w.tables[5], (a.tables[5].ranks[0] + 1) % 8);
  CHECK(plan_hash(a) != plan_hash(b));
}

TEST_CASE("memory accounting of host-memory tables worked by hand", "[shard][memory][host_memory]") {
  const SystemSpec s = load_system(src("configs/systems/dgx_h100.json"));
  DlrmSpec w = small_dlrm(2, 1000, 16);
  w.embedding_optimizer = EmbeddingOptimizer::kRowwiseAdagrad;
  ShardingPlan p;
  p.tables = {table_wise(w.tables[0], 3), table_wise(w.tables[1], 3)};
  p.tables[0].storage = EmbeddingStorage::kHostUvm;
  p.tables[1].storage = EmbeddingStorage::kHostUvmCaching;
  p.tables[1].cache_load_factor = 0.25;
  const auto m = estimate_memory(w, p, s);
  // Both tables keep weights (1000 x 16 x 4 B) and Adagrad state (4 B per row) in host memory.
  CHECK(m[3].host == Approx(2 * (1000.0 * 16 * 4 + 1000 * 4)));
  // The cached table adds its cache, 25% of its weights, and the cache's bookkeeping,
  // 1000 rows x (4 + 16 x 0.25) B, to HBM; the fused_uvm table adds nothing.
  CHECK(m[3].embedding == Approx(0.25 * 1000 * 16 * 4 + 1000 * (4 + 16 * 0.25)));
  // DGX H100: 2 TB of host memory, 10% reserved, over 8 GPUs.
  CHECK(m[3].host_capacity == Approx(2e12 * 0.9 / 8));
  CHECK(m[3].fits());
  SystemSpec no_host = s;
  no_host.host_memory.capacity = 0;
  const auto m2 = estimate_memory(w, p, no_host);
  CHECK_FALSE(m2[3].fits());
  CHECK(m2[0].fits());
  CHECK_THAT(memory_verdict(m2), Catch::Contains("rank 3") && Catch::Contains("declares no host_memory"));
}

namespace {

/// Keeps every evaluated plan with its verdict (proposes nothing).
class KeepEvaluations final : public Proposer {
 public:
  std::optional<Candidate> propose() override { return std::nullopt; }
  void feedback(const Candidate& c, const PlanEvaluation& e) override { seen.emplace_back(c.plan, e); }
  std::vector<std::pair<ShardingPlan, PlanEvaluation>> seen;
};

}  // namespace

TEST_CASE("with memory tiers dlrm_mlperf fits one H100, and no feasible plan exceeds HBM or host memory", "[shard][host_memory]") {
  const SystemSpec s = load_system(src("configs/systems/h100_sxm.json"));
  const DlrmSpec w = load_workload(src("configs/workloads/dlrm_mlperf.json"));
  REQUIRE_THAT(capacity_hint(w, s), Catch::Contains("shard --memory-tiers on"));
  CHECK(capacity_hint(w, s, true).empty());
  const auto comm = make_collective_model(s);
  PlanEvaluator ev(s, w, *comm);
  const auto baselines = baseline_plans(w, s, 1, true);
  FixedPlansProposer fixed(baselines);
  LocalSearchProposer local(w, s, 1, true);
  KeepEvaluations keep;
  SearchOptions opt;
  opt.max_evaluations = 400;
  const SearchResult r = run_search({&fixed, &local, &keep}, ev, opt);
  REQUIRE(r.best_eval.feasible);
  int feasible = 0, host_tables = 0;
  for (const auto& [plan, e] : keep.seen) {
    const auto m = estimate_memory(w, plan, s);
    INFO("plan with verdict " << e.reason);
    REQUIRE(e.feasible == (m[0].fits_device() && m[0].fits_host()));
    if (!e.feasible) continue;
    ++feasible;
    for (const auto& t : plan.tables) host_tables += t.storage != EmbeddingStorage::kHbm ? 1 : 0;
    REQUIRE(m[0].total() <= m[0].capacity);
    REQUIRE(m[0].host <= m[0].host_capacity);
  }
  CHECK(feasible > 10);
  CHECK(host_tables > 0);
  // The HBM-only plans do not fit; the search's best is no slower than the tiered baselines.
  for (const auto& b : baselines) {
    const PlanEvaluation e = ev.evaluate(b.plan);
    const bool tiered = b.name.find("+host_memory") != std::string::npos;
    CHECK(e.feasible == tiered);
    if (tiered) CHECK(r.best_eval.iteration_time <= e.iteration_time);
  }
}

TEST_CASE("an empty round does not end the search; sixteen in a row do", "[shard][search]") {
  // A proposer that has nothing on its first three calls, then four distinct plans (table 0
  // on ranks 1..4), then nothing: the search evaluates all four and then stops by itself
  // (no evaluation limit, a budget far longer than the test).
  const SystemSpec s = load_system(src("configs/systems/dgx_h100.json"));
  const DlrmSpec w = small_dlrm(4, 5000, 64);
  struct Gappy final : Proposer {
    const DlrmSpec* w = nullptr;
    int calls = 0;
    std::optional<Candidate> propose() override {
      ++calls;
      if (calls <= 3 || calls > 7) return std::nullopt;
      ShardingPlan p = default_plan(*w, 8);
      p.tables[0] = table_wise(w->tables[0], calls - 3);
      return Candidate{"gappy", std::move(p), std::nullopt};
    }
    void feedback(const Candidate&, const PlanEvaluation&) override {}
  } gappy;
  gappy.w = &w;
  const auto comm = make_collective_model(s);
  PlanEvaluator ev(s, w, *comm);
  SearchOptions opt;
  opt.budget_s = 60;
  const SearchResult r = run_search({&gappy}, ev, opt);
  CHECK(r.evaluations == 4);
  CHECK(gappy.calls == 7 + 16);  // the four plans, then sixteen empty rounds
  CHECK(r.wall_s < opt.budget_s);
}

}  // namespace perfcast_test_model_shard_search_test

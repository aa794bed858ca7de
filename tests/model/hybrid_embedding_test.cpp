// Hybrid embedding tables (frequent rows data-parallel, the others model-parallel): the split
// from the index statistics, the bytes the partial sums move, the lookups each side does, the
// memory, plan files, and the search proposing them; values by hand.
#include <cmath>

#include <catch2/catch.hpp>

#include "model/graph/dlrm_builder.hpp"
#include "tests/model/dlrm_test_support.hpp"
#include "model/graph/memory_estimate.hpp"
#include "model/sharding/shard_search.hpp"
#include "topology/system_spec.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_hybrid_embedding_test {

using namespace perfcast;
using perfcast::test::has_op;
using perfcast::test::op_named;
using perfcast::test::src;

namespace {

/// dlrm_default (8 tables of 1,000,000 rows x 64 fp32, pooling 100, global batch 2,048, SGD)
/// with table 0's indices a hot set: 1% of the rows (10,000) take 90% of the lookups.
DlrmSpec skewed() {
  DlrmSpec w = load_workload(src("configs/workloads/dlrm_default.json"));
  REQUIRE(w.tables.size() == 8);
  REQUIRE(w.tables[0].rows == 1'000'000);
  REQUIRE(w.tables[0].dim == 64);
  REQUIRE(w.tables[0].pooling == 100);
  REQUIRE(w.batch_size == 2048);
  REQUIRE(w.embedding_optimizer == EmbeddingOptimizer::kSgd);
  w.tables[0].distribution = IndexDistribution::hot_set(0.01, 0.9);
  return w;
}

ShardingPlan hybrid_plan(const DlrmSpec& w, int world, std::int64_t frequent) {
  ShardingPlan p = default_plan(w, world);
  p.tables[0] = hybrid_sharding(w.tables[0], world, frequent);
  return p;
}

}  // namespace

TEST_CASE("hybrid split from the index statistics, by hand", "[hybrid]") {
  const DlrmSpec w = skewed();
  // 2,048 x 100 = 204,800 lookups a step: each hot row expects 204,800 x 0.9 / 10,000 = 18.4
  // (>= 1: frequent), each cold row 20,480 / 990,000 = 0.02 (not).
  CHECK(hybrid_frequent_rows(w.tables[0], 2048, 8) == 10'000);
  // Uniform indices: 0.2 lookups a row, none frequent.
  CHECK(hybrid_frequent_rows(load_workload(src("configs/workloads/dlrm_default.json")).tables[0], 2048, 8) == 0);
  const TableSharding ts = hybrid_sharding(w.tables[0], 8, 10'000);
  CHECK(hybrid_frequent_share(w.tables[0], ts, 2048) == Approx(0.9));
  // The other 990,000 rows over 8 ranks: 123,750 each, from row 10,000 on.
  REQUIRE(ts.shards.size() == 8);
  CHECK(ts.shards[0].row_offset == 10'000);
  for (const auto& sh : ts.shards) CHECK(sh.rows == 123'750);
  CHECK(ts.shards[7].row_offset + ts.shards[7].rows == 1'000'000);
}

TEST_CASE("hybrid table: lookups on both sides and the partial sums' all-to-all, by hand", "[hybrid]") {
  const DlrmSpec w = skewed();
  const ExecutionGraph g = build_dlrm_graph(w, hybrid_plan(w, 8, 10'000), 8);
  // Each rank's 256 samples look up the frequent rows locally: 100 x 0.9 = 90 indices a sample
  // over a 10,000-row table.
  const auto& dp = std::get<EmbeddingDesc>(op_named(g, 0, "embedding_lookup.data_parallel").kernels.at(0));
  REQUIRE(dp.tables.size() == 1);
  CHECK(dp.tables[0].rows == 10'000);
  CHECK(dp.tables[0].pooling == Approx(90));
  // A shard sees 100 x 0.1 x 123,750 / 990,000 = 1.25 of a sample's indices. Rank i sends rank
  // j the fp32 partial sum of each of j's 256 samples whose bag touched i's shard:
  // 256 x (1 - e^-1.25) x 64 x 4 B = 46,154.6 B.
  const auto& op = op_named(g, 0, "output_dist.hybrid");
  REQUIRE(op.collective.has_value());
  const auto& pairs = g.collectives[static_cast<std::size_t>(*op.collective)].desc.pair_bytes;
  const double expected = 256 * (1 - std::exp(-1.25)) * 64 * 4;
  CHECK(pairs[0 * 8 + 1] == Approx(expected));
  CHECK(pairs[3 * 8 + 5] == Approx(expected));
  CHECK(pairs[2 * 8 + 2] == 0);
  // Its backward moves the same bytes back.
  const auto& back = op_named(g, 0, "output_dist.hybrid.backward");
  CHECK(g.collectives[static_cast<std::size_t>(*back.collective)].desc.pair_bytes[0 * 8 + 1] == Approx(expected));
}

TEST_CASE("hybrid table memory: replicated frequent rows with their gradient, by hand", "[hybrid]") {
  const DlrmSpec w = skewed();
  const SystemSpec s = load_system(src("configs/systems/dgx_h100.json"));
  REQUIRE(s.world_size() == 8);
  const auto none = estimate_memory(w, hybrid_plan(w, 8, 0), s);
  const auto some = estimate_memory(w, hybrid_plan(w, 8, 10'000), s);
  // 10,000 frequent rows: each rank's shard shrinks from 125,000 to 123,750 rows (-1,250 rows)
  // and it holds the 10,000 frequent rows and their dense gradient: (-1,250 + 2 x 10,000) x
  // 64 x 4 B (SGD: no optimizer state) = 4,800,000 B more on every rank.
  for (std::size_t r = 0; r < 8; ++r) CHECK(some[r].embedding - none[r].embedding == Approx(4'800'000));
}

TEST_CASE("hybrid tables: the search proposes them for skewed tables only", "[hybrid][shard]") {
  const SystemSpec s = load_system(src("configs/systems/dgx_h100.json"));
  auto hybrid_proposals = [&](const DlrmSpec& w, bool hybrid) {
    LocalSearchProposer local(w, s, 11, false, hybrid);
    Candidate start{"baseline", default_plan(w, 8), std::nullopt};
    PlanEvaluation e0;
    e0.feasible = true;
    e0.iteration_time = 1.0;
    e0.rank_embedding_time.assign(8, 0.0);
    e0.rank_embedding_time[0] = 1.0;
    local.feedback(start, e0);
    int n = 0;
    for (int i = 0; i < 400; ++i) {
      auto c = local.propose();
      REQUIRE(c);
      for (std::size_t t = 0; t < c->plan.tables.size(); ++t)
        if (c->plan.tables[t].type == ShardingType::kHybrid) {
          CHECK(t == 0);  // the only table with frequent rows
          CHECK(c->plan.tables[t].frequent_rows == 10'000);
          ++n;
        }
      local.recycle(std::move(*c));
    }
    return n;
  };
  CHECK(hybrid_proposals(skewed(), true) > 0);
  CHECK(hybrid_proposals(skewed(), false) == 0);
  CHECK(hybrid_proposals(load_workload(src("configs/workloads/dlrm_default.json")), true) == 0);
}

}  // namespace perfcast_test_model_hybrid_embedding_test

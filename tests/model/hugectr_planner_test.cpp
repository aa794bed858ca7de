// HugeCTR's "auto" / "hier_auto" sharding planner (model/sharding/hugectr_planner.hpp): plans
// worked by hand on small cases (costs, memory-driven placement), the DLRM-DCNv2 layout on one
// DGX H100, the hierarchical layout on two nodes, and the stack setting that makes it the
// default plan of a prediction.
#include <catch2/catch.hpp>

#include "model/graph/dlrm_builder.hpp"
#include "model/predict/predict.hpp"
#include "model/predict/runtime_profile.hpp"
#include "model/sharding/hugectr_planner.hpp"
#include "tests/model/dlrm_test_support.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_hugectr_planner_test {

using namespace perfcast;
using perfcast::test::src;

namespace {

/// Four tables of 1,000,000 rows x 128 (1.024 GB each with Adagrad's 8 B an element), multi-hot
/// sizes 8, 4, 2, 1.
DlrmSpec four_tables() {
  DlrmSpec w = load_workload(src("configs/workloads/dlrm_default.json"));
  w.embedding_optimizer = EmbeddingOptimizer::kAdagrad;
  w.tables.clear();
  for (const double hot : {8.0, 4.0, 2.0, 1.0}) {
    EmbeddingTableSpec t;
    t.name = "t" + std::to_string(w.tables.size());
    t.rows = 1000000;
    t.dim = 128;
    t.pooling = hot;
    w.tables.push_back(t);
  }
  return w;
}

SystemSpec gpus(int n) {
  JsonDocument d = load_json_file(src("configs/systems/dgx_h100.json"));
  apply_override(d, "gpus_per_node", std::to_string(n));
  return parse_system(d);
}

/// The rank of a table-wise table.
int rank_of(const ShardingPlan& p, std::size_t t) {
  REQUIRE(p.tables[t].type == ShardingType::kTableWise);
  return p.tables[t].ranks.at(0);
}

}  // namespace

TEST_CASE("hugectr planner: costs by hand on two GPUs", "[shard][hugectr]") {
  // Shard cost 7 / 4 = 1.75. Every table split over both GPUs: 15 / 2 + 4 x 1.75 = 14.5 a
  // GPU. First round, hottest first onto the cheapest GPU: t0 on 0 (9.75), t1 on 1 (5.75),
  // t2 on 1 (9.5), t3 on 1 (12.25): the maximum 12.25 beats 14.5. Later rounds split t0, then
  // t1, t2, t3 in two; none gets below 12.25 (12.25, 13.25, 15, 14.5), so the first stands.
  const auto p = hugectr_auto_plan(four_tables(), gpus(2), HugectrPlannerOptions{});
  REQUIRE(p.has_value());
  CHECK(p->source == "hugectr_auto");
  CHECK(rank_of(*p, 0) == 0);
  CHECK(rank_of(*p, 1) == 1);
  CHECK(rank_of(*p, 2) == 1);
  CHECK(rank_of(*p, 3) == 1);
}

TEST_CASE("hugectr planner: the memory cap moves and splits tables", "[shard][hugectr]") {
  // 2.1 GB a GPU holds two whole tables. First round: t0 on 0, t1 and t2 on 1, then t3 no
  // longer fits on 1 and goes to 0 (12.5): the best. With t0 split, t3 fits nowhere and is
  // split; the maximum never gets below 12.5 again, and once t3 cannot split further the
  // search stops.
  HugectrPlannerOptions o;
  o.memory_cap_gb = 2.1;
  const auto p = hugectr_auto_plan(four_tables(), gpus(2), o);
  REQUIRE(p.has_value());
  CHECK(rank_of(*p, 0) == 0);
  CHECK(rank_of(*p, 3) == 0);
  CHECK(rank_of(*p, 1) == 1);
  CHECK(rank_of(*p, 2) == 1);
  // 2 GB: not even every table split over both GPUs (2.048 GB each) fits: no plan.
  o.memory_cap_gb = 2.0;
  CHECK_FALSE(hugectr_auto_plan(four_tables(), gpus(2), o).has_value());
}

TEST_CASE("hugectr planner: DLRM-DCNv2 on one DGX H100 and on two", "[shard][hugectr]") {
  const DlrmSpec w = load_workload(src("configs/workloads/dlrm_dcnv2_mlperf.json"));
  REQUIRE(w.embedding_optimizer == EmbeddingOptimizer::kRowwiseAdagrad);  // 8 B an element, as for Adagrad
  const auto p = hugectr_auto_plan(w, gpus(8), hugectr_dgx_h100_options(1));
  REQUIRE(p.has_value());
  // DP_SHARDING_THRESHOLD 0.008 GB: tables under 0.008 / (128 x 8 B) = 7,812.5 rows are
  // data-parallel: the 13 smallest (7,424 rows down to 3).
  int dp = 0;
  for (std::size_t t = 0; t < w.tables.size(); ++t) {
    const bool small = w.tables[t].rows < 7812;
    CHECK((p->tables[t].type == ShardingType::kDataParallel) == small);
    dp += small ? 1 : 0;
  }
  CHECK(dp == 13);
  // cat_20 (multi-hot 100 of 214) is split over GPUs: no table-wise copy of it.
  CHECK(p->tables[20].type == ShardingType::kRowWise);
  // Two nodes: hier_auto plans per node; a table on one node is split over its 8 GPUs.
  JsonDocument d = load_json_file(src("configs/systems/dgx_h100.json"));
  apply_override(d, "nodes", "2");
  const auto h = hugectr_auto_plan(w, parse_system(d), hugectr_dgx_h100_options(2));
  REQUIRE(h.has_value());
  CHECK(h->source == "hugectr_hier_auto");
  for (const auto& ts : h->tables) {
    if (ts.type == ShardingType::kDataParallel) continue;
    CHECK(ts.shards.size() % 8 == 0);  // whole nodes
    CHECK((ts.type == ShardingType::kTableRowWise || ts.type == ShardingType::kRowWise));
  }
}

TEST_CASE("hugectr planner: the mlperf_hugectr stack predicts with it when no plan is given", "[shard][hugectr][stack]") {
  const SystemSpec s = gpus(8);
  DlrmSpec w = load_workload(src("configs/workloads/dlrm_dcnv2_mlperf.json"));
  const auto r = load_runtime_profile("mlperf_hugectr", src("configs/workloads/dlrm_dcnv2_mlperf.json"), true);
  REQUIRE(r);
  (void)apply_runtime_stack(w, *r);
  CHECK(w.stack.hugectr_planner);
  w.batch_size = 55296;
  JsonDocument sys = load_json_file(src("configs/systems/dgx_h100.json"));
  JsonDocument wl = load_json_file(src("configs/workloads/dlrm_dcnv2_mlperf.json"));
  const auto p = predict_documents(std::move(sys), std::move(wl), std::nullopt,
                                   {"workload.batch_size=55296", "runtime=mlperf_hugectr"}, 3);
  CHECK(p->plan.source.rfind("hugectr_auto (the runtime's planner", 0) == 0);
  // The same plan through predict_parsed gives the same time.
  const auto plan = hugectr_auto_plan(w, s, hugectr_dgx_h100_options(1));
  REQUIRE(plan.has_value());
  CHECK(predict_parsed(s, w, *plan, {})->timeline.iteration_time == Approx(p->timeline.iteration_time).epsilon(1e-9));
}

}  // namespace perfcast_test_model_hugectr_planner_test

// The incremental plan evaluator gives exactly the objective of building, annotating and
// simulating every plan from scratch.
#include <catch2/catch.hpp>

#include <numeric>

#include "model/sim/annotate.hpp"
#include "model/predict/predict.hpp"
#include "model/graph/dlrm_builder.hpp"
#include "model/sharding/plan_shapes.hpp"
#include "model/sharding/shard_search.hpp"
#include "model/sim/simulator.hpp"
#include "topology/collective_calibration.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_plan_evaluator_test {

using namespace perfcast;

namespace {

std::string src(const std::string& rel) { return std::string(PERFCAST_SOURCE_DIR) + "/" + rel; }

/// Keeps every plan the search evaluates, in order (proposes nothing).
class Keep final : public Proposer {
 public:
  std::optional<Candidate> propose() override { return std::nullopt; }
  void feedback(const Candidate& c, const PlanEvaluation&) override { plans.push_back(c.plan); }
  std::vector<ShardingPlan> plans;
};

/// The plans a short search visits (baselines, then local moves).
std::vector<ShardingPlan> visited(const SystemSpec& s, const DlrmSpec& w, std::size_t evaluations) {
  const auto comm = make_collective_model(s);
  PlanEvaluator ev(s, w, *comm);
  FixedPlansProposer fixed(baseline_plans(w, s, 5));
  LocalSearchProposer local(w, s, 5);
  Keep keep;
  SearchOptions opt;
  opt.max_evaluations = evaluations;
  (void)run_search({&fixed, &local, &keep}, ev, opt);
  return keep.plans;
}

/// Two DGX H100 nodes (16 GPUs) on InfiniBand.
SystemSpec two_dgx_h100() {
  JsonDocument doc = load_json_file(src("configs/systems/cluster_4x_dgx_h100.json"));
  apply_override(doc, "nodes", "2");
  return parse_system(doc);
}

/// Every table a full copy on every rank.
ShardingPlan all_data_parallel(const DlrmSpec& w, int world) {
  ShardingPlan plan = default_plan(w, world);
  for (std::size_t t = 0; t < plan.tables.size(); ++t) plan.tables[t] = data_parallel(w.tables[t], world);
  return plan;
}

/// Checks every plan's incremental evaluation against one from scratch; returns the ranks
/// the incremental evaluator simulated, summed over the plans.
std::size_t check_equal(const SystemSpec& s, const DlrmSpec& w, const std::vector<ShardingPlan>& plans) {
  const auto comm = make_collective_model(s);
  PlanEvaluator incremental(s, w, *comm);
  PlanEvaluator scratch(s, w, *comm, 3, /*incremental=*/false);
  Annotator annotator(s, *comm);
  std::size_t i = 0;
  for (const auto& p : plans) {
    INFO("plan " << i);
    const PlanEvaluation a = incremental.evaluate(p);
    const PlanEvaluation b = scratch.evaluate(p);
    CHECK(a.iteration_time == b.iteration_time);
    CHECK(a.rank_embedding_time == b.rank_embedding_time);
    CHECK(a.feasible == b.feasible);
    CHECK(a.reason == b.reason);
    // And the predict pipeline (build_dlrm_graph, Annotator, simulate), every 8th plan.
    if (i++ % 8 == 0) {
      const ExecutionGraph g = build_dlrm_graph(w, p, s.world_size(), s.gpus_per_node);
      CHECK(simulate(annotator.annotate(g), s.host).iteration_time == a.iteration_time);
    }
  }
  // Local moves touch few ranks: far fewer ranks were rebuilt than evaluated.
  CHECK(incremental.ranks_rebuilt() < scratch.ranks_rebuilt());
  CHECK(scratch.ranks_simulated() == plans.size() * static_cast<std::size_t>(s.world_size()));
  return incremental.ranks_simulated();
}

}  // namespace

TEST_CASE("incremental evaluation equals evaluation from scratch: one node", "[shard][evaluator]") {
  const SystemSpec s = load_system(src("configs/systems/dgx_h100.json"));
  const DlrmSpec w = load_workload(src("configs/workloads/dlrm_mlperf.json"));
  const auto plans = visited(s, w, 120);
  REQUIRE(plans.size() >= 120);
  check_equal(s, w, plans);
}

TEST_CASE("incremental evaluation equals evaluation from scratch: two nodes, node-local types", "[shard][evaluator]") {
  JsonDocument doc = load_json_file(src("configs/systems/cluster_4x_dgx_h100.json"));
  apply_override(doc, "nodes", "2");
  const SystemSpec s = parse_system(doc);
  const DlrmSpec w = load_workload(src("configs/workloads/dlrm_mlperf.json"));
  const auto plans = visited(s, w, 80);
  REQUIRE(plans.size() >= 80);
  check_equal(s, w, plans);
}

TEST_CASE("incremental evaluation equals evaluation from scratch: four nodes, mirrored ranks", "[shard][evaluator]") {
  // DLRM-DCNv2 on 32 GPUs: the search's plans keep most tables data-parallel or
  // table_row_wise, so many ranks hold the same shards and one simulated rank stands for
  // them (DlrmGraphBuilder's symmetric graphs); the times must not change.
  JsonDocument doc = load_json_file(src("configs/systems/cluster_4x_dgx_h100.json"));
  const SystemSpec s = parse_system(doc);
  const DlrmSpec w = load_workload(src("configs/workloads/dlrm_dcnv2_mlperf.json"));
  const auto plans = visited(s, w, 60);
  REQUIRE(plans.size() >= 60);
  const std::size_t simulated = check_equal(s, w, plans);
  CHECK(simulated < plans.size() * static_cast<std::size_t>(s.world_size()));
}

TEST_CASE("a plan whose ranks all hold the same shards simulates one rank", "[shard][evaluator]") {
  // Every table data-parallel: 16 equal programs on two nodes; the representative's
  // timeline is every rank's, and the time is that of the full graph.
  const SystemSpec s = two_dgx_h100();
  const DlrmSpec w = load_workload(src("configs/workloads/dlrm_mlperf.json"));
  const ShardingPlan plan = all_data_parallel(w, s.world_size());
  const auto comm = make_collective_model(s);
  PlanEvaluator incremental(s, w, *comm);
  PlanEvaluator scratch(s, w, *comm, 3, /*incremental=*/false);
  const PlanEvaluation a = incremental.evaluate(plan);
  CHECK(incremental.ranks_simulated() == 1);
  CHECK(a.iteration_time == scratch.evaluate(plan).iteration_time);
  CHECK(a.rank_embedding_time == scratch.evaluate(plan).rank_embedding_time);
}

TEST_CASE("node-local tables: whole local-index columns mirror", "[shard][evaluator]") {
  // Two nodes, every table data-parallel but one table_row_wise over node 0 (TorchRec's
  // split: ceil(rows / 8) a shard, the remainder on local index 7). Columns 0-6 are equal on
  // both nodes, column 7 too when the rows divide by 8: one simulated rank per node and
  // distinct column, the times those of the full graph.
  const SystemSpec s = two_dgx_h100();
  const DlrmSpec w = load_workload(src("configs/workloads/dlrm_mlperf.json"));
  ShardingPlan plan = all_data_parallel(w, s.world_size());
  plan.tables[0] = table_row_wise(w.tables[0], {0, 1, 2, 3, 4, 5, 6, 7});
  const auto comm = make_collective_model(s);
  PlanEvaluator incremental(s, w, *comm);
  PlanEvaluator scratch(s, w, *comm, 3, /*incremental=*/false);
  const PlanEvaluation a = incremental.evaluate(plan);
  const PlanEvaluation b = scratch.evaluate(plan);
  CHECK(incremental.ranks_simulated() == (w.tables[0].rows % 8 == 0 ? 2u : 4u));
  CHECK(a.iteration_time == b.iteration_time);
  CHECK(a.rank_embedding_time == b.rank_embedding_time);
  // Then the table moves to node 1: node 0's ranks lose it, node 1's gain it; the
  // incremental rebuild still gives the full graph's time.
  plan.tables[0] = table_row_wise(w.tables[0], {8, 9, 10, 11, 12, 13, 14, 15});
  CHECK(incremental.evaluate(plan).iteration_time == scratch.evaluate(plan).iteration_time);
  // A block on two ranks of a node (a plan file may hold one), moved from node 0 to node 1:
  // the ranks of local indices 2-7 keep their shards, yet their cross-node all-to-all
  // carries the block's output, so it must be re-estimated (DlrmGraphBuilder rebuilds the
  // ranks of both nodes when a node's block output changes).
  plan.tables[0] = table_row_wise(w.tables[0], {0, 1});
  CHECK(incremental.evaluate(plan).iteration_time == scratch.evaluate(plan).iteration_time);
  plan.tables[0] = table_row_wise(w.tables[0], {8, 9});
  CHECK(incremental.evaluate(plan).iteration_time == scratch.evaluate(plan).iteration_time);
}

TEST_CASE("with a system's kernel calibration the evaluator gives predict's iteration time", "[shard]") {
  // hgx_a100_40gb picks up configs/calibration/nvidia_a100_pg509_200.json (fitted on the HTA trace).
  const SystemSpec s = load_system(src("configs/systems/hgx_a100_40gb.json"));
  const DlrmSpec w = load_workload(src("configs/workloads/dlrm_default.json"));
  std::string path;
  const auto cal = load_system_kernel_calibration(s, &path);
  REQUIRE(cal.has_value());
  CHECK(path.find("nvidia_a100_pg509_200.json") != std::string::npos);
  const auto comm = make_collective_model(s);
  PlanEvaluator calibrated(s, w, *comm, 3, true, &*cal);
  PlanEvaluator spec(s, w, *comm);
  const ShardingPlan plan = default_plan(w, s.world_size());
  const auto p = predict_parsed(s, w, plan, {});
  CHECK(p->kernel_calibration == path);
  CHECK(calibrated.evaluate(plan).iteration_time == Approx(p->timeline.iteration_time).epsilon(1e-12));
  // The calibration changes the objective: the spec-derived evaluator differs.
  CHECK(spec.evaluate(plan).iteration_time != calibrated.evaluate(plan).iteration_time);
}

TEST_CASE("mirrored ranks that swap shards refresh the collectives their representatives request",
          "[shard][evaluator]") {
  // Two nodes, the tables of over a million rows row-wise over all 16 ranks (equal shards
  // but on rank 15, which holds the remainders), two tables column-wise over two ranks each:
  // table 2 (pooling 1) on ranks 2 and 12, table 4 (pooling 6) on ranks 3 and 5, and the
  // others data-parallel. Equal shards mirror the lowest rank holding them: 12 mirrors 2
  // and 5 mirrors 3. Then ranks 5 and 12 swap
  // their shards: both stay mirrored (now of 2 and 3), and ranks 2 and 3 keep theirs, so no
  // simulated rank's shards change while the index all-to-all's byte matrix does (table 4's
  // six lookups a sample now go to rank 12, table 2's one to rank 5). DlrmGraphBuilder
  // rebuilds the representative of a mirrored rank whose shards changed, which refreshes
  // the collectives; the evaluation must stay that of the full graph. (On these two equal
  // nodes the swap leaves every rank's all-to-all load, and so the time, as it was.)
  const SystemSpec s = two_dgx_h100();
  const DlrmSpec w = load_workload(src("configs/workloads/dlrm_dcnv2_mlperf.json"));
  REQUIRE(w.tables[2].pooling < w.tables[4].pooling);
  ShardingPlan plan = all_data_parallel(w, s.world_size());
  std::vector<int> all(16);
  std::iota(all.begin(), all.end(), 0);
  for (std::size_t t = 0; t < w.tables.size(); ++t)
    if (w.tables[t].rows > 1000000) plan.tables[t] = row_wise(w.tables[t], all);
  plan.tables[2] = column_wise(w.tables[2], {2, 12});
  plan.tables[4] = column_wise(w.tables[4], {3, 5});
  const auto comm = make_collective_model(s);
  PlanEvaluator incremental(s, w, *comm);
  PlanEvaluator scratch(s, w, *comm, 3, /*incremental=*/false);
  CHECK(incremental.evaluate(plan).iteration_time == scratch.evaluate(plan).iteration_time);
  const std::size_t simulated = incremental.ranks_simulated();
  CHECK(simulated == 4);  // ranks 0, 2, 3 and 15
  plan.tables[2] = column_wise(w.tables[2], {2, 5});
  plan.tables[4] = column_wise(w.tables[4], {3, 12});
  const PlanEvaluation a = incremental.evaluate(plan);
  const PlanEvaluation b = scratch.evaluate(plan);
  CHECK(incremental.ranks_simulated() - simulated == 4);
  CHECK(a.iteration_time == b.iteration_time);
  CHECK(a.rank_embedding_time == b.rank_embedding_time);
}

}  // namespace perfcast_test_model_plan_evaluator_test

// table_row_wise, table_column_wise and grid: parsing with validity checks, writing,
// the builder's collectives with hand-worked byte counts, memory worked by hand, and
// the search proposing them on several nodes.
#include <set>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "model/graph/dlrm_builder.hpp"
#include "model/graph/memory_estimate.hpp"
#include "model/sharding/plan_shapes.hpp"
#include "model/sharding/shard_search.hpp"
#include "topology/collective_calibration.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_sharding_types_test {

using namespace perfcast;

namespace {

std::string src(const std::string& rel) { return std::string(PERFCAST_SOURCE_DIR) + "/" + rel; }

/// `tables` tables of 1000 rows x 16 columns, pooling 10, global batch 1024, SGD, 8-byte indices.
DlrmSpec small_dlrm(int tables) {
  DlrmSpec w = load_workload(src("configs/workloads/dlrm_default.json"));
  w.bottom_mlp = {16, 32, 16};
  w.top_mlp = {64, 1};
  w.batch_size = 1024;
  w.index_bytes = 8;
  w.embedding_optimizer = EmbeddingOptimizer::kSgd;
  w.tables.clear();
  for (int t = 0; t < tables; ++t) w.tables.push_back({"t" + std::to_string(t), 1000, 16, 10, IndexDistribution::uniform()});
  return w;
}

ShardingPlan parse(const nlohmann::json& tables, const DlrmSpec& w, int world, int gpus_per_node) {
  const nlohmann::json j = {{"schema", "perfcast.plan"}, {"schema_version", "1.0"}, {"tables", tables}};
  return parse_plan(JsonDocument{j, "plan.json"}, w, world, gpus_per_node);
}

nlohmann::json tw(int rank) { return {{"sharding_type", "table_wise"}, {"ranks", {rank}}}; }

int find(const RankProgram& p, const std::string& name) {
  for (std::size_t i = 0; i < p.ops.size(); ++i)
    if (p.ops[i].name == name) return static_cast<int>(i);
  return -1;
}

const GraphCollective& collective_of(const ExecutionGraph& g, int rank, const std::string& op) {
  const auto& p = g.ranks[static_cast<std::size_t>(rank)];
  const int i = find(p, op);
  REQUIRE(i >= 0);
  return g.collectives[static_cast<std::size_t>(*p.ops[static_cast<std::size_t>(i)].collective)];
}

std::vector<int> group_of(const ExecutionGraph& g, const GraphCollective& c) {
  return g.groups[static_cast<std::size_t>(c.group)].ranks;
}

/// The 4-rank plan of the tests below: 2 nodes of 2 GPUs.
ShardingPlan four_rank_plan(const DlrmSpec& w) {
  ShardingPlan p;
  p.tables = {table_row_wise(w.tables[0], {2, 3}), table_wise(w.tables[1], 0)};
  return p;
}

}  // namespace

TEST_CASE("table_row_wise, table_column_wise and grid are parsed and written back", "[shard][plan]") {
  const DlrmSpec w = small_dlrm(4);
  nlohmann::json grid_spec = nlohmann::json::array();
  grid_spec.push_back({{"shard_offsets", {0, 0}}, {"shard_sizes", {400, 8}}, {"placement", "rank:0/cuda:0"}});
  grid_spec.push_back({{"shard_offsets", {400, 0}}, {"shard_sizes", {600, 8}}, {"placement", "rank:1/cuda:1"}});
  grid_spec.push_back({{"shard_offsets", {0, 8}}, {"shard_sizes", {500, 8}}, {"placement", "rank:2/cuda:0"}});
  grid_spec.push_back({{"shard_offsets", {500, 8}}, {"shard_sizes", {500, 8}}, {"placement", "rank:3/cuda:1"}});
  const nlohmann::json tables = {
      {"t0", {{"sharding_type", "table_row_wise"}, {"ranks", {2, 3}}}},
      {"t1", {{"sharding_type", "table_column_wise"}, {"ranks", {0, 1}}}},
      {"t2", {{"sharding_type", "grid"}, {"ranks", {0, 1, 2, 3}}, {"sharding_spec", grid_spec}}},
      {"t3", tw(1)}};
  const ShardingPlan p = parse(tables, w, 4, 2);
  REQUIRE(p.tables.size() == 4);
  CHECK(p.tables[0].type == ShardingType::kTableRowWise);
  REQUIRE(p.tables[0].shards.size() == 2);
  CHECK(p.tables[0].shards[1].row_offset == 500);
  CHECK(p.tables[0].shards[1].rank == 3);
  CHECK(p.tables[1].type == ShardingType::kTableColumnWise);
  CHECK(p.tables[1].shards[1].col_offset == 8);
  CHECK(p.tables[1].shards[1].rows == 1000);
  CHECK(p.tables[2].type == ShardingType::kGrid);
  CHECK(p.tables[2].shards[1].rows == 600);
  // Written with TorchRec's field names, read back identical.
  const std::string text = plan_to_json(p, w, 4, 2);
  const auto j = nlohmann::json::parse(text);
  CHECK(j["tables"]["t0"]["sharding_type"] == "table_row_wise");
  CHECK(j["tables"]["t1"]["sharding_type"] == "table_column_wise");
  CHECK(j["tables"]["t2"]["sharding_type"] == "grid");
  CHECK(j["tables"]["t2"]["sharding_spec"][3]["placement"] == "rank:3/cuda:1");
  CHECK(j["tables"]["t2"]["sharding_spec"][3]["shard_offsets"] == nlohmann::json::array({500, 8}));
  const ShardingPlan back = parse_plan(JsonDocument{j, "round-trip"}, w, 4, 2);
  CHECK(plan_hash(back) == plan_hash(p));
  // The shape helpers build the same shardings.
  CHECK(plan_hash(ShardingPlan{"", {table_row_wise(w.tables[0], {2, 3})}, {}}) == plan_hash(ShardingPlan{"", {p.tables[0]}, {}}));
  CHECK(plan_hash(ShardingPlan{"", {table_column_wise(w.tables[1], {0, 1})}, {}}) == plan_hash(ShardingPlan{"", {p.tables[1]}, {}}));
  const TableSharding g = grid(w.tables[2], {{0, 1}, {2, 3}});
  REQUIRE(g.shards.size() == 4);
  CHECK(g.shards[2].col_offset == 8);
  CHECK(g.shards[2].rows == 500);
  CHECK(g.shards[2].rank == 2);
}

TEST_CASE("invalid node-local plans name the JSON path and the rule", "[shard][plan]") {
  const DlrmSpec w = small_dlrm(2);
  auto fails = [&](const nlohmann::json& t0, const std::string& path, const std::string& words) {
    INFO(t0.dump());
    CHECK_THROWS_WITH(parse({{"t0", t0}, {"t1", tw(0)}}, w, 4, 2), Catch::Contains(path) && Catch::Contains(words));
  };
  // Ranks 1 and 2 are on different nodes of 2 GPUs.
  fails({{"sharding_type", "table_row_wise"}, {"ranks", {1, 2}}}, "/tables/t0/ranks", "one node");
  fails({{"sharding_type", "table_column_wise"}, {"ranks", {1, 2}}}, "/tables/t0/ranks", "one node");
  fails({{"sharding_type", "grid"}, {"ranks", {0, 1}}}, "/tables/t0/sharding_spec", "needs a sharding_spec");
  nlohmann::json overlap = nlohmann::json::array();
  overlap.push_back({{"shard_offsets", {0, 0}}, {"shard_sizes", {600, 16}}, {"placement", "rank:0/cuda:0"}});
  overlap.push_back({{"shard_offsets", {500, 0}}, {"shard_sizes", {500, 16}}, {"placement", "rank:1/cuda:1"}});
  fails({{"sharding_type", "row_wise"}, {"ranks", {0, 1}}, {"sharding_spec", overlap}}, "/tables/t0/sharding_spec",
        "covered twice");
  nlohmann::json stranger = nlohmann::json::array();
  stranger.push_back({{"shard_offsets", {0, 0}}, {"shard_sizes", {1000, 16}}, {"placement", "rank:3/cuda:1"}});
  fails({{"sharding_type", "table_wise"}, {"ranks", {0}}, {"sharding_spec", stranger}}, "/tables/t0/sharding_spec/0/placement",
        "not among");
  // A grid block whose row shards span two nodes.
  nlohmann::json spread = nlohmann::json::array();
  spread.push_back({{"shard_offsets", {0, 0}}, {"shard_sizes", {500, 16}}, {"placement", "rank:1/cuda:1"}});
  spread.push_back({{"shard_offsets", {500, 0}}, {"shard_sizes", {500, 16}}, {"placement", "rank:2/cuda:0"}});
  fails({{"sharding_type", "grid"}, {"ranks", {1, 2}}, {"sharding_spec", spread}}, "/tables/t0/sharding_spec", "one node");
  // Column shards of different widths at one offset do not form blocks.
  nlohmann::json ragged = nlohmann::json::array();
  ragged.push_back({{"shard_offsets", {0, 0}}, {"shard_sizes", {500, 8}}, {"placement", "rank:0/cuda:0"}});
  ragged.push_back({{"shard_offsets", {500, 0}}, {"shard_sizes", {500, 16}}, {"placement", "rank:1/cuda:1"}});
  fails({{"sharding_type", "grid"}, {"ranks", {0, 1}}, {"sharding_spec", ragged}}, "/tables/t0/sharding_spec", "differ in width");
}

TEST_CASE("table_row_wise: intra-node reduce-scatter and cross-node all-to-all, bytes by hand", "[shard][builder]") {
  // 2 nodes x 2 GPUs, global batch 1024 (256 per rank); t0 (1000 x 16, pooling 10) row-wise
  // over node 1 (ranks 2, 3: 500 rows each), t1 table-wise on rank 0.
  const DlrmSpec w = small_dlrm(2);
  const ExecutionGraph g = build_dlrm_graph(w, four_rank_plan(w), 4, 2);
  // Node 1 reduces the partial sums of the global batch: 1024 x 16 x 4 B (nccl-tests bytes).
  const auto& rs = collective_of(g, 2, "output_dist.table_row_wise");
  CHECK(rs.desc.kind == CollectiveKind::kReduceScatter);
  CHECK(rs.desc.bytes == Approx(1024.0 * 16 * 4));
  CHECK(group_of(g, rs) == std::vector<int>{2, 3});
  CHECK(&collective_of(g, 3, "output_dist.table_row_wise") == &rs);
  // Node 0 holds no table_row_wise shard: no reduce-scatter there.
  CHECK(find(g.ranks[0], "output_dist.table_row_wise") < 0);
  // Across nodes, between ranks of the same local index: node 1's member sends node 0's
  // member that rank's 256 samples x 16 x 4 B; node 0 sends nothing.
  const auto& a2a = collective_of(g, 0, "output_dist.table_row_wise.cross_node");
  CHECK(group_of(g, a2a) == std::vector<int>{0, 2});
  CHECK(a2a.desc.kind == CollectiveKind::kAllToAllV);
  CHECK(a2a.desc.pair_bytes == std::vector<double>{0, 0, 256.0 * 16 * 4, 0});
  CHECK(group_of(g, collective_of(g, 3, "output_dist.table_row_wise.cross_node")) == std::vector<int>{1, 3});
  // Backward: gradients go back (transposed), then node 1 all-gathers them.
  const auto& a2a_b = collective_of(g, 2, "output_dist.table_row_wise.cross_node.backward");
  CHECK(a2a_b.desc.pair_bytes == std::vector<double>{0, 256.0 * 16 * 4, 0, 0});
  const auto& ag = collective_of(g, 3, "output_dist.table_row_wise.backward");
  CHECK(ag.desc.kind == CollectiveKind::kAllGather);
  CHECK(ag.desc.bytes == Approx(1024.0 * 16 * 4));
  // Input all-to-all: rank 0 sends rank 2 the indices of its 256 samples in rank 2's 500
  // of 1000 rows (10 x 0.5 per sample, 8 B) and rank 0 its 256 x 10 x 8 B for t1.
  const auto& in = collective_of(g, 0, "input_dist.indices");
  CHECK(in.desc.pair_bytes[0 * 4 + 2] == Approx(256.0 * 10 * 0.5 * 8));
  CHECK(in.desc.pair_bytes[1 * 4 + 0] == Approx(256.0 * 10 * 8));
  // The global pooled all-to-all carries only the table-wise table: 256 x 16 x 4 B.
  const auto& out = collective_of(g, 1, "output_dist");
  CHECK(out.desc.pair_bytes[0 * 4 + 3] == Approx(256.0 * 16 * 4));
  CHECK(out.desc.pair_bytes[2 * 4 + 3] == 0);
  // Rank 2 looks up its 500 rows for the global batch with half the pooling.
  const auto& p2 = g.ranks[2];
  const auto& lookup = std::get<EmbeddingDesc>(p2.ops[static_cast<std::size_t>(find(p2, "embedding_lookup"))].kernels[0]);
  REQUIRE(lookup.tables.size() == 1);
  CHECK(lookup.tables[0].rows == 500);
  CHECK(lookup.tables[0].pooling == Approx(5));
  CHECK(lookup.batch == 1024);
}

TEST_CASE("grid: one reduce-scatter per node over its blocks' columns", "[shard][builder]") {
  const DlrmSpec w = small_dlrm(2);
  ShardingPlan p;
  p.tables = {grid(w.tables[0], {{0, 1}, {2, 3}}), table_column_wise(w.tables[1], {2, 3})};
  const ExecutionGraph g = build_dlrm_graph(w, p, 4, 2);
  // Each node holds one 8-column block of t0: 1024 x 8 x 4 B.
  CHECK(collective_of(g, 0, "output_dist.table_row_wise").desc.bytes == Approx(1024.0 * 8 * 4));
  CHECK(collective_of(g, 3, "output_dist.table_row_wise").desc.bytes == Approx(1024.0 * 8 * 4));
  CHECK(collective_of(g, 1, "output_dist.table_row_wise.cross_node").desc.pair_bytes ==
        std::vector<double>{0, 256.0 * 8 * 4, 256.0 * 8 * 4, 0});
  // t1's two 8-column shards on ranks 2 and 3 go through the global pooled all-to-all.
  const auto& out = collective_of(g, 0, "output_dist");
  CHECK(out.desc.pair_bytes[2 * 4 + 0] == Approx(256.0 * 8 * 4));
  CHECK(out.desc.pair_bytes[3 * 4 + 1] == Approx(256.0 * 8 * 4));
  CHECK(out.desc.pair_bytes[0 * 4 + 1] == 0);
}

TEST_CASE("memory of a table_row_wise shard worked by hand", "[shard][memory]") {
  SystemSpec s = load_system(src("configs/systems/dgx_h100.json"));
  s.gpus_per_node = 2;
  s.nodes = 2;
  const DlrmSpec w = small_dlrm(2);
  const auto m = estimate_memory(w, four_rank_plan(w), s);
  // Rank 2: 500 x 16 fp32, SGD (no state).
  CHECK(m[2].embedding == Approx(500.0 * 16 * 4));
  // Its inputs: the global batch's indices in its half of the rows, 1024 x (10 x 0.5 + 1) x 8 B;
  // its partial sums 1024 x 16 x 4 B; the local batch's pooled rows of both tables and
  // their gradients, 2 x 256 x 32 x 4 B.
  CHECK(m[2].io == Approx(1024.0 * 6 * 8 + 1024.0 * 16 * 4 + 2 * 256.0 * 32 * 4));
  CHECK(m[1].embedding == 0);
}

TEST_CASE("on one node the node-local types equal their global counterparts", "[shard][evaluator]") {
  const SystemSpec s = load_system(src("configs/systems/dgx_h100.json"));
  const DlrmSpec w = load_workload(src("configs/workloads/dlrm_default.json"));
  const auto comm = make_collective_model(s);
  PlanEvaluator ev(s, w, *comm);
  const std::vector<int> all{0, 1, 2, 3, 4, 5, 6, 7};
  ShardingPlan rw = default_plan(w, 8), twrw = rw, cw = rw, twcw = rw;
  rw.tables[0] = row_wise(w.tables[0], all);
  twrw.tables[0] = table_row_wise(w.tables[0], all);
  cw.tables[1] = column_wise(w.tables[1], {1, 2});
  twcw.tables[1] = table_column_wise(w.tables[1], {1, 2});
  CHECK(ev.evaluate(twrw).iteration_time == Approx(ev.evaluate(rw).iteration_time).epsilon(1e-12));
  CHECK(ev.evaluate(twcw).iteration_time == Approx(ev.evaluate(cw).iteration_time).epsilon(1e-12));
}

namespace {
/// Records the origin of every evaluated candidate; proposes nothing.
class Recorder final : public Proposer {
 public:
  std::optional<Candidate> propose() override { return std::nullopt; }
  void feedback(const Candidate& c, const PlanEvaluation&) override { origins.insert(c.origin); }
  std::set<std::string> origins;
};
}  // namespace

TEST_CASE("search on two nodes proposes node-local types and writes a valid plan", "[shard][search]") {
  JsonDocument doc = load_json_file(src("configs/systems/cluster_4x_dgx_h100.json"));
  apply_override(doc, "nodes", "2");
  const SystemSpec s = parse_system(doc);
  const DlrmSpec w = load_workload(src("configs/workloads/dlrm_mlperf.json"));
  const auto comm = make_collective_model(s);
  PlanEvaluator ev(s, w, *comm);
  const auto baselines = baseline_plans(w, s, 3);
  FixedPlansProposer fixed(baselines);
  LocalSearchProposer local(w, s, 3);
  Recorder rec;
  SearchOptions opt;
  opt.max_evaluations = 200;
  const SearchResult r = run_search({&fixed, &local, &rec}, ev, opt);
  REQUIRE(r.best);
  CHECK(r.best_eval.feasible);
  auto proposed = [&](const std::string& move) {
    for (const auto& o : rec.origins)
      if (o.find(move) != std::string::npos) return true;
    return false;
  };
  CHECK(proposed("table_row_wise"));
  CHECK(proposed("table_column_wise"));
  CHECK(proposed("grid"));
  const std::string text = plan_to_json(r.best->plan, w, s.world_size(), s.gpus_per_node);
  const ShardingPlan back = parse_plan(JsonDocument{nlohmann::json::parse(text), "best.json"}, w, s.world_size(), s.gpus_per_node);
  CHECK(plan_hash(back) == plan_hash(r.best->plan));
  PlanEvaluator again(s, w, *comm);
  for (const auto& b : baselines) {
    INFO(b.name);
    CHECK_FALSE(better(again.evaluate(b.plan), r.best_eval));
  }
}

}  // namespace perfcast_test_model_sharding_types_test

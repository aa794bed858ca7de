// Sequence (EmbeddingCollection) tables: the unpooled lookup's output, the all-to-all of
// every looked-up row (row-wise too, with no reduce-scatter), the sum before the
// interaction and its backward, memory, and the shardings TorchRec refuses; values by hand.
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "model/graph/dlrm_builder.hpp"
#include "tests/model/dlrm_test_support.hpp"
#include "model/graph/memory_estimate.hpp"
#include "model/sharding/plan_shapes.hpp"
#include "predictors/spec_predictors.hpp"
#include "topology/system_spec.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_sequence_embedding_test {

using namespace perfcast;
using perfcast::test::has_op;
using perfcast::test::op_named;
using perfcast::test::src;

namespace {

/// dlrm_default (8 tables of D 64, pooling 100, global batch 2048) with table 0 a sequence table.
DlrmSpec with_sequence_table() {
  DlrmSpec w = load_workload(src("configs/workloads/dlrm_default.json"));
  REQUIRE(w.tables.size() == 8);
  REQUIRE(w.tables[0].dim == 64);
  REQUIRE(w.tables[0].pooling == 100);
  REQUIRE(w.batch_size == 2048);
  w.tables[0].sequence = true;
  return w;
}

const CollectiveDesc& collective(const ExecutionGraph& g, const Op& op) {
  REQUIRE(op.collective.has_value());
  return g.collectives[static_cast<std::size_t>(*op.collective)].desc;
}

}  // namespace

TEST_CASE("sequence table, table-wise: every looked-up row crosses the all-to-all", "[dlrm][sequence]") {
  const DlrmSpec w = with_sequence_table();
  const ExecutionGraph g = build_dlrm_graph(w, default_plan(w, 2), 2);
  // Rank 0 holds tables 0, 2, 4, 6 (round-robin). To rank 1 it sends rank 1's 1024 samples:
  // pooled tables 2, 4, 6 one row each, sequence table 0 its 100 rows per sample; 64 fp32.
  const auto& out = collective(g, op_named(g, 0, "output_dist"));
  CHECK(out.pair_bytes[1] == Approx(1024.0 * (3 + 100) * 64 * 4));
  // Rank 1's tables are all pooled: 4 rows per sample.
  CHECK(out.pair_bytes[2] == Approx(1024.0 * 4 * 64 * 4));
  // The backward sends the same bytes the other way.
  const auto& back = collective(g, op_named(g, 1, "output_dist.backward"));
  CHECK(back.pair_bytes[1 * 2 + 0] == Approx(out.pair_bytes[0 * 2 + 1]));
  // The lookup kernel knows which table is unpooled.
  const auto& lookup = std::get<EmbeddingDesc>(op_named(g, 0, "embedding_lookup").kernels[0]);
  REQUIRE(lookup.tables.size() == 4);
  CHECK(lookup.tables[0].sequence);
  CHECK_FALSE(lookup.tables[1].sequence);
  // Before the interaction each sample's 100 rows are summed: 1024 x 64 outputs, each
  // reading 100 fp32 values and writing one (404 B).
  const auto& sum = std::get<ElementwiseDesc>(op_named(g, 1, "interaction").kernels[0]);
  CHECK(sum.op == "sequence_sum");
  CHECK(sum.elements == 1024 * 64);
  CHECK(sum.bytes_per_element == Approx(404.0));
  CHECK(sum.flops_per_element == Approx(100.0));
  // Its backward writes the 1024 x 100 x 64 gradient rows, reading one row per sample.
  const auto& bwd = std::get<ElementwiseDesc>(op_named(g, 1, "interaction.backward").kernels.back());
  CHECK(bwd.op == "sequence_sum_backward");
  CHECK(bwd.elements == 1024 * 100 * 64);
  CHECK(bwd.bytes_per_element == Approx(4.0 * 6464 / 6400));
}

TEST_CASE("sequence table, row-wise: rows go back by all-to-all, nothing is reduce-scattered", "[dlrm][sequence]") {
  DlrmSpec w = with_sequence_table();
  ShardingPlan plan = default_plan(w, 2);
  plan.tables[0] = row_wise(w.tables[0], {0, 1});
  const ExecutionGraph g = build_dlrm_graph(w, plan, 2);
  CHECK_FALSE(has_op(g, 0, "output_dist.row_wise"));
  // Each rank's half of the rows sees half of the 100 indices per sample: to rank 1, rank 0
  // sends 1024 samples x 50 rows x 64 fp32 of table 0 plus its pooled tables 2, 4, 6.
  const auto& out = collective(g, op_named(g, 0, "output_dist"));
  CHECK(out.pair_bytes[1] == Approx(1024.0 * (3 + 50) * 64 * 4));
  // The same table pooled: reduce-scattered, not in the all-to-all.
  w.tables[0].sequence = false;
  const ExecutionGraph pooled = build_dlrm_graph(w, plan, 2);
  CHECK(has_op(pooled, 0, "output_dist.row_wise"));
  CHECK(collective(pooled, op_named(pooled, 0, "output_dist")).pair_bytes[1] == Approx(1024.0 * 3 * 64 * 4));
}

TEST_CASE("sequence lookup: the unpooled output is written to HBM, one row per index", "[dlrm][sequence]") {
  const GpuSpec gpu = load_system(src("configs/systems/h100_sxm.json")).gpu;
  EmbeddingDesc d;
  d.batch = 4096;
  d.tables.push_back(EmbeddingTableDesc{1000000, 128, 20.0, IndexDistribution::uniform()});
  for (const EmbeddingPass pass : {EmbeddingPass::kForward, EmbeddingPass::kBackward}) {
    d.pass = pass;
    d.tables[0].sequence = false;
    const EmbeddingWork pooled = embedding_work(d, gpu);
    d.tables[0].sequence = true;
    const EmbeddingWork sequence = embedding_work(d, gpu);
    // 4096 bags x (20 - 1) more rows x 128 fp32 (output forward, gradient backward).
    CHECK(sequence.dram_bytes - pooled.dram_bytes == Approx(4096.0 * 19 * 128 * 4));
    const Seconds sequence_time = predict_embedding(d, gpu).time;
    d.tables[0].sequence = false;
    CHECK(sequence_time > predict_embedding(d, gpu).time);
  }
}

TEST_CASE("sequence table memory: its rows in the outputs and the received buffers, by hand", "[dlrm][sequence]") {
  const SystemSpec s = load_system(src("configs/systems/dgx_h100.json"));
  DlrmSpec w = with_sequence_table();
  const ShardingPlan plan = default_plan(w, 8);
  const auto seq = estimate_memory(w, plan, s);
  w.tables[0].sequence = false;
  const auto pooled = estimate_memory(w, plan, s);
  // Rank 0 holds table 0: its output grows by the global batch x 99 rows x 64 x 4 B; every
  // rank receives (and holds the gradient of) its 256 samples x 99 more rows.
  const double rows = 99.0 * 64 * 4;
  CHECK(seq[0].io - pooled[0].io == Approx(2048 * rows + 2 * 256 * rows));
  CHECK(seq[1].io - pooled[1].io == Approx(2 * 256 * rows));
}

TEST_CASE("sequence tables: the shardings TorchRec has no sequence version of are refused", "[dlrm][sequence]") {
  DlrmSpec w = with_sequence_table();
  auto plan_with = [&](const nlohmann::json& t0) {
    nlohmann::json tables;
    for (std::size_t t = 0; t < w.tables.size(); ++t)
      tables[w.tables[t].name] = {{"sharding_type", "table_wise"}, {"ranks", {static_cast<int>(t % 4)}}};
    tables[w.tables[0].name] = t0;
    const nlohmann::json j = {{"schema", "perfcast.plan"}, {"schema_version", "1.0"}, {"tables", tables}};
    return parse_plan(JsonDocument{j, "plan.json"}, w, 4, 2);
  };
  CHECK_NOTHROW(plan_with({{"sharding_type", "row_wise"}, {"ranks", {0, 1, 2, 3}}}));
  CHECK_NOTHROW(plan_with({{"sharding_type", "column_wise"}, {"ranks", {0, 1}}}));
  for (const char* type : {"table_row_wise", "table_column_wise"}) {
    try {
      (void)plan_with({{"sharding_type", type}, {"ranks", {0, 1}}});
      FAIL(type << " accepted for a sequence table");
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      CHECK(what.find("/tables/" + w.tables[0].name + "/sharding_type") != std::string::npos);
      CHECK(what.find("sequence (EmbeddingCollection)") != std::string::npos);
    }
  }
  // The same plan for the pooled table parses.
  w.tables[0].sequence = false;
  CHECK_NOTHROW(plan_with({{"sharding_type", "table_row_wise"}, {"ranks", {0, 1}}}));
}

TEST_CASE("workload key \"sequence\": read, default false, a boolean", "[dlrm][sequence]") {
  nlohmann::json doc = nlohmann::json::parse(std::ifstream(src("configs/workloads/dlrm_default.json")));
  doc["embedding"]["tables"][0]["sequence"] = true;
  const DlrmSpec w = parse_workload(JsonDocument{doc, "w.json"});
  CHECK(w.tables[0].sequence);
  CHECK(w.tables[7].sequence);  // "repeat" copies the table, key included
  CHECK_FALSE(load_workload(src("configs/workloads/dlrm_default.json")).tables[0].sequence);
  doc["embedding"]["tables"][0]["sequence"] = "yes";
  CHECK_THROWS_AS(parse_workload(JsonDocument{doc, "w.json"}), ConfigError);
}

}  // namespace perfcast_test_model_sequence_embedding_test

// Uneven pipeline stages (parallelism.first_stage_layers / last_stage_layers, Megatron-Core's
// --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers): the layers each
// stage holds by hand, what the graph and the memory model give each stage, the refusals, and
// `plan`, whose space splits evenly.
#include <algorithm>
#include <set>

#include <catch2/catch.hpp>

#include "core/json_reader.hpp"
#include "model/graph/memory_estimate.hpp"
#include "model/graph/transformer_builder.hpp"
#include "model/plan_search/plan_search.hpp"
#include "model/predict/predict.hpp"
#include "tests/model/transformer_test_support.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_transformer_uneven_stages_test {

using namespace perfcast;

namespace {

/// hidden 64, 4 heads, 24 layers, sequence 32, pp 4 on 4 GPUs (dp 1), global batch 8.
TransformerSpec four_stages(std::int64_t first, std::int64_t last) {
  TransformerSpec w = test::gpt(64, 4, 24, 32);
  w.pp = 4;
  w.dp = 1;
  w.dropout = 0;
  w.first_stage_layers = first;
  w.last_stage_layers = last;
  return w;
}

/// Distinct layer indices of rank `rank`'s forward ops ("mb0.layer<L>." ...).
std::set<int> forward_layers(const ExecutionGraph& g, int rank) {
  std::set<int> out;
  for (const auto& op : g.ranks[static_cast<std::size_t>(rank)].ops) {
    if (op.name.rfind("mb0.layer", 0) != 0 || op.name.find("backward") != std::string::npos) continue;
    out.insert(std::stoi(op.name.substr(9)));
  }
  return out;
}

/// "JSON path: message" of parsing the workload and resolving its parallelism on `world` GPUs.
std::string resolve_error(const std::string& workload_json, int world) {
  try {
    TransformerSpec w = parse_transformer(JsonDocument{nlohmann::json::parse(workload_json), "w.json"});
    resolve_parallelism(w, world);
  } catch (const ConfigError& e) {
    return e.pointer() + ": " + e.message();
  }
  return "no error";
}

}  // namespace

TEST_CASE("uneven stages: the layers of each stage by hand", "[transformer][pipeline]") {
  // 24 layers, first 4, last 8: the middle two stages share 12, 6 each.
  const TransformerSpec w = four_stages(4, 8);
  CHECK(w.stage_layer_count(0) == 4);
  CHECK(w.stage_layer_count(1) == 6);
  CHECK(w.stage_layer_count(2) == 6);
  CHECK(w.stage_layer_count(3) == 8);
  CHECK(w.stage_first_layer(3) == 16);
  CHECK(transformer_stage_layers(w, 2) == std::vector<std::int64_t>{10, 11, 12, 13, 14, 15});
  // Only the first stated: the other three share 21, 7 each.
  const TransformerSpec first_only = four_stages(3, 0);
  CHECK(first_only.stage_layer_count(0) == 3);
  CHECK(first_only.stage_layer_count(3) == 7);
  CHECK(first_only.stage_first_layer(3) == 17);
  // Even: 6 each.
  CHECK(four_stages(0, 0).stage_layer_count(3) == 6);
}

TEST_CASE("uneven stages: each rank's program runs its stage's layers", "[transformer][pipeline]") {
  TransformerSpec w = four_stages(4, 8);
  resolve_parallelism(w, 4);
  const ExecutionGraph g = build_transformer_graph(w, 4);
  std::set<int> seen;
  std::vector<std::size_t> per_rank;
  for (int r = 0; r < 4; ++r) {
    const auto layers = forward_layers(g, r);
    per_rank.push_back(layers.size());
    seen.insert(layers.begin(), layers.end());
  }
  std::sort(per_rank.begin(), per_rank.end());
  CHECK(per_rank == std::vector<std::size_t>{4, 6, 6, 8});
  CHECK(seen.size() == 24);  // every layer exactly on one stage
}

TEST_CASE("uneven stages: memory and time follow the layers a stage holds", "[transformer][pipeline]") {
  const SystemSpec s = test::system("dgx_h100", "gpus_per_node", 4);
  TransformerSpec uneven = four_stages(4, 8), even = four_stages(0, 0);
  resolve_parallelism(uneven, 4);
  resolve_parallelism(even, 4);
  const auto mu = estimate_transformer_memory(uneven, s), me = estimate_transformer_memory(even, s);
  REQUIRE(mu.size() == 4);
  // Stage 0 holds the same micro-batches in flight with 4 layers instead of 6.
  CHECK(mu[0].activations == Approx(me[0].activations * 4.0 / 6.0));
  CHECK(mu[3].activations > me[3].activations);
  // Moving two layers from the first stage to the last (which also runs the LM head and the
  // loss) makes the last stage's compute longer: the step is not faster.
  const auto pu = predict_transformer(s, uneven, {}, 3), pe = predict_transformer(s, even, {}, 3);
  CHECK(pu->timeline.iteration_time >= pe->timeline.iteration_time);
}

TEST_CASE("uneven stages: refusals name the field", "[transformer][pipeline]") {
  const std::string base = R"({"schema": "perfcast.workload", "schema_version": "1.0", "name": "x", "model": "transformer",
    "hidden": 64, "heads": 4, "layers": 24, "seq_len": 32, "vocab": 100, "micro_batch": 1, "global_batch": 8, "parallelism": )";
  CHECK(resolve_error(base + R"({"pp": 4, "dp": 1, "first_stage_layers": 4, "last_stage_layers": 8}})", 4) == "no error");
  CHECK(resolve_error(base + R"({"pp": 4, "dp": 1, "first_stage_layers": 5}})", 4).rfind("/parallelism/first_stage_layers:", 0) == 0);
  CHECK(resolve_error(base + R"({"pp": 4, "dp": 1, "last_stage_layers": 30}})", 4).rfind("/parallelism/last_stage_layers:", 0) == 0);
  CHECK(resolve_error(base + R"({"pp": 1, "dp": 1, "first_stage_layers": 4}})", 1).rfind("/parallelism/first_stage_layers:", 0) == 0);
  CHECK(resolve_error(base + R"({"pp": 4, "vp": 2, "dp": 1, "first_stage_layers": 4, "last_stage_layers": 8}})", 4)
            .rfind("/parallelism/first_stage_layers:", 0) == 0);
  // pp 2 with both stated: they must add up to the layers.
  CHECK(resolve_error(base + R"({"pp": 2, "dp": 1, "first_stage_layers": 10, "last_stage_layers": 14}})", 2) == "no error");
  CHECK(resolve_error(base + R"({"pp": 2, "dp": 1, "first_stage_layers": 10, "last_stage_layers": 10}})", 2)
            .rfind("/parallelism/first_stage_layers:", 0) == 0);
}

TEST_CASE("uneven stages: plan searches even splits and says so in each choice's overrides", "[transformer][pipeline][plan]") {
  PlanSearchRequest r;
  r.base.system = std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/dgx_h100.json";
  r.base.workload = std::string(PERFCAST_SOURCE_DIR) + "/configs/workloads/gpt2.json";
  // GPT-2: 12 layers; the file's pp 4 with a first stage of 2 and a last of 4 (3 and 3 between).
  r.base.overrides = {"workload.global_batch=16", "workload.parallelism.pp=4", "workload.parallelism.first_stage_layers=2",
                      "workload.parallelism.last_stage_layers=4"};
  r.gpus = 4;
  r.space.micro_batches = {1};
  r.threads = 1;
  const PlanSearchResult res = search_parallel_plans(r);
  REQUIRE_FALSE(res.ranked.empty());
  for (const auto& p : res.ranked) {
    const auto o = p.choice.overrides();
    CHECK(std::find(o.begin(), o.end(), "workload.parallelism.first_stage_layers=0") != o.end());
    CHECK(std::find(o.begin(), o.end(), "workload.parallelism.last_stage_layers=0") != o.end());
  }
  CHECK(res.asked_unresolved.empty());
  CHECK(res.asked.even_split_of_uneven);
  CHECK_THAT(res.asked.label(), Catch::Contains("layers split evenly"));
}

}  // namespace perfcast_test_model_transformer_uneven_stages_test

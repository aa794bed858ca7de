// Uneven pipeline stages (parallelism.first_stage_layers / last_stage_layers, Megatron-Core's
// --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers): the layers each
// stage (and, with virtual stages, each model chunk) holds by hand, what the graph and the
// memory model give each stage, the refusals, and `plan`, whose space splits evenly.
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

/// Distinct layer indices of rank `rank`'s forward ops of micro-batch 0 ("mb0.layer<L>." under
/// 1F1B, "mb0.c<chunk>.layer<L>." interleaved).
std::set<int> forward_layers(const ExecutionGraph& g, int rank) {
  std::set<int> out;
  for (const auto& op : g.ranks[static_cast<std::size_t>(rank)].ops) {
    if (op.name.rfind("mb0.", 0) != 0 || op.name.find("backward") != std::string::npos) continue;
    const auto at = op.name.find("layer");
    if (at == std::string::npos || at > 8) continue;
    out.insert(std::stoi(op.name.substr(at + 5)));
  }
  return out;
}

/// How many layers each rank's program runs (sorted), and how many distinct layers all run.
struct StageLayers {
  std::vector<std::size_t> per_rank;
  std::size_t distinct = 0;
};
StageLayers stage_layers(const ExecutionGraph& g, int ranks) {
  StageLayers out;
  std::set<int> seen;
  for (int r = 0; r < ranks; ++r) {
    const auto layers = forward_layers(g, r);
    out.per_rank.push_back(layers.size());
    seen.insert(layers.begin(), layers.end());
  }
  std::sort(out.per_rank.begin(), out.per_rank.end());
  out.distinct = seen.size();
  return out;
}

/// Expected {stage, chunk, layers, first layer} of model chunks, against the spec's.
struct ChunkLayers {
  int stage, chunk;
  std::int64_t count, first;
};
void check_chunks(const TransformerSpec& w, const std::vector<ChunkLayers>& expected) {
  for (const auto& e : expected) {
    INFO("stage " << e.stage << " chunk " << e.chunk);
    CHECK(w.chunk_layer_count(e.stage, e.chunk) == e.count);
    CHECK(w.chunk_first_layer(e.stage, e.chunk) == e.first);
  }
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

TEST_CASE("uneven stages with virtual stages: each model chunk's layers by hand", "[transformer][pipeline]") {
  // 24 layers, first 4, last 8, vp 2: chunks of 2, 3, 3 and 4 layers. Megatron-Core's offset
  // of chunk v of stage s is v x (24 / 2) plus the chunk layers of the stages before s.
  TransformerSpec w = four_stages(4, 8);
  w.vp = 2;
  // {stage, chunk, layers, first layer}
  check_chunks(w, {{0, 0, 2, 0}, {1, 0, 3, 2}, {1, 1, 3, 14}, {3, 0, 4, 8}, {0, 1, 2, 12}, {2, 1, 3, 17}, {3, 1, 4, 20}});
  CHECK(transformer_stage_layers(w, 2) == std::vector<std::int64_t>{5, 6, 7, 17, 18, 19});
  CHECK(transformer_stage_layers(w, 3) == std::vector<std::int64_t>{8, 9, 10, 11, 20, 21, 22, 23});
  // Even stages: (v x pp + s) x chunk, as before.
  TransformerSpec even = four_stages(0, 0);
  even.vp = 2;
  CHECK(even.chunk_first_layer(1, 1) == (1 * 4 + 1) * 3);
  CHECK(transformer_stage_layers(even, 1) == std::vector<std::int64_t>{3, 4, 5, 15, 16, 17});
}

TEST_CASE("uneven stages with virtual stages: the interleaved programs run each stage's chunks", "[transformer][pipeline]") {
  const SystemSpec s = test::system("dgx_h100", "gpus_per_node", 4);
  TransformerSpec w = four_stages(4, 8);
  w.vp = 2;
  resolve_parallelism(w, 4);
  const ExecutionGraph g = build_transformer_graph(w, 4);
  const StageLayers got = stage_layers(g, 4);
  CHECK(got.per_rank == std::vector<std::size_t>{4, 6, 6, 8});
  CHECK(got.distinct == 24);
  // Activations in flight are one chunk's layers: stage 0's chunks of 2 against 3 when even.
  TransformerSpec even = four_stages(0, 0);
  even.vp = 2;
  resolve_parallelism(even, 4);
  const auto mu = estimate_transformer_memory(w, s), me = estimate_transformer_memory(even, s);
  CHECK(mu[0].activations == Approx(me[0].activations * 2.0 / 3.0));
  // Two layers moved from the first stage to the last (which also runs the LM head) do not
  // make the step faster.
  const auto p = predict_transformer(s, w, {}, 3), pe = predict_transformer(s, even, {}, 3);
  REQUIRE(p);
  CHECK(p->timeline.iteration_time >= pe->timeline.iteration_time);
  // On 8 GPUs (dp 2), mirroring one rank per stage gives the step of simulating every rank.
  const SystemSpec s8 = test::system("dgx_h100", "gpus_per_node", 8);
  TransformerSpec mirrored = four_stages(4, 8);
  mirrored.vp = 2;
  mirrored.dp = 2;
  resolve_parallelism(mirrored, 8);
  TransformerSpec full = mirrored;
  full.symmetric_simulation = false;
  const auto pm = predict_transformer(s8, mirrored, {}, 3), pf = predict_transformer(s8, full, {}, 3);
  CHECK_FALSE(pm->graph.mirror_of.empty());
  CHECK(pf->graph.mirror_of.empty());
  CHECK(pm->timeline.iteration_time == pf->timeline.iteration_time);
}

TEST_CASE("embedding and loss counted as layers: each model chunk's layers by hand", "[transformer][pipeline]") {
  // 22 layers, pp 4, vp 2, the embedding and the loss counted (Megatron-Core's
  // --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split): 24 split
  // over 8 chunks of 3; chunk 0 of stage 0 holds layers 0-1 beside the embedding, the last chunk
  // of stage 3 layers 20-21 beside the loss, every other chunk 3 layers starting one earlier
  // than its place in the even split of 24.
  TransformerSpec w = four_stages(0, 0);
  w.layers = 22;
  w.vp = 2;
  w.account_for_embedding = w.account_for_loss = true;
  CHECK(w.split_layers() == 24);
  check_chunks(w, {{0, 0, 2, 0}, {0, 1, 3, 11}, {1, 0, 3, 2}, {3, 1, 2, 20}});
  CHECK(w.stage_layer_count(0) == 5);
  CHECK(w.stage_layer_count(1) == 6);
  CHECK(w.stage_layer_count(3) == 5);
  CHECK(transformer_stage_layers(w, 0) == std::vector<std::int64_t>{0, 1, 11, 12, 13});
  CHECK(transformer_stage_layers(w, 3) == std::vector<std::int64_t>{8, 9, 10, 20, 21});
  // One chunk per stage: 6 layers + 2 over 4 stages of 2; the first and last hold one each.
  TransformerSpec one = four_stages(0, 0);
  one.layers = 6;
  one.account_for_embedding = one.account_for_loss = true;
  CHECK(transformer_stage_layers(one, 0) == std::vector<std::int64_t>{0});
  CHECK(transformer_stage_layers(one, 1) == std::vector<std::int64_t>{1, 2});
  CHECK(transformer_stage_layers(one, 3) == std::vector<std::int64_t>{5});
  CHECK(one.stage_first_layer(2) == 3);
  // Only the loss counted: 23 + 1 over 8 chunks; only the last chunk is short.
  TransformerSpec loss = four_stages(0, 0);
  loss.layers = 23;
  loss.vp = 2;
  loss.account_for_loss = true;
  check_chunks(loss, {{0, 0, 3, 0}, {1, 0, 3, 3}, {3, 1, 2, 21}});
}

TEST_CASE("embedding and loss counted as layers: the programs, and refusals", "[transformer][pipeline]") {
  TransformerSpec w = four_stages(0, 0);
  w.layers = 22;
  w.vp = 2;
  w.account_for_embedding = w.account_for_loss = true;
  resolve_parallelism(w, 4);
  const ExecutionGraph g = build_transformer_graph(w, 4);
  const StageLayers got = stage_layers(g, 4);
  CHECK(got.per_rank == std::vector<std::size_t>{5, 5, 6, 6});
  CHECK(got.distinct == 22);
  const std::string base = R"({"schema": "perfcast.workload", "schema_version": "1.0", "name": "x", "model": "transformer",
    "hidden": 64, "heads": 4, "layers": 22, "seq_len": 32, "vocab": 100, "micro_batch": 1, "global_batch": 8, "parallelism": )";
  CHECK(resolve_error(base + R"({"pp": 4, "vp": 2, "dp": 1, "account_for_embedding": true, "account_for_loss": true}})", 4) == "no error");
  CHECK_THAT(resolve_error(base + R"({"pp": 4, "vp": 2, "dp": 1, "account_for_embedding": true}})", 4),
             Catch::StartsWith("/parallelism/account_for_embedding:") && Catch::Contains("do not divide over pp 4 x vp 2"));
  CHECK(resolve_error(base + R"({"pp": 4, "dp": 1, "account_for_loss": true, "last_stage_layers": 4}})", 4)
            .rfind("/parallelism/account_for_loss:", 0) == 0);
  CHECK(resolve_error(base + R"({"pp": 1, "dp": 1, "account_for_embedding": true, "account_for_loss": true}})", 1)
            .rfind("/parallelism/account_for_embedding:", 0) == 0);
  // 22 + 2 over 24 stages: the first and the last would hold no transformer layer.
  CHECK_THAT(resolve_error(base + R"({"pp": 24, "dp": 1, "account_for_embedding": true, "account_for_loss": true}})", 24),
             Catch::Contains("stage 0 would hold no transformer layer"));
}

TEST_CASE("uneven stages: each rank's program runs its stage's layers", "[transformer][pipeline]") {
  TransformerSpec w = four_stages(4, 8);
  resolve_parallelism(w, 4);
  const ExecutionGraph g = build_transformer_graph(w, 4);
  const StageLayers got = stage_layers(g, 4);
  CHECK(got.per_rank == std::vector<std::size_t>{4, 6, 6, 8});
  CHECK(got.distinct == 24);  // every layer exactly on one stage
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
  // Virtual stages: every stage's layers divide over its vp model chunks (4, 6, 6, 8 over 2).
  CHECK(resolve_error(base + R"({"pp": 4, "vp": 2, "dp": 1, "first_stage_layers": 4, "last_stage_layers": 8}})", 4) == "no error");
  CHECK(resolve_error(base + R"({"pp": 4, "vp": 4, "dp": 1, "first_stage_layers": 4, "last_stage_layers": 8}})", 4)
            .rfind("/parallelism/vp:", 0) == 0);
  CHECK_THAT(resolve_error(base + R"({"pp": 4, "vp": 4, "dp": 1, "first_stage_layers": 4, "last_stage_layers": 8}})", 4),
             Catch::Contains("stage 1 holds 6 layers"));
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

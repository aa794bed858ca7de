// Mixture of experts with expert parallelism (moe, parallelism.ep): hand-worked parameters,
// token all-to-all and all-gather bytes, expert GEMM shapes, the expert gradient groups,
// rules (more experts per token cost more; the host waits for the token counts), memory,
// symmetric simulation, workload parsing and config errors.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "model/graph/transformer_builder.hpp"
#include "model/predict/predict.hpp"
#include "tests/model/transformer_test_support.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_transformer_moe_test {

using namespace perfcast;

namespace {

/// hidden 64, 4 heads, 2 layers, sequence 32, 4 experts of width 128 (GeLU), top-2,
/// micro-batch 1, 2 micro-batches per DP rank.
TransformerSpec moe_gpt(int tp, int ep, int dp, int experts = 4, int top_k = 2) {
  TransformerSpec w = test::gpt(64, 4, 2, 32);
  w.moe.experts = experts;
  w.moe.top_k = top_k;
  w.ffn_hidden = 128;
  w.tp = tp;
  w.ep = ep;
  w.dp = dp;
  w.sequence_parallel = tp > 1;
  w.global_batch = 2 * dp;
  w.dropout = 0;
  w.symmetric_simulation = false;
  w.pipeline_host_blocking = false;
  return w;
}

SystemSpec dgx_h100(int gpus) { return test::system("dgx_h100", "gpus_per_node", gpus); }

const GraphCollective& collective_of(const ExecutionGraph& g, const Op& op) {
  return g.collectives[static_cast<std::size_t>(*op.collective)];
}

const std::vector<int>& members(const ExecutionGraph& g, const GraphCollective& c) {
  return g.groups[static_cast<std::size_t>(c.group)].ranks;
}

/// Rank 0's op named exactly `name`; fails the test when absent.
const Op& op_named(const ExecutionGraph& g, const std::string& name) {
  for (const Op& op : g.ranks[0].ops)
    if (op.name == name) return op;
  FAIL("no op " << name);
  return g.ranks[0].ops.front();
}

bool has_op(const ExecutionGraph& g, const std::string& name) {
  for (const Op& op : g.ranks[0].ops)
    if (op.name == name) return true;
  return false;
}

}  // namespace

TEST_CASE("moe: parameters count every expert, active parameters top_k of them", "[transformer][moe]") {
  TransformerSpec w = moe_gpt(1, 1, 1);
  // One expert: fc1 64 x 128 + fc2 128 x 64, no biases = 16,384; the router 64 x 4.
  const double expert = 2.0 * 64 * 128;
  CHECK(w.parameters() - w.active_parameters() == Approx(2 /*layers*/ * (4 - 2) * expert));
  TransformerSpec dense = test::gpt(64, 4, 2, 32);
  dense.ffn_hidden = 128;
  // Dense MLP: (64 + 1) x 128 + 128 x 64 + 64 with biases; MoE: router + 4 experts.
  const double dense_mlp = 65.0 * 128 + 128.0 * 64 + 64, moe_mlp = 64.0 * 4 + 4 * expert;
  CHECK(w.parameters() - dense.parameters() == Approx(2 * (moe_mlp - dense_mlp)));
  resolve_parallelism(w = moe_gpt(1, 2, 2), 2);
  // ep 2: two experts per rank.
  CHECK(transformer_layer_expert_parameters(w, 0) == Approx(2 * expert));
}

TEST_CASE("moe: all-to-all dispatch and combine carry tokens x top_k rows; expert GEMMs share them", "[transformer][moe]") {
  TransformerSpec w = moe_gpt(1, 4, 4);
  resolve_parallelism(w, 4);
  const ExecutionGraph g = build_transformer_graph(w, 4);
  // 32 tokens x top-2 x hidden 64 x 2 B (bf16) = 8,192 B each way, over the 4 ep ranks.
  for (const char* name : {"mb0.layer0.mlp.dispatch", "mb0.layer0.mlp.combine", "mb0.layer0.backward.mlp.dispatch"}) {
    CAPTURE(name);
    const auto& c = collective_of(g, op_named(g, name));
    CHECK(c.desc.kind == CollectiveKind::kAllToAll);
    CHECK(c.desc.bytes == 8192);
    CHECK(members(g, c) == std::vector<int>{0, 1, 2, 3});
  }
  // Routing imbalance 1.5: the busiest expert's 96 rows; a capacity factor 1.25 without
  // padding drops what is beyond 80; padded to it, every expert runs 80.
  TransformerSpec uneven = w;
  uneven.moe.load_imbalance = 1.5;
  auto rows = [](const TransformerSpec& v) {
    const ExecutionGraph h = build_transformer_graph(v, 4);
    return std::get<GemmDesc>(op_named(h, "mb0.layer0.mlp.experts.fc1").kernels.front()).m;
  };
  CHECK(rows(uneven) == 96);
  uneven.moe.capacity_factor = 1.25;
  CHECK(rows(uneven) == 80);
  uneven.moe.load_imbalance = 1;
  uneven.moe.pad_to_capacity = true;
  CHECK(rows(uneven) == 80);
  // One local expert receives 32 x 2 x 4 ranks / 4 experts = 64 rows: fc1 64 x 128 x 64.
  const Op& fc1 = op_named(g, "mb0.layer0.mlp.experts.fc1");
  const auto& gemm = std::get<GemmDesc>(fc1.kernels.front());
  CHECK(gemm.m == 64);
  CHECK(gemm.n == 128);
  CHECK(gemm.k == 64);
  CHECK(gemm.batch == 1);
  // The host waits for the token counts once per layer forward, after their all-gather.
  const Op& counts = op_named(g, "mb0.layer0.mlp.tokens_per_expert");
  CHECK(counts.host_waits);
  CHECK(collective_of(g, op_named(g, "mb0.layer0.mlp.tokens_per_expert.all_gather")).desc.bytes == 4 * 8 * 4);
  CHECK(op_named(g, "mb0.layer0.mlp.router").moe_layer_start);
  CHECK(!has_op(g, "mb0.layer0.backward.mlp.tokens_per_expert"));
}

TEST_CASE("moe: expert TP gathers the routed rows; the all-gather dispatcher gathers hidden states", "[transformer][moe]") {
  TransformerSpec w = moe_gpt(2, 2, 2);  // 4 ranks per stage: expert TP 2 x ep 2
  resolve_parallelism(w, 4);
  ExecutionGraph g = build_transformer_graph(w, 4);
  // Sequence parallel: 16 tokens per rank x top-2 = 32 rows, gathered over expert TP 2:
  // 64 rows x 64 x 2 B.
  const auto& ag = collective_of(g, op_named(g, "mb0.layer0.mlp.experts.all_gather"));
  CHECK(ag.desc.kind == CollectiveKind::kAllGather);
  CHECK(ag.desc.bytes == 64 * 64 * 2);
  CHECK(members(g, ag) == std::vector<int>{0, 1});
  CHECK(members(g, collective_of(g, op_named(g, "mb0.layer0.mlp.dispatch"))) == std::vector<int>{0, 2});
  // Each of 2 local experts: 16 tokens x 2 x etp 2 x ep 2 / 4 experts = 32 rows; width 128 / etp 2.
  const auto& gemm = std::get<GemmDesc>(op_named(g, "mb0.layer0.mlp.experts.fc1").kernels.front());
  CHECK(gemm.m == 32);
  CHECK(gemm.n == 64);
  CHECK(gemm.batch == 2);

  w.moe.all_to_all = false;
  g = build_transformer_graph(w, 4);
  // Every rank of the expert TP x ep group gathers all 4 x 16 tokens x 64 x 2 B.
  const auto& gather = collective_of(g, op_named(g, "mb0.layer0.mlp.dispatch"));
  CHECK(gather.desc.kind == CollectiveKind::kAllGather);
  CHECK(gather.desc.bytes == 4 * 16 * 64 * 2);
  CHECK(members(g, gather) == std::vector<int>{0, 1, 2, 3});
  CHECK(collective_of(g, op_named(g, "mb0.layer0.mlp.combine")).desc.kind == CollectiveKind::kReduceScatter);
  CHECK(!has_op(g, "mb0.layer0.mlp.experts.all_gather"));
}

TEST_CASE("moe: expert gradients are reduced over the ranks holding the same experts", "[transformer][moe]") {
  TransformerSpec w = moe_gpt(1, 2, 4);  // expert DP 2: ranks {0, 2}
  resolve_parallelism(w, 4);
  const ExecutionGraph g = build_transformer_graph(w, 4);
  const double experts = transformer_stage_expert_parameters(w, 0) /* 2 layers */;
  const auto& expert_grads = collective_of(g, op_named(g, "expert_grads.all_reduce"));
  CHECK(expert_grads.desc.bytes == Approx(4 * experts));  // fp32 gradients
  CHECK(members(g, expert_grads) == std::vector<int>{0, 2});
  const auto& dense_grads = collective_of(g, op_named(g, "grads.all_reduce"));
  CHECK(dense_grads.desc.bytes == Approx(4 * (transformer_rank_parameters(w, 0) - experts)));
  CHECK(members(g, dense_grads) == std::vector<int>{0, 1, 2, 3});
  // ep 4: each rank holds different experts, nothing to reduce them with.
  TransformerSpec alone = moe_gpt(1, 4, 4);
  resolve_parallelism(alone, 4);
  CHECK(!has_op(build_transformer_graph(alone, 4), "expert_grads.all_reduce"));
}

TEST_CASE("moe: rules: more experts per token cost more; symmetric simulation equals the full one", "[transformer][moe]") {
  const SystemSpec s4 = dgx_h100(4);
  auto time = [&](TransformerSpec w) {
    // GPU-bound sizes: hidden 1024, 16 heads, sequence 4096, experts of width 4096.
    w.hidden = 1024, w.heads = w.kv_heads = 16, w.seq_len = 4096, w.ffn_hidden = 4096;
    resolve_parallelism(w, 4);
    return predict_transformer(s4, w)->timeline.iteration_time;
  };
  CHECK(time(moe_gpt(1, 4, 4, 8, 1)) < time(moe_gpt(1, 4, 4, 8, 2)));
  CHECK(time(moe_gpt(1, 4, 4, 8, 2)) < time(moe_gpt(1, 4, 4, 8, 4)));
  TransformerSpec padded = moe_gpt(1, 4, 4);
  padded.moe.capacity_factor = 2;
  padded.moe.pad_to_capacity = true;
  CHECK(time(moe_gpt(1, 4, 4)) < time(padded));
  TransformerSpec uneven = moe_gpt(1, 4, 4);
  uneven.moe.load_imbalance = 1.5;
  CHECK(time(moe_gpt(1, 4, 4)) < time(uneven));
  for (TransformerSpec w : {moe_gpt(1, 2, 4), moe_gpt(2, 2, 2)}) {
    resolve_parallelism(w, 4);
    TransformerSpec mirrored = w;
    mirrored.symmetric_simulation = true;
    CHECK(predict_transformer(s4, mirrored)->timeline.iteration_time == predict_transformer(s4, w)->timeline.iteration_time);
  }
}

TEST_CASE("moe: optimizer states of experts shard over expert DP, activations grow with top_k", "[transformer][moe][memory]") {
  const SystemSpec s4 = dgx_h100(4);
  TransformerSpec w = moe_gpt(1, 2, 4);
  w.distributed_optimizer = true;
  resolve_parallelism(w, 4);
  const RankMemory m = estimate_transformer_memory(w, s4)[0];
  const double params = transformer_rank_parameters(w, 0), experts = transformer_stage_expert_parameters(w, 0);
  // bf16 weights 2 B + fp32 grads 4 B per parameter; Adam 12 B sharded over dp 4 (dense) and expert DP 2.
  CHECK(m.dense == Approx(6 * params + 12 * ((params - experts) / 4 + experts / 2)));
  TransformerSpec more = moe_gpt(1, 2, 4, 4, 4);
  resolve_parallelism(more, 4);
  TransformerSpec fewer = moe_gpt(1, 2, 4, 4, 1);
  resolve_parallelism(fewer, 4);
  CHECK(estimate_transformer_memory(fewer, s4)[0].activations < estimate_transformer_memory(more, s4)[0].activations);
}

TEST_CASE("moe: parallel folding: expert TP 1 under attention TP 2 holds whole experts, sharded over expert DP",
          "[transformer][moe][memory][folding]") {
  const SystemSpec s4 = dgx_h100(4);
  const double expert = 2.0 * 64 * 128;  // one expert's fc1 and fc2, no biases
  // Attention tp 2 x dp 2; experts ep 2 x expert TP 2 (no folding): expert DP 4 / 4 = 1, each
  // rank holds 2 experts' halves; with expert TP 1 (folded): expert DP 4 / 2 = 2, whole experts.
  TransformerSpec plain = moe_gpt(2, 2, 2);
  plain.distributed_optimizer = true;
  resolve_parallelism(plain, 4);
  TransformerSpec folded = plain;
  folded.moe.expert_tp = 1;
  resolve_parallelism(folded, 4);
  CHECK(plain.expert_dp() == 1);
  CHECK(folded.expert_dp() == 2);
  CHECK(transformer_layer_expert_parameters(plain, 0) == Approx(2 * expert / 2));
  CHECK(transformer_layer_expert_parameters(folded, 0) == Approx(2 * expert));
  CHECK(transformer_stage_expert_parameters(folded, 0) == Approx(2 /*layers*/ * 2 * expert));
  // The rest (attention, router, norms, embedding) is the same with or without folding.
  const double rest = transformer_rank_parameters(plain, 0) - transformer_stage_expert_parameters(plain, 0);
  CHECK(transformer_rank_parameters(folded, 0) - transformer_stage_expert_parameters(folded, 0) == Approx(rest));
  // bf16 weights 2 B + fp32 gradients 4 B per parameter; Adam's 12 B sharded over dp x cp 2
  // (the rest) and expert DP (1 plain, 2 folded).
  const double e_plain = 2 * 2 * expert / 2, e_folded = 2 * 2 * expert;
  CHECK(estimate_transformer_memory(plain, s4)[0].dense == Approx(6 * (rest + e_plain) + 12 * (rest / 2 + e_plain / 1)));
  CHECK(estimate_transformer_memory(folded, s4)[0].dense == Approx(6 * (rest + e_folded) + 12 * (rest / 2 + e_folded / 2)));
}

TEST_CASE("moe: the workload keys and config errors", "[transformer][moe][config]") {
  const JsonDocument doc = load_json_file(std::string(PERFCAST_SOURCE_DIR) + "/configs/workloads/mixtral_8x7b.json");
  const TransformerSpec mixtral = parse_transformer(doc);
  CHECK(mixtral.moe.experts == 8);
  CHECK(mixtral.moe.top_k == 2);
  CHECK(!mixtral.moe.grouped_gemm);
  CHECK(mixtral.ep == 8);
  // Mixtral 8x7B: 46.7B parameters, 12.9B active (Mistral AI's announcement); the padded
  // vocabulary and LayerNorm biases add a little.
  CHECK(mixtral.parameters() == Approx(46.7e9).epsilon(0.01));
  CHECK(mixtral.active_parameters() == Approx(12.9e9).epsilon(0.01));

  const auto message = test::parallelism_error;
  CHECK(message(moe_gpt(1, 3, 3, 4), 3) == "/parallelism/ep: 4 experts do not divide over ep 3");
  CHECK(message(moe_gpt(1, 4, 2), 2) == "/parallelism/ep: ep 4 x expert_tp 1 does not divide the 2 ranks of a pipeline stage (tp x cp x dp)");
  TransformerSpec no_sp = moe_gpt(2, 1, 1);
  no_sp.sequence_parallel = false;
  CHECK(message(no_sp, 2) == "/sequence_parallel: MoE layers with tensor parallelism need sequence parallelism (Megatron-Core's MoE README): set \"sequence_parallel\": true");

  auto parse_error = [](const std::string& extra) {
    nlohmann::json j = nlohmann::json::parse(R"({"schema": "perfcast.workload", "schema_version": "1.0", "name": "t",
      "model": "transformer", "hidden": 64, "heads": 4, "layers": 2, "seq_len": 32, "vocab": 1000,
      "micro_batch": 1, "global_batch": 4})");
    j.merge_patch(nlohmann::json::parse(extra));
    try {
      (void)parse_transformer(JsonDocument{j, "w.json"});
    } catch (const ConfigError& e) {
      return fmt::format("{}: {}", e.pointer(), e.message());
    }
    return std::string("no error");
  };
  CHECK(parse_error(R"({"parallelism": {"ep": 2}})") ==
        "/parallelism/ep: expert parallelism needs experts: add \"moe\": {\"experts\": N, \"top_k\": K}");
  CHECK(parse_error(R"({"moe": {"experts": 2, "top_k": 4}})") == "/moe/top_k: top_k 4 is more than the 2 experts");
  CHECK(parse_error(R"({"moe": {"experts": 2, "pad_to_capacity": true}})").find("/moe/pad_to_capacity") == 0);
  CHECK(parse_error(R"({"moe": {"experts": 2, "shared_experts": 1}})").find("/moe") == 0);
  CHECK(parse_error(R"({"moe": {"experts": 2, "shared_expert_ffn_hidden": 0}})").find("/moe/shared_expert_ffn_hidden") == 0);
  CHECK(parse_error(R"({"moe": {"experts": 2, "dispatcher": "flex"}})").find("/moe/dispatcher") == 0);
  CHECK(parse_error(R"({"moe": {"experts": 2, "load_imbalance": 0.5}})").find("/moe/load_imbalance") == 0);
}

TEST_CASE("moe: shared experts, a TP MLP over every token after the routed experts, by hand", "[transformer][moe][shared]") {
  // Shared experts of width 256 at tp 2 (GeLU, no biases): 64 x 256 + 256 x 64 = 32,768
  // parameters per layer, all active, half of them on each TP rank.
  TransformerSpec w = moe_gpt(2, 1, 1);
  TransformerSpec plain = w;
  w.moe.shared_ffn = 256;
  const double shared = 2.0 * 64 * 256;
  CHECK(w.parameters() - plain.parameters() == Approx(2 /*layers*/ * shared));
  CHECK(w.active_parameters() - plain.active_parameters() == Approx(2 * shared));
  resolve_parallelism(w, 2);
  resolve_parallelism(plain, 2);
  CHECK(transformer_rank_parameters(w, 0) - transformer_rank_parameters(plain, 0) == Approx(2 * shared / 2));
  const ExecutionGraph g = build_transformer_graph(w, 2);
  // Forward: after the combine, the sequence-parallel all-gather of the 32 tokens (32 x 64 x
  // 2 B), fc1 (32 x 128 x 64 per TP rank), fc2 (32 x 64 x 128), the reduce-scatter, the add.
  auto index_of = [&](const std::string& name) {
    for (std::size_t i = 0; i < g.ranks[0].ops.size(); ++i)
      if (g.ranks[0].ops[i].name == name) return static_cast<int>(i);
    FAIL("no op " << name);
    return -1;
  };
  CHECK(index_of("mb0.layer0.mlp.unpermute") < index_of("mb0.layer0.mlp.shared_experts.all_gather"));
  const auto& gather = collective_of(g, op_named(g, "mb0.layer0.mlp.shared_experts.all_gather"));
  CHECK(gather.desc.kind == CollectiveKind::kAllGather);
  CHECK(gather.desc.bytes == Approx(32.0 * 64 * 2));
  const auto& fc1 = std::get<GemmDesc>(op_named(g, "mb0.layer0.mlp.shared_experts.fc1").kernels[0]);
  CHECK((fc1.m == 32 && fc1.n == 128 && fc1.k == 64));
  CHECK(std::get<ElementwiseDesc>(op_named(g, "mb0.layer0.mlp.shared_experts.fc1").kernels[1]).op == "gelu");
  const auto& fc2 = std::get<GemmDesc>(op_named(g, "mb0.layer0.mlp.shared_experts.fc2").kernels[0]);
  CHECK((fc2.m == 32 && fc2.n == 64 && fc2.k == 128));
  CHECK(collective_of(g, op_named(g, "mb0.layer0.mlp.shared_experts.tp_reduce")).desc.kind == CollectiveKind::kReduceScatter);
  CHECK(index_of("mb0.layer0.mlp.shared_experts.tp_reduce") < index_of("mb0.layer0.mlp.shared_experts.add"));
  // Backward: the shared experts first, then the routed path.
  CHECK(index_of("mb0.layer1.backward.mlp.shared_experts.fc1") < index_of("mb0.layer1.backward.mlp.unpermute"));
  // Their gradients join the dense ones (all-reduced over dp x cp, not expert DP).
  CHECK(!has_op(g, "expert_grads.all_reduce"));
  // Memory: the kept sequence-parallel input (16 x 64) and fc1 / GeLU outputs (32 x 128 each
  // per TP rank), 2 B each, per layer and micro-batch in flight.
  const SystemSpec s2 = dgx_h100(2);
  const double per_layer = 2.0 * (16 * 64 + 2 * 32 * 128);
  const double grown = estimate_transformer_memory(w, s2)[0].activations - estimate_transformer_memory(plain, s2)[0].activations;
  CHECK(grown == Approx(per_layer * 2 /*layers*/ * 1 /*in flight*/).epsilon(1e-9));
  // Under FP8 they keep the FP8 casts of their GEMM inputs: the input (16 x 64) and the GeLU
  // output (32 x 128) at 1 B, fc1's output (32 x 128) at 2 B.
  TransformerSpec w8 = w, plain8 = plain;
  w8.precision = plain8.precision = DType::kFp8;
  const double grown8 = estimate_transformer_memory(w8, s2)[0].activations - estimate_transformer_memory(plain8, s2)[0].activations;
  CHECK(grown8 == Approx((16.0 * 64 + 2.0 * 32 * 128 + 32.0 * 128) * 2 /*layers*/).epsilon(1e-9));
  // And it takes time.
  CHECK(predict_transformer(s2, w)->timeline.iteration_time > predict_transformer(s2, plain)->timeline.iteration_time);
  // A width that does not divide over tp is refused.
  TransformerSpec odd = moe_gpt(2, 1, 1);
  odd.moe.shared_ffn = 255;
  CHECK(test::parallelism_error(odd, 2) == "/moe/shared_expert_ffn_hidden: shared expert width 255 does not divide over tp 2");
}

TEST_CASE("moe: layer_freq: dense and MoE layers, by hand", "[transformer][moe][layer_freq]") {
  // 2 layers; layer 0 dense (ffn 128, biases), layer 1 MoE: the list form [0, 1].
  TransformerSpec w = moe_gpt(1, 2, 2);
  w.moe.layer_pattern = {false, true};
  TransformerSpec all = moe_gpt(1, 2, 2);
  TransformerSpec dense = test::gpt(64, 4, 2, 32);
  dense.ffn_hidden = 128;
  const double expert = 2.0 * 64 * 128, dense_mlp = 65.0 * 128 + 128.0 * 64 + 64, moe_mlp = 64.0 * 4 + 4 * expert;
  CHECK(w.parameters() - dense.parameters() == Approx(moe_mlp - dense_mlp));
  CHECK(all.parameters() - w.parameters() == Approx(moe_mlp - dense_mlp));
  CHECK(w.parameters() - w.active_parameters() == Approx((4 - 2) * expert));
  // The integer form: layers 0, 2, 4, ...: layer 0 MoE, layer 1 dense.
  TransformerSpec every_other = moe_gpt(1, 2, 2);
  every_other.moe.layer_freq = 2;
  CHECK(every_other.moe.in_layer(0));
  CHECK(!every_other.moe.in_layer(1));
  CHECK(every_other.parameters() == Approx(w.parameters()));

  // pp 2: stage 0 holds the dense layer, stage 1 the MoE layer (ep 2 over dp 2).
  w.pp = 2;
  w.global_batch = 4;
  resolve_parallelism(w, 4);
  CHECK(transformer_stage_expert_parameters(w, 0) == 0);
  CHECK(transformer_stage_expert_parameters(w, 1) == Approx(2 * expert));  // 2 of the 4 experts per rank
  const ExecutionGraph g = build_transformer_graph(w, 4);
  auto has = [&](int rank, const std::string& name) {
    for (const Op& op : g.ranks[static_cast<std::size_t>(rank)].ops)
      if (op.name == name) return true;
    return false;
  };
  CHECK(!has(0, "mb0.layer0.mlp.router"));
  CHECK(has(0, "mb0.layer0.mlp.fc1"));
  CHECK(has(2, "mb0.layer1.mlp.router"));
  CHECK(has(2, "mb0.layer1.mlp.dispatch"));
  CHECK(!has(2, "mb0.layer1.mlp.fc1"));
  // Stage 0 has no expert gradients to reduce; stage 1 does, over expert DP 1: none either.
  CHECK(!has(0, "expert_grads.reduce_scatter"));
  // It runs (no deadlock), and the dense stage keeps the dense layer's activations.
  const SystemSpec s4 = dgx_h100(4);
  CHECK(predict_transformer(s4, w)->timeline.iteration_time > 0);
  const auto m = estimate_transformer_memory(w, s4);
  TransformerSpec all_moe = all;
  all_moe.pp = 2;
  all_moe.global_batch = 4;
  resolve_parallelism(all_moe, 4);
  const auto m_all = estimate_transformer_memory(all_moe, s4);
  CHECK(m[0].activations != Approx(m_all[0].activations));
  CHECK(m[2].activations == Approx(m_all[2].activations));

  // Config errors: a list of the wrong length, no MoE layer, values other than 0 / 1.
  TransformerSpec short_list = moe_gpt(1, 1, 1);
  short_list.moe.layer_pattern = {true};
  CHECK(test::parallelism_error(short_list, 1) == "/moe/layer_freq: the pattern lists 1 layers, the model has 2");
  TransformerSpec none = moe_gpt(1, 1, 1);
  none.moe.layer_pattern = {false, false};
  CHECK(test::parallelism_error(none, 1).find("/moe/layer_freq: no layer has an MoE MLP") == 0);
}

TEST_CASE("moe: the DeepSeekMoE 16B preset: shared experts, a dense first layer, 16.4B parameters", "[transformer][moe][preset]") {
  const TransformerSpec w = parse_transformer(load_json_file(std::string(PERFCAST_SOURCE_DIR) + "/configs/workloads/deepseek_moe_16b.json"));
  CHECK(!w.moe.in_layer(0));
  CHECK(w.moe.in_layer(27));
  CHECK(w.moe.shared_ffn == 2 * 1408);
  // DeepSeek-MoE README: 16.4B parameters; the paper: 2.8B activated. perfcast's count adds
  // LayerNorm biases (RMSNorm has none) and pads the vocabulary: within 1% and 3%.
  CHECK(w.parameters() == Approx(16.4e9).epsilon(0.01));
  CHECK(w.active_parameters() == Approx(2.8e9).epsilon(0.03));
}

}  // namespace perfcast_test_model_transformer_moe_test

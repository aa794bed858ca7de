// Selective recompute by module (Megatron-Core's --recompute-modules): the recomputed norms
// and expert activation as kernels before the backward that reads them, the stored bytes they
// free worked by hand, the unfused core attention only when "core_attn" is listed, and the
// refusals.
#include <algorithm>

#include <catch2/catch.hpp>

#include "model/graph/transformer_builder.hpp"
#include "model/predict/predict.hpp"
#include "tests/model/transformer_test_support.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_transformer_recompute_modules_test {

using namespace perfcast;

namespace {

/// Index of rank 0's op `name`, or -1.
long index_of(const ExecutionGraph& g, const std::string& name) {
  const auto& ops = g.ranks[0].ops;
  const auto it = std::find_if(ops.begin(), ops.end(), [&](const Op& op) { return op.name == name; });
  return it == ops.end() ? -1 : static_cast<long>(it - ops.begin());
}

/// hidden 64, 4 heads, 2 layers, sequence 32, bf16, no dropout, one micro-batch per
/// iteration, selective recompute.
TransformerSpec base() {
  TransformerSpec w = test::gpt(64, 4, 2, 32);
  w.precision = DType::kBf16;
  w.dp = 1;
  w.dropout = 0;
  w.global_batch = 1;
  w.recompute = Recompute::kSelective;
  return w;
}

/// Dense, tp 2 with sequence parallelism.
TransformerSpec dense(bool norms) {
  TransformerSpec w = base();
  w.tp = 2;
  w.sequence_parallel = true;
  w.recompute_norms = norms;
  return w;
}

/// 4 experts of width 128 (GeLU), top-2, tp 1.
TransformerSpec moe(bool act) {
  TransformerSpec w = base();
  w.moe.experts = 4;
  w.moe.top_k = 2;
  w.ffn_hidden = 128;
  w.tp = 1;
  w.recompute_moe_act = act;
  return w;
}

SystemSpec h100(int gpus) { return test::system("dgx_h100", "gpus_per_node", gpus); }

}  // namespace

TEST_CASE("recompute modules: layernorm re-runs each norm before the backward that reads it", "[transformer][recompute]") {
  const ExecutionGraph g = build_transformer_graph(dense(true), 2);
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = fmt::format("mb0.layer{}.backward.", layer);
    INFO(p);
    const long post = index_of(g, p + "recompute.post_attention_layernorm"), input = index_of(g, p + "recompute.input_layernorm");
    REQUIRE(post >= 0);
    REQUIRE(input >= 0);
    CHECK(post < index_of(g, p + "mlp.fc2"));
    CHECK(input > index_of(g, p + "attention.dense"));
    CHECK(input < index_of(g, p + "qkv"));
    // A layernorm over this rank's sequence-parallel tokens (32 / 2 x 64), as in the forward.
    const auto& k = std::get<ElementwiseDesc>(g.ranks[0].ops[static_cast<std::size_t>(input)].kernels.front());
    CHECK(k.op == "layernorm");
    CHECK(k.elements == 16 * 64);
  }
  CHECK(index_of(build_transformer_graph(dense(false), 2), "mb0.layer0.backward.recompute.input_layernorm") == -1);
  // Rule: recomputing costs time, never saves it.
  CHECK(predict_transformer(h100(2), dense(true))->timeline.iteration_time >
        predict_transformer(h100(2), dense(false))->timeline.iteration_time);
}

TEST_CASE("recompute modules: the bytes they free, by hand", "[transformer][recompute][memory]") {
  SECTION("layernorm: the two norms' bf16 outputs (QKV and fc1 inputs), 2 sbh / tp each, per layer") {
    // sbh = 32 x 1 x 64 = 2,048; tp 2 under sequence parallelism: 2 x 2 x 2048 / 2 = 4,096 B a
    // layer, 2 layers, one micro-batch in flight.
    const double freed = estimate_transformer_memory(dense(false), h100(2))[0].activations -
                         estimate_transformer_memory(dense(true), h100(2))[0].activations;
    CHECK(freed == Approx(2 * 4096.0));
    // Under FP8 the linears keep their own FP8 casts of the norms' outputs: nothing is freed.
    TransformerSpec a = dense(false), b = dense(true);
    a.precision = b.precision = DType::kFp8;
    CHECK(estimate_transformer_memory(a, h100(2))[0].activations == Approx(estimate_transformer_memory(b, h100(2))[0].activations));
  }
  SECTION("moe_act: the experts' bf16 activation output (fc2's input), rows x ffn x 2 B per layer") {
    // 32 tokens x top-2 = 64 rows, 128 wide, 2 B: 16,384 B a layer, 2 MoE layers.
    const double freed = estimate_transformer_memory(moe(false), h100(1))[0].activations -
                         estimate_transformer_memory(moe(true), h100(1))[0].activations;
    CHECK(freed == Approx(2 * 16384.0));
  }
}

TEST_CASE("recompute modules: moe_act re-runs the experts' activation before fc2's backward", "[transformer][recompute][moe]") {
  const ExecutionGraph g = build_transformer_graph(moe(true), 1);
  const long act = index_of(g, "mb0.layer1.backward.mlp.experts.recompute.activation");
  REQUIRE(act >= 0);
  CHECK(act < index_of(g, "mb0.layer1.backward.mlp.experts.fc2"));
  const auto& k = std::get<ElementwiseDesc>(g.ranks[0].ops[static_cast<std::size_t>(act)].kernels.front());
  CHECK(k.op == "gelu");
  CHECK(k.elements == 64 * 128);  // the 64 routed rows of the busiest expert set, 128 wide
  CHECK(index_of(build_transformer_graph(moe(false), 1), "mb0.layer1.backward.mlp.experts.recompute.activation") == -1);
}

TEST_CASE("recompute modules: parsing and refusals name the field", "[transformer][recompute]") {
  const std::string base = R"({"schema": "perfcast.workload", "schema_version": "1.0", "name": "x", "model": "transformer",
    "hidden": 64, "heads": 4, "layers": 2, "seq_len": 32, "vocab": 1000, "micro_batch": 1, "global_batch": 8, )";
  auto spec = [&](const std::string& more) {
    return parse_transformer(JsonDocument{nlohmann::json::parse(base + more + "}"), "w.json"});
  };
  const TransformerSpec s = spec(R"("recompute": "selective", "recompute_modules": ["layernorm", "moe_act"])");
  CHECK(s.recomputes_norms());
  CHECK(s.recomputes_moe_act());
  CHECK_FALSE(s.recomputes_core_attention());  // listed modules replace the default ["core_attn"]
  CHECK(spec(R"("recompute": "selective")").recomputes_core_attention());
  CHECK(spec(R"("recompute": "selective", "recompute_modules": ["core_attn"])").recomputes_core_attention());
  // As in Megatron, the modules apply under selective recompute only (plan tries none and full
  // on the same file).
  const TransformerSpec full = spec(R"("recompute": "full", "recompute_modules": ["layernorm"])");
  CHECK_FALSE(full.recomputes_norms());
  CHECK(test::workload_error(base + R"("recompute": "selective", "recompute_modules": ["mlp"]})") ==
        "/recompute_modules/0: recompute module \"mlp\" is not modelled (modelled: core_attn, layernorm, moe_act)");
  CHECK(test::workload_error(base + R"("recompute": "selective", "recompute_modules": ["norm"]})").rfind("/recompute_modules/0:", 0) == 0);
  CHECK(test::workload_error(base + R"("recompute": "selective", "recompute_modules": "layernorm"})").rfind("/recompute_modules:", 0) == 0);
  CHECK(test::workload_error(base + R"("recompute": "selective", "recompute_modules": []})").rfind("/recompute_modules:", 0) == 0);
}

}  // namespace perfcast_test_model_transformer_recompute_modules_test

// Attention heads whose width is not hidden / heads ("head_dim", Megatron's kv_channels, as
// Qwen3 and Gemma set it): parameters, GEMM and attention shapes, model FLOPs and stored
// activations by hand, and the refusals.
#include <cmath>

#include <catch2/catch.hpp>

#include "model/graph/memory_estimate.hpp"
#include "model/graph/transformer_builder.hpp"
#include "model/predict/predict.hpp"
#include "model/report/workload_metrics.hpp"
#include "tests/model/transformer_test_support.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_transformer_head_dim_test {

using namespace perfcast;

namespace {

/// hidden 64, 4 query heads and 2 kv heads of 32 elements (attention width 128 = 2 x hidden),
/// 2 layers, sequence 32, no dropout.
TransformerSpec wide_heads(int tp) {
  TransformerSpec w = test::small_decoder(tp);
  w.kv_heads = 2;
  w.explicit_head_dim = 32;
  return w;
}

}  // namespace

TEST_CASE("head_dim: attention parameters per TP rank by hand", "[transformer][head_dim]") {
  // QKV: (64 + 1) x (4 + 2 x 2) x 32 / tp; output: 4 x 32 x 64 / tp + 64 (bias, whole).
  CHECK(wide_heads(1).attention_parameters(1) == Approx(16640 + 8192 + 64));
  CHECK(wide_heads(2).attention_parameters(2) == Approx(8320 + 4096 + 64));
  // Unset, the width is hidden / heads (16): (65 x 8 x 16) + 64 x 64 + 64.
  TransformerSpec plain = wide_heads(1);
  plain.explicit_head_dim = 0;
  CHECK(plain.attention_width() == 64);
  CHECK(plain.attention_parameters(1) == Approx(8320 + 4096 + 64));
}

TEST_CASE("head_dim: GEMM shapes and the attention kernel per TP rank", "[transformer][head_dim]") {
  const ExecutionGraph g = build_transformer_graph(wide_heads(2), 2);
  const std::int64_t T = 32;  // micro-batch 1 x sequence 32
  auto check = [&](const std::string& op, std::int64_t m, std::int64_t n, std::int64_t k) { test::check_first_gemm(g, op, m, n, k); };
  check("mb0.layer0.qkv", T, (2 + 2 * 1) * 32, 64);  // 2 query heads and 1 kv head a rank, 32 wide
  check("mb0.layer0.attention.dense", T, 64, 2 * 32);  // 2 heads of 32 back to the hidden size
  const AttentionDesc* a = test::attention_of(g, "mb0.layer0.flash_attention");
  REQUIRE(a != nullptr);
  CHECK(a->heads == 2);
  CHECK(a->kv_heads == 1);
  CHECK(a->head_dim == 32);
  CHECK(a->value_dim() == 32);
}

TEST_CASE("head_dim: model FLOPs count n x d, not h", "[transformer][head_dim]") {
  const SystemSpec s = test::system("dgx_h100", "gpus_per_node", 2);
  TransformerSpec w = wide_heads(2);
  w.dp = 0;
  const auto p = predict_transformer(s, w, {}, 3);
  REQUIRE(p->timeline.iteration_time > 0);
  // 8 sequences x 32 tokens x (6 N + 12 L s n d), L 2, s 32, n 4, d 32.
  const double per_token = 6 * w.parameters() + 12.0 * 2 * 32 * 4 * 32;
  CHECK(workload_metrics(*p).model_flops_per_iteration == Approx(8 * 32 * per_token));
  CHECK(std::string(model_flops_formula(w)).find("12 L s n d") != std::string::npos);
}

TEST_CASE("head_dim: stored activations scale the attention's share by n d / h", "[transformer][head_dim]") {
  // tp 2 with sequence parallelism, 1 micro-batch of 32 tokens in flight, bf16 (sbh = 32 x 64).
  // Q, K, V and the projection input, split over TP: sbh x (2 (1 + 2 kv / n) + 2) / t =
  // 2,048 x 6 / 2 = 6,144 B a layer at width 64; at width 128 twice that: +6,144 B a layer,
  // +12,288 B for both layers.
  TransformerSpec plain = wide_heads(2);
  plain.explicit_head_dim = 0;
  CHECK(test::first_stage_activation_change(wide_heads(2), plain, test::system("dgx_h100", "gpus_per_node", 2), 2) ==
        Approx(12288));
}

TEST_CASE("head_dim: read from the workload, refused where it cannot apply", "[transformer][head_dim]") {
  const std::string base = R"({"schema": "perfcast.workload", "schema_version": "1.0", "name": "x", "model": "transformer",
    "hidden": 60, "heads": 8, "layers": 2, "seq_len": 32, "vocab": 100, "micro_batch": 1, "global_batch": 8, )";
  // 60 does not divide into 8 heads: refused without head_dim, fine with it.
  CHECK(test::workload_error(base + R"("kv_heads": 8})").rfind("/heads:", 0) == 0);
  CHECK(test::workload_error(base + R"("head_dim": 16})") == "no error");
  CHECK(test::workload_error(base + R"("head_dim": 0})").rfind("/head_dim:", 0) == 0);
  const std::string mla = R"("mla": {"kv_lora_rank": 16, "qk_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 6})";
  CHECK(test::workload_error(base + R"("head_dim": 16, )" + mla + "}").rfind("/head_dim:", 0) == 0);
}

TEST_CASE("head_dim: Qwen3-30B-A3B's published parameter counts", "[transformer][head_dim][presets]") {
  JsonDocument doc = load_json_file(std::string(PERFCAST_SOURCE_DIR) + "/configs/workloads/qwen3_30b_a3b.json");
  (void)take_runtime_name(doc);
  const TransformerSpec w = parse_transformer(doc);
  REQUIRE(w.head_dim() == 128);
  REQUIRE(w.attention_width() == 4096);  // twice the hidden size
  // One layer's attention by hand: (2,048 + 1) x (32 + 2 x 4) x 128 + 32 x 128 x 2,048 + 2,048.
  CHECK(w.attention_parameters(1) == Approx(10490880.0 + 8388608 + 2048));
  // The model card: 30.5B parameters, 3.3B activated (8 of 128 experts of 3 x 2,048 x 768).
  CHECK(w.parameters() == Approx(30.5e9).epsilon(0.01));
  CHECK(w.active_parameters() == Approx(3.3e9).epsilon(0.02));
}

TEST_CASE("head_dim: Qwen3-235B-A22B's published parameter counts and its pipeline split", "[transformer][head_dim][presets]") {
  JsonDocument doc = load_json_file(std::string(PERFCAST_SOURCE_DIR) + "/configs/workloads/qwen3_235b_a22b.json");
  (void)take_runtime_name(doc);
  TransformerSpec w = parse_transformer(doc);
  REQUIRE(w.head_dim() == 128);
  REQUIRE(w.attention_width() == 8192);  // twice the hidden size
  // The model card: 235B parameters, 22B activated (8 of 128 experts of 3 x 4,096 x 1,536).
  CHECK(w.parameters() == Approx(235e9).epsilon(0.01));
  CHECK(w.active_parameters() == Approx(22e9).epsilon(0.02));
  // 94 layers with the embedding and the loss counted: 96 over pp 8 x vp 4 chunks of 3; stage 0
  // holds 11 (its first chunk 2), stage 7 holds 11 (its last chunk 2), the others 12.
  resolve_parallelism(w, 256);
  CHECK(w.stage_layer_count(0) == 11);
  CHECK(w.stage_layer_count(3) == 12);
  CHECK(w.stage_layer_count(7) == 11);
  CHECK(w.expert_dp() == 1);  // 32 experts-parallel ranks x expert TP 1 over the 32 ranks of a stage
}

}  // namespace perfcast_test_model_transformer_head_dim_test

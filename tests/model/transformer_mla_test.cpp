// Multi-latent attention (mla): hand-worked parameters and GEMM shapes per TP rank, the
// attention kernel's query/key and value widths, the flash predictor with unequal widths,
// model FLOPs, DeepSeek-V2-Lite's published parameter count, and the refusals.
#include <cmath>

#include <catch2/catch.hpp>

#include "model/graph/transformer_builder.hpp"
#include "model/predict/predict.hpp"
#include "model/report/workload_metrics.hpp"
#include "predictors/spec_predictors.hpp"
#include "tests/model/transformer_test_support.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_transformer_mla_test {

using namespace perfcast;

namespace {

/// hidden 64, 4 heads, 2 layers, sequence 32; latent 16, query latent `q_lora`, per head
/// 8 + 4 rotary for queries and keys, 6 for values.
TransformerSpec mla_gpt(int tp, std::int64_t q_lora) {
  TransformerSpec w = test::small_decoder(tp);
  w.mla = MlaSpec{q_lora, 16, 8, 4, 6};
  return w;
}

}  // namespace

TEST_CASE("mla: attention parameters per TP rank by hand", "[transformer][mla]") {
  // h 64, n 4, latent 16, rotary 4, query/key 8 + 4, value 6.
  // Full query projection: 64 x 4 x 12 / tp; keys and values: 64 x (16 + 4) + 16 (norm)
  // + 16 x 4 x (8 + 6) / tp; output: 4 x 6 x 64 / tp + 64 (bias).
  CHECK(mla_gpt(1, 0).attention_parameters(1) == Approx(3072 + (1280 + 16 + 896) + (1536 + 64)));
  CHECK(mla_gpt(2, 0).attention_parameters(2) == Approx(1536 + (1280 + 16 + 448) + (768 + 64)));
  // With a query latent of 32: 64 x 32 + 32 (norm) + 32 x 4 x 12 / tp.
  CHECK(mla_gpt(2, 32).attention_parameters(2) == Approx((2048 + 32 + 768) + (1280 + 16 + 448) + (768 + 64)));
  // Without MLA the formula is Megatron's QKV and output projection with biases.
  TransformerSpec plain = test::gpt(64, 4, 2, 32);
  CHECK(plain.attention_parameters(2) == Approx(65.0 * 3 * 64 / 2 + 64 * 64 / 2 + 64));
}

TEST_CASE("mla: GEMM shapes and the attention kernel's widths per TP rank", "[transformer][mla]") {
  const TransformerSpec w = mla_gpt(2, 32);
  const ExecutionGraph g = build_transformer_graph(w, 2);
  const std::int64_t T = 32;  // micro-batch 1 x sequence 32
  auto check = [&](const std::string& op, std::int64_t m, std::int64_t n, std::int64_t k) { test::check_first_gemm(g, op, m, n, k); };
  check("mb0.layer0.q_down", T, 32, 64);           // duplicated on both TP ranks
  check("mb0.layer0.q_up", T, 2 * 12, 32);         // 2 heads per rank x (8 + 4)
  check("mb0.layer0.kv_down", T, 16 + 4, 64);      // latent + shared rotary key
  check("mb0.layer0.kv_up", T, 2 * (8 + 6), 16);   // keys and values of 2 heads
  check("mb0.layer0.attention.dense", T, 64, 2 * 6);  // values of 2 heads back to the hidden size
  const AttentionDesc* a = test::attention_of(g, "mb0.layer0.flash_attention");
  REQUIRE(a != nullptr);
  CHECK(a->heads == 2);
  CHECK(a->head_dim == 12);
  CHECK(a->value_dim() == 6);
  // No q_lora: one full query projection instead of q_down / q_up.
  const ExecutionGraph full = build_transformer_graph(mla_gpt(2, 0), 2);
  CHECK(test::first_gemm(full, "mb0.layer0.q_proj").n == 24);
}

TEST_CASE("mla: flash attention FLOPs and bytes with unequal widths", "[transformer][mla]") {
  const GpuSpec& gpu = test::system("dgx_h100", "gpus_per_node", 8).gpu;
  AttentionDesc a{2, 16, 16, 4096, 4096, 192, false, DType::kBf16, AttentionPass::kForward, 128};
  const Estimate e = predict_attention(a, gpu);
  // 2 x batch x heads x s x s x (192 + 128).
  CHECK(e.flops == Approx(2.0 * 2 * 16 * 4096.0 * 4096 * 320));
  // Q and O (192 + 128 per head), K and V the same, the fp32 log-sum-exp.
  CHECK(e.dram_bytes == Approx(2.0 * 2 * 16 * 4096 * 320 * 2 + 2 * 16 * 4096 * 4.0));
  // Equal widths give the usual 4 x ... x head_dim.
  AttentionDesc same = a;
  same.head_dim = 128;
  same.v_head_dim = 0;
  CHECK(predict_attention(same, gpu).flops == Approx(4.0 * 2 * 16 * 4096.0 * 4096 * 128));
}

TEST_CASE("mla: DeepSeek-V2-Lite's parameters and model FLOPs", "[transformer][mla]") {
  const TransformerSpec w = parse_transformer(load_json_file(std::string(PERFCAST_SOURCE_DIR) + "/configs/workloads/deepseek_v2_lite.json"));
  REQUIRE(w.mla.enabled());
  // DeepSeek-V2 paper (arXiv:2405.04434) appendix B: 15.7B parameters, 2.4B activated.
  CHECK(w.parameters() == Approx(15.7e9).epsilon(0.01));
  // Activated, counting both embeddings as DeepSeekMoE 16B's published 2.8B does: 2.66B;
  // without the input embedding (102,400 x 2,048): 2.45B, DeepSeek-V2's rounded 2.4B.
  CHECK(w.active_parameters() - 102400.0 * 2048 == Approx(2.4e9).epsilon(0.03));
  // Attention of one layer by hand: query 2048 x 16 x 192; keys and values 2048 x 576 +
  // 512 + 512 x 16 x 256; output 16 x 128 x 2048 + 2048.
  CHECK(w.attention_parameters(1) == Approx(6291456.0 + (1179648 + 512 + 2097152) + (4194304 + 2048)));
  CHECK(std::string(model_flops_formula(w)).find("d_qk + d_v") != std::string::npos);
}

TEST_CASE("mla: a prediction runs and its model FLOPs count MLA's head widths", "[transformer][mla]") {
  const SystemSpec s = test::system("dgx_h100", "gpus_per_node", 2);
  TransformerSpec w = mla_gpt(2, 32);
  w.dp = 0;
  const auto p = predict_transformer(s, w, {}, 3);
  CHECK(p->timeline.iteration_time > 0);
  CHECK(std::isfinite(p->timeline.iteration_time));
  // Model FLOPs: 8 sequences x 32 tokens x (6 N + 6 L s n (d_qk + d_v)), n 4, d_qk 12, d_v 6.
  const double per_token = 6 * w.parameters() + 6.0 * 2 * 32 * 4 * (12 + 6);
  CHECK(workload_metrics(*p).model_flops_per_iteration == Approx(8 * 32 * per_token));
  // The same model without the latent (h 64 = 4 heads of 16): the attention term falls back
  // to Megatron's 12 L s h = 6 L s n (16 + 16) per token.
  TransformerSpec plain = w;
  plain.mla = MlaSpec{};
  const auto q = predict_transformer(s, plain, {}, 3);
  const double plain_per_token = 6 * plain.parameters() + 12.0 * 2 * 32 * 64;
  CHECK(workload_metrics(*q).model_flops_per_iteration == Approx(8 * 32 * plain_per_token));
  CHECK(plain_per_token - 6 * plain.parameters() > per_token - 6 * w.parameters());
}

TEST_CASE("mla: activation memory by hand", "[transformer][mla]") {
  // tp 2 with sequence parallelism, 2 layers, 1 micro-batch of 32 tokens in flight, bf16.
  // Per layer the formula's Q, K, V and projection input (2 sbh / t bytes each, 8 x 32 x 64 / 2
  // = 8,192 B) become 2 x 32 x 4 x (2 x 12 + 2 x 6) / 2 = 4,608 B, plus the latents and their
  // norms' outputs 4 x 32 x (32 + 16 + 4) = 6,656 B: +3,072 B per layer, +6,144 B for both.
  TransformerSpec plain = mla_gpt(2, 32);
  plain.mla = MlaSpec{};
  CHECK(test::first_stage_activation_change(mla_gpt(2, 32), plain, test::system("dgx_h100", "gpus_per_node", 2), 2) ==
        Approx(6144));
}

TEST_CASE("mla: refusals name the field", "[transformer][mla]") {
  const std::string base = R"({"schema": "perfcast.workload", "schema_version": "1.0", "name": "x", "model": "transformer",
    "hidden": 64, "heads": 4, "layers": 2, "seq_len": 32, "vocab": 100, "micro_batch": 1, "global_batch": 8, )";
  const std::string mla = R"("mla": {"kv_lora_rank": 16, "qk_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 6})";
  CHECK(test::workload_error(base + mla + "}") == "no error");
  CHECK(test::workload_error(base + R"("kv_heads": 2, )" + mla + "}").rfind("/kv_heads:", 0) == 0);
  CHECK(test::workload_error(base + R"("parallelism": {"cp": 2}, )" + mla + "}").rfind("/parallelism/cp:", 0) == 0);
  CHECK(test::workload_error(base + R"("sequence_parallel": true, "tp_comm_overlap": true, )" + mla + "}").rfind("/tp_comm_overlap:", 0) == 0);
  CHECK(test::workload_error(base + R"("mla": {"kv_lora_rank": 16, "qk_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 6, "rank": 3}})")
            .find("rank") != std::string::npos);
  CHECK(test::workload_error(base + R"("mla": {"qk_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 6}})").find("kv_lora_rank") !=
        std::string::npos);
}

}  // namespace perfcast_test_model_transformer_mla_test

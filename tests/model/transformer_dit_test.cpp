// Video diffusion transformers (architecture "dit"): hand-counted parameters, model FLOPs
// per sample (a small model and the Cosmos-1.0-Diffusion-7B preset), GEMM and attention
// shapes per TP rank, activation memory, a rule test, the plan search, and the refusals.
#include <cmath>

#include <catch2/catch.hpp>

#include "model/graph/transformer_builder.hpp"
#include "model/plan_search/plan_search.hpp"
#include "model/predict/predict.hpp"
#include "model/predict/runtime_profile.hpp"
#include "model/report/workload_metrics.hpp"
#include "tests/model/transformer_test_support.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_transformer_dit_test {

using namespace perfcast;

namespace {

std::string src(const std::string& rel) { return std::string(PERFCAST_SOURCE_DIR) + "/" + rel; }

/// hidden 64, 4 heads of 16, 2 layers, MLP 256; a latent video of 2 frames of 4 x 4 with 4
/// channels in patches of 2 x 2 x 1: 2 x 2 x 2 = 8 tokens per sample, 20 patch inputs
/// (4 channels + the padding mask, x 4 pixels), 16 patch outputs; 6 text tokens of 32;
/// AdaLN-LoRA rank 8.
TransformerSpec small_dit(int tp) {
  TransformerSpec w = test::gpt(64, 4, 2, 8);
  w.kind = TransformerKind::kDiffusion;
  w.vocab = 0;
  w.tied_embeddings = false;
  w.position = PositionEmbedding::kRope;
  w.dit = DitSpec{2, 4, 4, 4, 2, 1, true, 6, 32, 8};
  w.seq_len = w.dit.tokens();
  w.dropout = 0;
  w.tp = tp;
  w.dp = 1;
  w.sequence_parallel = tp > 1;
  return w;
}

const Op* op_named(const ExecutionGraph& g, const std::string& name) {
  for (const auto& op : g.ranks[0].ops)
    if (op.name == name) return &op;
  return nullptr;
}

std::vector<GemmDesc> gemms_of(const ExecutionGraph& g, const std::string& name) {
  std::vector<GemmDesc> out;
  if (const Op* op = op_named(g, name))
    for (const auto& k : op->kernels)
      if (const auto* gm = std::get_if<GemmDesc>(&k)) out.push_back(*gm);
  return out;
}



}  // namespace

TEST_CASE("dit: parameters by hand", "[transformer][dit]") {
  const TransformerSpec w = small_dit(1);
  CHECK(w.dit.tokens() == 8);
  CHECK(w.dit.patch_inputs() == 20);
  CHECK(w.dit.patch_outputs() == 16);
  // Per layer: QKV 64 x 192 + output 64 x 64 + cross-attention query and output 2 x 64 x 64
  // + MLP 2 x 64 x 256 = 57,344 applied to every token; text keys and values 2 x 32 x 64 =
  // 4,096; query / key norms 4 x 16 = 64; adaLN 64 x 8 + 8 x 576 = 5,120.
  CHECK(dit_layer_parameters(w, 1) == Approx(57344 + 4096 + 64 + 5120));
  // On one of 2 TP ranks the projections halve; norms and adaLN stay whole.
  CHECK(dit_layer_parameters(w, 2) == Approx((57344 + 4096) / 2.0 + 64 + 5120));
  // Patch embedding 20 x 64, timestep embedding 64 x 64 + 64 x 192, its norm 64.
  CHECK(dit_input_parameters(w) == Approx(1280 + 4096 + 12288 + 64));
  // Final adaLN 64 x 8 + 8 x 128, projection 64 x 16.
  CHECK(dit_output_parameters(w) == Approx(1536 + 1024));
  CHECK(w.parameters() == Approx(2 * 66624 + 17728 + 2560));
  CHECK(w.active_parameters() == Approx(w.parameters()));
  // Without LoRA the modulation is one 64 x 576 projection per layer, 64 x 128 at the end,
  // and the timestep embedding's second layer 64 x 64.
  TransformerSpec full = w;
  full.dit.adaln_lora_dim = 0;
  CHECK(dit_layer_parameters(full, 1) == Approx(57344 + 4096 + 64 + 64 * 576));
  CHECK(dit_input_parameters(full) == Approx(1280 + 4096 + 4096 + 64));
  CHECK(dit_output_parameters(full) == Approx(64 * 128 + 1024));
  // A decoder has none of them.
  CHECK(dit_layer_parameters(test::gpt(64, 4, 2, 8), 1) == 0);
}

TEST_CASE("dit: model FLOPs per sample by hand", "[transformer][dit]") {
  const TransformerSpec w = small_dit(1);
  // 6 x (per-token parameters 2 x 57,344 + 1,280 + 1,024 = 116,992 over 8 tokens; text
  // keys and values 2 x 4,096 over 6 text tokens; timestep 16,384 + adaLN 2 x 5,120 + 1,536
  // = 28,160 once) = 6 x 1,013,248 = 6,079,488; attention 12 x 2 x 64 x 8 x (8 + 6) = 172,032.
  CHECK(dit_model_flops_per_sample(w) == Approx(6079488.0 + 172032.0));
  // A prediction reports global batch x that, and the DiT formula.
  const SystemSpec s = test::system("dgx_h100", "gpus_per_node", 2);
  TransformerSpec two = small_dit(2);
  two.dp = 0;
  const auto p = predict_transformer(s, two, {}, 3);
  REQUIRE(p->timeline.iteration_time > 0);
  CHECK(std::isfinite(p->timeline.iteration_time));
  CHECK(workload_metrics(*p).model_flops_per_iteration == Approx(8 * (6079488.0 + 172032.0)));
  CHECK(std::string(model_flops_formula(two)).find("s_text") != std::string::npos);
}

TEST_CASE("dit: the Cosmos-1.0-Diffusion 7B and 14B presets counted by hand", "[transformer][dit]") {
  JsonDocument doc = load_json_file(src("configs/workloads/cosmos_diffusion_7b.json"));
  (void)take_runtime_name(doc);
  const TransformerSpec w = parse_transformer(doc);
  REQUIRE(w.diffusion());
  // 16 latent frames x 88 / 2 x 160 / 2.
  CHECK(w.seq_len == 56320);
  // Per layer: 4 h^2 (self-attention) + 2 h^2 (cross-attention query, output) + 8 h^2 (MLP)
  // = 234,881,024 at h = 4,096; text keys / values 2 x 1,024 x 4,096 = 8,388,608; norms 512;
  // adaLN 4,096 x 256 + 256 x 36,864 = 10,485,760: 253,755,904 x 28 = 7,105,165,312. Patch
  // embedding 68 x 4,096, timestep embedding 4 h^2, its norm 4,096: 67,391,488. Final layer
  // 4,096 x 256 + 256 x 8,192 + 4,096 x 64 = 3,407,872. Total 7,175,964,672: the "7B".
  CHECK(w.parameters() == Approx(7175964672.0));
  // FLOPs per sample: 6 x (6,577,209,344 per-token parameters x 56,320 + 234,881,024 text
  // parameters x 512 + 363,855,872 per-sample parameters) = 2,223,294,319,165,440; attention
  // 12 x 28 x 4,096 x 56,320 x (56,320 + 512) = 4,405,090,257,469,440.
  CHECK(dit_model_flops_per_sample(w) == Approx(2223294319165440.0 + 4405090257469440.0));

  // The 14B: 36 layers of 5,120, 40 heads. Per layer 14 h^2 = 367,001,600; text keys / values
  // 10,485,760; norms 512; adaLN 10 x 256 x 5,120 = 13,107,200: 390,595,072 x 36 =
  // 14,061,422,592. Patch embedding 348,160, timestep embedding 4 h^2 = 104,857,600, its norm
  // 5,120; final layer 1,310,720 + 2,621,440 + 327,680. Total 14,170,893,312: the "14B".
  JsonDocument doc14 = load_json_file(src("configs/workloads/cosmos_diffusion_14b.json"));
  (void)take_runtime_name(doc14);
  CHECK(parse_transformer(doc14).parameters() == Approx(14170893312.0));
}

TEST_CASE("dit: GEMM and attention shapes per TP rank", "[transformer][dit]") {
  const TransformerSpec w = small_dit(2);
  const ExecutionGraph g = build_transformer_graph(w, 2);
  auto check = [&](const std::string& op, std::size_t i, std::int64_t m, std::int64_t n, std::int64_t k) {
    const auto gs = gemms_of(g, op);
    REQUIRE(gs.size() > i);
    CHECK(gs[i].m == m);
    CHECK(gs[i].n == n);
    CHECK(gs[i].k == k);
    CHECK_FALSE(gs[i].bias_epilogue);
  };
  check("mb0.layer0.adaln", 0, 1, 8, 64);                      // per sample: 64 -> 8 -> 9 x 64
  check("mb0.layer0.adaln", 1, 1, 576, 8);
  check("mb0.layer0.self_attention.qkv", 0, 8, 96, 64);        // 2 heads x 3 x 16 per rank
  check("mb0.layer0.self_attention.dense", 0, 8, 64, 32);
  check("mb0.layer0.cross_attention.q", 0, 8, 32, 64);
  check("mb0.layer0.cross_attention.kv", 0, 6, 64, 32);        // 6 text tokens, 2 heads x (key + value) x 16
  check("mb0.layer0.mlp.fc1", 0, 8, 128, 64);
  check("mb0.layer0.mlp.fc2", 0, 8, 64, 128);
  check("mb0.patch_embedding", 0, 8, 64, 20);
  check("mb0.final_layer.linear", 0, 4, 16, 64);               // the rank's sequence-parallel half
  // Backward of the text keys / values: the weight gradient only.
  CHECK(gemms_of(g, "mb0.layer0.backward.cross_attention.kv").size() == 1);
  const AttentionDesc* self = test::attention_of(g, "mb0.layer0.self_attention.flash_attention");
  REQUIRE(self != nullptr);
  CHECK_FALSE(self->causal);
  CHECK(self->seq_q == 8);
  CHECK(self->seq_kv == 8);
  CHECK(self->heads == 2);
  const AttentionDesc* cross = test::attention_of(g, "mb0.layer0.cross_attention.flash_attention");
  REQUIRE(cross != nullptr);
  CHECK_FALSE(cross->causal);
  CHECK(cross->seq_q == 8);
  CHECK(cross->seq_kv == 6);
  // No vocabulary: no LM head, cross entropy or token embedding.
  for (const auto& op : g.ranks[0].ops) {
    CHECK(op.name.find("lm_head") == std::string::npos);
    CHECK(op.name.find("cross_entropy") == std::string::npos);
    CHECK(op.name.find("embedding_grads") == std::string::npos);
  }
}

TEST_CASE("dit: activation memory by hand", "[transformer][dit]") {
  // tp 2 with sequence parallelism, 2 layers, one micro-batch in flight, bf16; sbh = 8 x 64.
  // Replicated per layer 18 sbh = 9,216 B, halved by sequence parallelism: 4,608. Split
  // over TP: Q, K, V and output 12 sbh = 6,144, text keys / values 4 x 6 x 64 = 1,536, MLP
  // fc1 and GeLU outputs 16 sbh = 8,192: 15,872 / 2 = 7,936. Per layer 12,544 B, 25,088 B for
  // both; no logits.
  const SystemSpec s = test::system("dgx_h100", "gpus_per_node", 2);
  TransformerSpec w = small_dit(2);
  resolve_parallelism(w, 2);
  const auto m = estimate_transformer_memory(w, s);
  REQUIRE(m.size() == 2);
  CHECK(m[0].activations == Approx(25088));
  // Weights, gradient buffer (fp32) and Adam: 2 + 4 + 12 B per parameter on the rank.
  CHECK(m[0].dense == Approx(18.0 * transformer_rank_parameters(w, 0)));
  CHECK(transformer_rank_parameters(w, 0) == Approx(2 * dit_layer_parameters(w, 2) + 17728 + 2560));
}

TEST_CASE("dit: a longer video never predicts faster", "[transformer][dit][rule]") {
  const SystemSpec s = test::system("dgx_h100", "gpus_per_node", 2);
  Seconds last = 0;
  for (const std::int64_t frames : {2, 4, 8, 16}) {
    TransformerSpec w = small_dit(2);
    w.hidden = 256;
    w.ffn_hidden = 1024;
    w.dit.latent_frames = frames;
    w.dit.latent_height = w.dit.latent_width = 32;
    w.seq_len = w.dit.tokens();
    w.dp = 0;
    const auto p = predict_transformer(s, w, {}, 3);
    CHECK(p->timeline.iteration_time >= last);
    last = p->timeline.iteration_time;
  }
}

TEST_CASE("dit: plan searches the preset's parallelism", "[transformer][dit][plan]") {
  PlanSearchRequest r;
  r.base.system = src("configs/systems/dgx_h100.json");
  r.base.workload = src("configs/workloads/cosmos_diffusion_7b.json");
  // A smaller video and model keep the test short: 8 frames of 16 x 16 (512 tokens), 4 layers.
  r.base.overrides = {"workload.layers=4", "workload.dit.latent_frames=8", "workload.dit.latent_height=16",
                      "workload.dit.latent_width=16", "workload.parallelism.tp=4"};
  r.gpus = 4;
  r.space.micro_batches = {1};
  r.space.context_parallel = {1, 2};
  r.threads = 2;
  const PlanSearchResult res = search_parallel_plans(r);
  REQUIRE_FALSE(res.ranked.empty());
  bool with_cp = false;
  for (const auto& p : res.ranked) {
    CHECK(p.iteration_time > 0);
    CHECK(p.metrics.mfu > 0);
    CHECK(p.metrics.mfu < 1);
    with_cp = with_cp || p.choice.cp == 2;
  }
  CHECK(with_cp);
  // The file's tp 4 with full recompute is ranked: its distributed optimizer has nothing to
  // shard at dp 1 and matches the space's choice without it.
  CHECK(res.asked_rank >= 0);
}

TEST_CASE("dit: refusals name the field", "[transformer][dit]") {
  const std::string base = R"({"schema": "perfcast.workload", "schema_version": "1.0", "name": "x", "model": "transformer",
    "architecture": "dit", "hidden": 64, "heads": 4, "layers": 2, "micro_batch": 1, "global_batch": 8, )";
  const std::string dit = R"("dit": {"latent_frames": 2, "latent_height": 4, "latent_width": 4})";
  CHECK(test::workload_error(base + dit + "}") == "no error");
  CHECK(test::workload_error(base + R"("seq_len": 8, )" + dit + "}") == "no error");
  CHECK(test::workload_error(base + R"("seq_len": 9, )" + dit + "}").rfind("/seq_len:", 0) == 0);
  CHECK(test::workload_error(base + R"("vocab": 100, )" + dit + "}").rfind("/vocab:", 0) == 0);
  CHECK(test::workload_error(base + R"("tied_embeddings": true, )" + dit + "}").rfind("/tied_embeddings:", 0) == 0);
  CHECK(test::workload_error(base + R"("position_embedding": "learned", )" + dit + "}").rfind("/position_embedding:", 0) == 0);
  CHECK(test::workload_error(base + R"("moe": {"experts": 4}, )" + dit + "}").rfind("/moe:", 0) == 0);
  CHECK(test::workload_error(base + R"("dropout": 0.1, )" + dit + "}").rfind("/dropout:", 0) == 0);
  CHECK(test::workload_error(base + R"("dropout": 0, )" + dit + "}") == "no error");
  CHECK(test::workload_error(base + R"("seq_len": 8)" + "}").rfind("/dit:", 0) == 0);
  const std::string odd = R"("dit": {"latent_frames": 2, "latent_height": 5, "latent_width": 4})";
  CHECK(test::workload_error(base + odd + "}").rfind("/dit/patch_spatial:", 0) == 0);
  CHECK(test::workload_error(base + R"("dit": {"latent_frames": 3, "latent_height": 4, "latent_width": 4, "patch_temporal": 2})" + "}")
            .rfind("/dit/patch_temporal:", 0) == 0);
  CHECK(test::workload_error(base + R"("dit": {"latent_frames": 2, "latent_height": 4, "latent_width": 4, "frames": 3})" + "}").find("frames") !=
        std::string::npos);
  // The "dit" object belongs to the diffusion architecture only.
  const std::string gpt = R"({"schema": "perfcast.workload", "schema_version": "1.0", "name": "x", "model": "transformer",
    "hidden": 64, "heads": 4, "layers": 2, "seq_len": 8, "vocab": 100, "micro_batch": 1, "global_batch": 8, )";
  CHECK(test::workload_error(gpt + dit + "}").rfind("/dit:", 0) == 0);
}

}  // namespace perfcast_test_model_transformer_dit_test

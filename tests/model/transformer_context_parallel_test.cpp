// Context parallelism (parallelism.cp): hand-worked attention FLOPs and ring bytes, the rank
// layout and gradient group, activation memory, symmetric simulation and config errors.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "model/graph/transformer_builder.hpp"
#include "model/predict/predict.hpp"
#include "tests/model/transformer_test_support.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_transformer_context_parallel_test {

using namespace perfcast;

namespace {

TransformerSpec cp_gpt(int tp, int cp, int pp, int dp, std::int64_t seq) {
  TransformerSpec w = test::gpt(2048, 16, 4, seq);
  w.kv_heads = 8;
  w.vocab = 32000;
  w.global_batch = 4 * dp;
  w.tp = tp;
  w.cp = cp;
  w.pp = pp;
  w.dp = dp;
  w.symmetric_simulation = false;
  w.pipeline_host_blocking = false;
  return w;
}

SystemSpec dgx_h100(int gpus) { return test::system("dgx_h100", "gpus_per_node", gpus); }

/// Attention FLOPs of an attention kernel: 4 b h sq skv d (QK^T and PV), halved under a causal mask.
double attention_flops(const AttentionDesc& a) {
  return 4.0 * a.batch * a.heads * a.seq_q * a.seq_kv * a.head_dim * (a.causal ? 0.5 : 1.0);
}

}  // namespace

TEST_CASE("cp: each rank does 1 / cp of the causal attention, in cp steps", "[transformer][cp]") {
  const std::int64_t s = 8192;
  for (int cp : {2, 4}) {
    CAPTURE(cp);
    const ExecutionGraph g = build_transformer_graph(cp_gpt(1, cp, 1, 1, s), cp);
    double flops = 0;
    int steps = 0;
    for (const Op& op : g.ranks[0].ops) {
      if (op.phase != Phase::kForward || op.name.rfind("mb0.layer0.", 0) != 0) continue;
      for (const auto& k : op.kernels)
        if (const auto* a = std::get_if<AttentionDesc>(&k)) flops += attention_flops(*a), ++steps;
    }
    CHECK(steps == cp);
    // Full causal attention of one layer: 4 x 16 heads x 8192^2 x 128 / 2.
    CHECK(flops == Approx(4.0 * 16 * s * s * 128 / 2 / cp));
  }
}

TEST_CASE("cp: keys and values go cp - 1 hops around the ring per layer, twice the bytes backward", "[transformer][cp]") {
  const int cp = 4;
  const std::int64_t s = 8192;
  const ExecutionGraph g = build_transformer_graph(cp_gpt(2, cp, 1, 1, s), 2 * cp);
  double forward = 0, backward = 0;
  int sends = 0;
  for (const Op& op : g.ranks[0].ops) {
    if (!op.concurrent || op.name.find("mb0.layer1.") != 0 || op.name.find("send_next") == std::string::npos) continue;
    const auto& c = g.collectives[static_cast<std::size_t>(*op.collective)];
    const auto& members = g.groups[static_cast<std::size_t>(c.group)].ranks;
    // tp 2: rank 0's next CP rank is rank 2 (tp fastest, then cp).
    CHECK(members == std::vector<int>{0, 2});
    (op.phase == Phase::kForward ? forward : backward) += c.desc.pair_bytes[1];
    ++sends;
  }
  CHECK(sends == 2 * (cp - 1));
  // K and V of this rank's 2048 tokens, 8 kv heads / tp 2 = 4 heads of 128, bf16: 2 x 2048 x 4 x 128 x 2 B.
  const double hop = 2.0 * (s / cp) * 4 * 128 * 2;
  CHECK(forward == Approx((cp - 1) * hop));
  CHECK(backward == Approx(2 * (cp - 1) * hop));
}

TEST_CASE("cp: gradients are reduced over dp x cp; the sequence share sets the tokens", "[transformer][cp]") {
  const ExecutionGraph g = build_transformer_graph(cp_gpt(2, 2, 1, 2, 4096), 8);
  bool found = false;
  for (const Op& op : g.ranks[0].ops) {
    if (op.name != "grads.all_reduce") continue;
    const auto& c = g.collectives[static_cast<std::size_t>(*op.collective)];
    // tp index 0 over cp 2 x dp 2: ranks 0, 2 (cp), 4, 6 (dp).
    CHECK(g.groups[static_cast<std::size_t>(c.group)].ranks == std::vector<int>{0, 2, 4, 6});
    found = true;
  }
  CHECK(found);
  // The QKV GEMM runs on this rank's 2048 of the 4096 tokens.
  for (const Op& op : g.ranks[0].ops) {
    if (op.name != "mb0.layer0.qkv") continue;
    CHECK(std::get<GemmDesc>(op.kernels.back()).m == 2048);
  }
}

TEST_CASE("cp: activations shrink with the sequence share; the ring does not deadlock", "[transformer][cp][memory]") {
  const SystemSpec s8 = dgx_h100(8);
  TransformerSpec one = cp_gpt(2, 1, 2, 2, 16384);
  TransformerSpec four = cp_gpt(2, 4, 1, 1, 16384);
  resolve_parallelism(one, 8);
  resolve_parallelism(four, 8);
  // Per layer and micro-batch, activations are linear in the tokens held (flash attention).
  TransformerSpec two = cp_gpt(2, 2, 2, 1, 16384);
  resolve_parallelism(two, 8);
  const double a1 = estimate_transformer_memory(one, s8)[0].activations;
  const double a2 = estimate_transformer_memory(two, s8)[0].activations;
  CHECK(a2 == Approx(a1 / 2).epsilon(0.02));  // the LM head's logits of the last stage aside
  for (auto w : {two, four}) {
    CHECK(predict_transformer(s8, w)->timeline.iteration_time > 0);
    TransformerSpec mirrored = w;
    mirrored.symmetric_simulation = true;
    CHECK(predict_transformer(s8, mirrored)->timeline.iteration_time == predict_transformer(s8, w)->timeline.iteration_time);
  }
}

TEST_CASE("cp: config errors name the path", "[transformer][cp][config]") {
  const auto message = test::parallelism_error;
  CHECK(message(cp_gpt(1, 4, 1, 1, 4100), 4) == "/parallelism/cp: seq_len 4100 does not split into 2 x cp = 8 chunks");
  TransformerSpec unfused = cp_gpt(1, 2, 1, 1, 4096);
  unfused.attention = AttentionImpl::kUnfused;
  CHECK(message(unfused, 2) == "/parallelism/cp: context parallelism runs Transformer Engine's fused attention: set \"attention\": \"flash\"");
  TransformerSpec auto_dp = cp_gpt(2, 2, 1, 0, 4096);
  CHECK(message(auto_dp, 6) == "/parallelism: tp 2 x cp 2 x pp 1 = 4 does not divide the system's 6 GPUs (dp \"auto\")");
}

}  // namespace perfcast_test_model_transformer_context_parallel_test

// Transformer workloads: hand-worked FLOPs and GEMM shapes, the 1F1B order, a small
// pipeline simulation, config errors, a rule test and the vTrain rows (skipped without data).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "model/predict/predict.hpp"
#include "model/sim/annotate.hpp"
#include "topology/collective_calibration.hpp"
#include "model/graph/transformer_builder.hpp"
#include "predictors/spec_predictors.hpp"
#include "tests/model/transformer_test_support.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_transformer_builder_test {

using namespace perfcast;

namespace {

TransformerSpec small_gpt(int tp, int pp, int dp, std::int64_t global_batch = 8) {
  TransformerSpec w = test::gpt(1024, 16, 4, 1024);
  w.precision = DType::kFp16;
  w.global_batch = global_batch;
  w.tp = tp;
  w.pp = pp;
  w.dp = dp;
  return w;
}

double gemm_flops(const ExecutionGraph& g, int rank, const std::string& op_suffix) {
  for (const auto& op : g.ranks[static_cast<std::size_t>(rank)].ops) {
    if (op.name.size() >= op_suffix.size() && op.name.compare(op.name.size() - op_suffix.size(), op_suffix.size(), op_suffix) == 0) {
      double f = 0;
      for (const auto& k : op.kernels)
        if (const auto* gm = std::get_if<GemmDesc>(&k)) f += 2.0 * gm->m * gm->n * gm->k * gm->batch;
      return f;
    }
  }
  return -1;
}

std::vector<std::string> p2p_names(const ExecutionGraph& g, int rank) {
  std::vector<std::string> out;
  for (const auto& op : g.ranks[static_cast<std::size_t>(rank)].ops) {
    if (op.collective && g.collectives[static_cast<std::size_t>(*op.collective)].desc.kind == CollectiveKind::kAllToAllV) {
      const auto dot = op.name.find('.');
      out.push_back(dot == std::string::npos ? op.name : op.name.substr(dot + 1));
    }
  }
  return out;
}

SystemSpec dgx_a100(int gpus) { return test::system("dgx_a100", "gpus_per_node", gpus); }

/// small_gpt at tp 2 with sequence parallelism and Transformer Engine's TP communication
/// overlap, 2 sequences.
ExecutionGraph tp_overlap_graph() {
  TransformerSpec w = small_gpt(2, 1, 1, 2);
  w.sequence_parallel = true;
  w.tp_comm_overlap = true;
  return build_transformer_graph(w, 2);
}

/// Index of rank 0's op `name` (fails the test when absent).
std::size_t op_index(const ExecutionGraph& g, const std::string& name) {
  const auto& ops = g.ranks[0].ops;
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (ops[i].name == name) return i;
  FAIL("no op " << name);
  return 0;
}

/// Sum of the kernel times of rank 0's op `i`, s.
double kernel_time(const TimedGraph& t, std::size_t i) {
  double sum = 0;
  for (const auto& k : t.ops[0][i].kernels) sum += k.time;
  return sum;
}

}  // namespace

TEST_CASE("one layer's forward GEMM FLOPs match 24 T h^2 + 4 T s h over tp", "[transformer]") {
  // Hand-worked (Narayanan et al. 2021, eq. 2 per layer): QKV 6Th^2, projection 2Th^2,
  // MLP 16Th^2 (ffn 4h), attention scores and context 2 x 2 T s h (unfused, not halved).
  for (int tp : {1, 2, 4}) {
    TransformerSpec w = small_gpt(tp, 1, 1);
    w.attention = AttentionImpl::kUnfused;
    w.dp = 1;
    const ExecutionGraph g = build_transformer_graph(w, tp);
    const double T = 1024, h = 1024, s = 1024;
    double f = 0;
    for (const char* n : {"layer0.qkv", "layer0.core_attention", "layer0.attention.dense", "layer0.mlp.fc1", "layer0.mlp.fc2"}) {
      const double x = gemm_flops(g, 0, n);
      REQUIRE(x > 0);
      f += x;
    }
    CHECK(f == Approx((24 * T * h * h + 4 * T * s * h) / tp));
    // GEMM shapes per TP degree: QKV output 3h/tp, fc1 output 4h/tp.
    CHECK(gemm_flops(g, 0, "layer0.qkv") == Approx(2 * T * (3 * h / tp) * h));
    CHECK(gemm_flops(g, 0, "layer0.mlp.fc2") == Approx(2 * T * h * (4 * h / tp)));
  }
}

TEST_CASE("flash attention FLOPs halve under a causal mask; backward is 2.5x", "[transformer]") {
  GpuSpec gpu = dgx_a100(1).gpu;
  AttentionDesc a{2, 16, 16, 1024, 1024, 64, false, DType::kFp16, AttentionPass::kForward};
  const Estimate full = predict_attention(a, gpu);
  CHECK(full.flops == Approx(4.0 * 2 * 16 * 1024 * 1024 * 64));
  a.causal = true;
  CHECK(predict_attention(a, gpu).flops == Approx(full.flops / 2));
  a.pass = AttentionPass::kBackward;
  CHECK(predict_attention(a, gpu).flops == Approx(2.5 * full.flops / 2));
  CHECK(predict_attention(a, gpu).time > 0);
}

TEST_CASE("attention_kernel chooses the fused-attention kernel of every layer", "[transformer]") {
  JsonDocument doc = load_json_file(std::string(PERFCAST_SOURCE_DIR) + "/configs/workloads/gpt3_1.3b.json");
  doc.root["attention_kernel"] = "cudnn";
  TransformerSpec w = parse_transformer(doc);
  CHECK(w.attention_kernel == AttentionKernel::kCudnn);
  resolve_parallelism(w, 8);
  int cudnn = 0, other = 0;
  const ExecutionGraph g = build_transformer_graph(w, 8);
  for (const auto& op : g.ranks[0].ops)
    for (const auto& k : op.kernels)
      if (const auto* a = std::get_if<AttentionDesc>(&k)) (a->impl == AttentionKernel::kCudnn ? cudnn : other)++;
  CHECK(cudnn > 0);
  CHECK(other == 0);
  doc.root["attention"] = "unfused";
  CHECK_THROWS_AS(parse_transformer(doc), ConfigError);
}

TEST_CASE("the unfused softmax falls back to fp32 PyTorch ops unless micro-batch x heads per rank is a multiple of 4",
          "[transformer]") {
  // Megatron-DeepSpeed megatron/model/fused_softmax.py: the fused kernel needs
  // (b x heads/tp) % 4 == 0 (and 16 < s <= 2048, s % 4 == 0, 16-bit input); else float(),
  // * scale, masked_fill_, Softmax, half(): four more framework ops forward and backward.
  auto layer0 = [](const ExecutionGraph& g, const std::string& part, double& score_bytes, double& attention_flops) {
    int ops = 0;
    score_bytes = attention_flops = 0;
    for (const auto& op : g.ranks[0].ops) {
      if (op.name.rfind("mb0.layer0." + part, 0) != 0 || op.name.find("core_attention") == std::string::npos) continue;
      ++ops;
      for (const auto& k : op.kernels) {
        if (const auto* e = std::get_if<ElementwiseDesc>(&k)) score_bytes += e->bytes_per_element;
        if (const auto* gm = std::get_if<GemmDesc>(&k)) attention_flops += 2.0 * gm->m * gm->n * gm->k * gm->batch;
      }
    }
    return ops;
  };
  auto graph = [](int tp, std::int64_t mb) {
    TransformerSpec w = small_gpt(tp, 1, 1, 8);
    w.attention = AttentionImpl::kUnfused;
    w.micro_batch = mb;
    return build_transformer_graph(w, tp);
  };
  double fused_bytes = 0, fused_flops = 0, fallback_bytes = 0, fallback_flops = 0, bwd_bytes = 0, bwd_flops = 0;
  // 16 heads: tp 8, micro-batch 1 -> 2 attention batches per rank (fallback); micro-batch 2 -> 4 (fused).
  CHECK(layer0(graph(8, 2), "core_attention", fused_bytes, fused_flops) == 1);
  CHECK(layer0(graph(8, 1), "core_attention", fallback_bytes, fallback_flops) == 5);
  CHECK(layer0(graph(4, 1), "core_attention", fused_bytes, fused_flops) == 1);  // 4 batches: fused
  // Forward, per score element: softmax (2+2 B) + dropout (2+2+1 B) fused; the fallback
  // casts to fp32 (2+4), scales (4+4), masks (4+1+4), softmaxes (4+4), casts back (4+2), dropout (5).
  CHECK(fused_bytes == Approx(4 + 5));
  CHECK(fallback_bytes == Approx(6 + 8 + 9 + 8 + 6 + 5));
  // The attention GEMMs do not change: scores and context, 2 x 2 b s^2 d heads/tp.
  CHECK(fallback_flops == Approx(2 * 2.0 * 1 * 1024 * 1024 * 64 * 2));
  // Backward: 5 ops (fallback) with the same 4 batched GEMMs (2x the forward's).
  CHECK(layer0(graph(8, 1), "backward.core_attention", bwd_bytes, bwd_flops) == 5);
  CHECK(bwd_flops == Approx(2 * fallback_flops));
  CHECK(bwd_bytes == Approx(5 + 6 + 12 + 9 + 8 + 6));
}

TEST_CASE("1F1B issues Megatron's point-to-point order", "[transformer]") {
  SECTION("P = 2, M = 4") {
    const ExecutionGraph g = build_transformer_graph(small_gpt(1, 2, 1, 4), 2);
    // First stage: 1 warmup forward, 3 steady pairs, 1 cooldown backward.
    CHECK(p2p_names(g, 0) == std::vector<std::string>{"send_forward", "send_forward_recv_backward", "send_forward_recv_backward",
                                                      "send_forward_recv_backward", "recv_backward"});
    // Last stage: no warmup.
    CHECK(p2p_names(g, 1) == std::vector<std::string>{"recv_forward", "send_backward_recv_forward", "send_backward_recv_forward",
                                                      "send_backward_recv_forward", "send_backward"});
  }
  SECTION("P = 4, M = 8: warmup counts 3, 2, 1, 0") {
    const ExecutionGraph g = build_transformer_graph(small_gpt(1, 4, 1, 8), 4);
    for (int s = 0; s < 4; ++s) {
      const auto names = p2p_names(g, s);
      int warm = 0;
      for (const auto& n : names) warm += n == "send_forward";
      CHECK(warm == 3 - s);
    }
  }
}

TEST_CASE("the host blocks on pipeline transfers and on get_batch's sizes copy, nowhere else", "[transformer]") {
  // Megatron's p2p_communication._communicate ends in torch.cuda.synchronize(); get_batch's
  // broadcast_data reads the key sizes back with sizes_cuda.cpu() once per micro-batch.
  TransformerSpec w = small_gpt(2, 2, 1, 4);
  w.symmetric_simulation = false;  // every rank's program, to count them all
  const ExecutionGraph g = build_transformer_graph(w, 4);
  int p2p_count = 0, get_batch_syncs = 0;
  for (const auto& prog : g.ranks) {
    for (const auto& op : prog.ops) {
      const bool p2p = op.collective && g.collectives[static_cast<std::size_t>(*op.collective)].desc.kind == CollectiveKind::kAllToAllV;
      const bool sizes = op.name.find("get_batch.sizes_to_cpu") != std::string::npos;
      CHECK(op.host_waits == (p2p || sizes));
      p2p_count += p2p;
      get_batch_syncs += sizes;
    }
  }
  CHECK(p2p_count == 4 * 5);        // 5 transfers per rank (the P = 2, M = 4 order above), 4 ranks
  CHECK(get_batch_syncs == 4 * 4);  // every rank of every stage loads each of the 4 micro-batches
}

TEST_CASE("a small pipeline simulates without deadlock and the bubble costs time", "[transformer]") {
  for (int pp : {2, 4}) {
    auto p = predict_transformer(dgx_a100(8), small_gpt(2, pp, 8 / (2 * pp), 16));
    CHECK(p->timeline.iteration_time > 0);
  }
  // 8 GPUs as pp 4 x tp 2 with more layers per stage.
  TransformerSpec w = small_gpt(2, 4, 1, 8);
  w.layers = 8;
  w.recompute = Recompute::kFull;
  w.sequence_parallel = true;
  w.distributed_optimizer = true;
  CHECK(predict_transformer(dgx_a100(8), w)->timeline.iteration_time > 0);
}

TEST_CASE("more layers are never faster", "[transformer][rule]") {
  double prev = 0;
  for (int layers : {2, 4, 8, 16}) {
    TransformerSpec w = small_gpt(2, 2, 2, 16);
    w.layers = layers;
    const double t = predict_transformer(dgx_a100(8), w)->timeline.iteration_time;
    CHECK(t > prev);
    prev = t;
  }
}

TEST_CASE("transformer config errors name the file and path", "[transformer][config]") {
  const std::string root = PERFCAST_SOURCE_DIR;
  SECTION("tp x pp x dp must equal the GPU count") {
    TransformerSpec w = small_gpt(2, 2, 4);
    try {
      resolve_parallelism(w, 8);
      FAIL("no error");
    } catch (const ConfigError& e) {
      CHECK(e.pointer() == "/parallelism");
      CHECK(std::string(e.what()).find("16 GPUs") != std::string::npos);
    }
    TransformerSpec a = small_gpt(2, 2, 0);
    resolve_parallelism(a, 8);
    CHECK(a.dp == 2);
  }
  SECTION("unknown key with a suggestion") {
    JsonDocument doc = load_json_file(root + "/configs/workloads/gpt2.json");
    doc.root["hiden"] = 5;
    try {
      (void)parse_transformer(doc);
      FAIL("no error");
    } catch (const ConfigError& e) {
      CHECK(std::string(e.what()).find("hidden") != std::string::npos);
    }
  }
  SECTION("the interleaved schedule without virtual stages is rejected clearly") {
    JsonDocument doc = load_json_file(root + "/configs/workloads/gpt2.json");
    doc.root["schedule"] = "interleaved";
    try {
      (void)parse_transformer(doc);
      FAIL("no error");
    } catch (const ConfigError& e) {
      CHECK(e.pointer() == "/schedule");
      CHECK(std::string(e.what()).find("\"vp\": 2 or more") != std::string::npos);
    }
  }
  SECTION("predict on a system whose GPU count does not fit the preset") {
    PredictRequest r;
    r.system = root + "/configs/systems/h100_sxm.json";
    r.workload = root + "/configs/workloads/gpt3_13b.json";
    CHECK_THROWS_AS(predict(r), ConfigError);
  }
}

TEST_CASE("every transformer preset predicts on every shipped system", "[transformer][presets]") {
  const std::string root = PERFCAST_SOURCE_DIR;
  for (const char* s : {"h100_sxm", "h200", "a100_sxm", "dgx_h100", "dgx_a100", "hgx_h200", "pcie_8gpu", "cluster_4x_dgx_h100"}) {
    for (const char* w : {"bert_base", "bert_large", "gpt2", "gpt3_1.3b", "gpt3_6.7b", "gpt3_13b", "gpt3_175b", "llama3_8b", "llama3_70b"}) {
      INFO(std::string(s) + " x " + w);
      PredictRequest r;
      r.system = root + "/configs/systems/" + s + ".json";
      r.workload = root + "/configs/workloads/" + w + ".json";
      const bool single = std::string(s) == "h100_sxm" || std::string(s) == "h200" || std::string(s) == "a100_sxm";
      if (single) r.overrides = {"workload.parallelism.tp=1", "workload.parallelism.pp=1"};
      const auto p = predict(r);
      CHECK(p->timeline.iteration_time > 0);
    }
  }
}

TEST_CASE("vTrain rows predict (data/vtrain-a100-gpt)", "[transformer][vtrain]") {
  const std::filesystem::path csv = std::filesystem::path(PERFCAST_SOURCE_DIR) / "data/vtrain-a100-gpt/ground_truth_single.csv";
  REQUIRE(std::filesystem::exists(csv));
  // Row 1 of the file: 2 GPUs, global 16, micro 8, h 1024, 16 heads, 24 layers, seq 1024, pp 2.
  TransformerSpec w = small_gpt(1, 2, 1, 16);
  w.micro_batch = 8;
  w.layers = 24;
  w.recompute = Recompute::kFull;
  w.attention = AttentionImpl::kUnfused;
  w.grad_reduce_dtype = DType::kFp16;
  const double ms = predict_transformer(dgx_a100(2), w, {}, 2)->timeline.iteration_time * 1e3;
  // Measured 372.16 ms; the spec-derived prediction is within 25% on this compute-bound row.
  CHECK(std::fabs(ms / 372.160408 - 1) < 0.25);
}

TEST_CASE("fp8 as Transformer Engine runs it: FP8 linear GEMMs, bf16 attention, LM head and communication", "[transformer][fp8]") {
  TransformerSpec bf16 = small_gpt(2, 1, 1);
  bf16.precision = DType::kBf16;
  TransformerSpec fp8 = bf16;
  fp8.precision = DType::kFp8;
  const ExecutionGraph gb = build_transformer_graph(bf16, 2);
  const ExecutionGraph g8 = build_transformer_graph(fp8, 2);
  int fp8_gemms = 0, bf16_gemms = 0, casts_forward = 0, casts_backward = 0, attention_bf16 = 0;
  double cast_bytes = 0;
  for (const auto& op : g8.ranks[0].ops) {
    for (const auto& k : op.kernels) {
      if (const auto* gm = std::get_if<GemmDesc>(&k)) (gm->dtype == DType::kFp8 ? fp8_gemms : bf16_gemms)++;
      if (const auto* a = std::get_if<AttentionDesc>(&k)) attention_bf16 += a->dtype == DType::kBf16;
      if (const auto* e = std::get_if<ElementwiseDesc>(&k); e && e->op == "fp8_cast_transpose") {
        (op.phase == Phase::kForward ? casts_forward : casts_backward)++;
        cast_bytes += e->bytes_per_element * double(e->elements);
      }
    }
  }
  // 8 micro-batches x 4 layers; forward: QKV, attention output, fc1, fc2 (4 GEMMs, 4 casts);
  // backward: dgrad + wgrad of each (8 GEMMs, 4 casts of the output gradient).
  const int layer_passes = 8 * 4;
  CHECK(fp8_gemms == layer_passes * 12);
  CHECK(casts_forward == layer_passes * 4);
  CHECK(casts_backward == layer_passes * 4);
  // The four forward linears are FP8 module calls (the host pays fp8_module_overhead for
  // each); backward ops and every op of the bf16 graph are not.
  const auto module_calls = [](const ExecutionGraph& g) {
    return std::count_if(g.ranks[0].ops.begin(), g.ranks[0].ops.end(), [](const Op& op) { return op.fp8_module; });
  };
  CHECK(module_calls(g8) == layer_passes * 4);
  CHECK(module_calls(gb) == 0);
  for (const auto& op : g8.ranks[0].ops)
    if (op.fp8_module) CHECK(op.phase == Phase::kForward);
  CHECK(attention_bf16 == layer_passes * 2);  // flash forward and backward stay bf16
  CHECK(bf16_gemms == 8 * 3);                 // the LM head: forward, dgrad, wgrad per micro-batch
  // Casts per forward layer at tp 2, 1024 tokens, h 1024, ffn 4096: inputs of QKV (T h), attention
  // output (T h / 2), fc1 (T h), fc2 (T ffn / 2) elements, 4 B each.
  const double T = 1024, h = 1024;
  const double forward_elements = T * h + T * h / 2 + T * h + T * 4096 / 2;
  const double backward_elements = T * h + T * 4096 / 2 + T * h + T * 3 * h / 2;  // grads of fc2, fc1, dense, qkv outputs
  CHECK(cast_bytes == Approx(4 * layer_passes * (forward_elements + backward_elements)));
  // Communication is unchanged: same collectives, same bytes.
  REQUIRE(g8.collectives.size() == gb.collectives.size());
  for (std::size_t i = 0; i < g8.collectives.size(); ++i) CHECK(g8.collectives[i].desc.bytes == gb.collectives[i].desc.bytes);
  // Memory: bf16 weights plus an FP8 copy and its transpose (2 B per parameter). Activations:
  // Transformer Engine keeps the FP8 casts of the GEMM inputs, per layer (sbh = 1024 tokens x
  // h 1024, tp 2 without sequence parallelism): the QKV and fc1 inputs 1 B instead of 2 on
  // every TP rank (-2 sbh), the projection's FP8 copy of the attention output beside flash
  // attention's bf16 one (+sbh / 2) and fc2's input (ffn 4h, split: -4 sbh / 2), -3.5 sbh in
  // all; 4 layers, one micro-batch in flight.
  SystemSpec s = dgx_a100(2);
  const auto mb = estimate_transformer_memory(bf16, s), m8 = estimate_transformer_memory(fp8, s);
  CHECK(m8[0].dense - mb[0].dense == Approx(2.0 * transformer_rank_parameters(bf16, 0)));
  const double sbh = 1024.0 * 1024.0;
  CHECK(mb[0].activations - m8[0].activations == Approx(4 * 3.5 * sbh));
}

TEST_CASE("pipeline transfers block the host unless the runtime orders them on streams", "[transformer]") {
  TransformerSpec w = small_gpt(1, 2, 1);
  auto p2p_host_waits = [](const ExecutionGraph& g) {
    int waits = 0, transfers = 0;
    for (const auto& op : g.ranks[0].ops) {
      if (!op.collective || g.collectives[static_cast<std::size_t>(*op.collective)].desc.kind != CollectiveKind::kAllToAllV) continue;
      ++transfers;
      waits += op.host_waits;
    }
    return std::pair{waits, transfers};
  };
  const auto [blocking_waits, blocking_transfers] = p2p_host_waits(build_transformer_graph(w, 2));
  // Stage 0 of 2, 8 micro-batches, 1F1B: warmup 1 (send_forward), steady 7
  // (send_forward_recv_backward, one op each), cooldown 1 (recv_backward).
  CHECK(blocking_transfers == 9);
  CHECK(blocking_waits == blocking_transfers);
  w.pipeline_host_blocking = false;
  const auto [ordered_waits, ordered_transfers] = p2p_host_waits(build_transformer_graph(w, 2));
  CHECK(ordered_transfers == blocking_transfers);
  CHECK(ordered_waits == 0);
}

TEST_CASE("overlap_grad_reduce: one DP bucket per layer during the last backward, same bytes, never slower", "[transformer]") {
  TransformerSpec w = small_gpt(1, 1, 2);
  w.grad_reduce_dtype = DType::kFp32;
  w.overlap_grad_reduce = true;
  const ExecutionGraph g = build_transformer_graph(w, 2);
  double bytes = 0;
  int buckets = 0, rest = 0, blocking = 0;
  for (const auto& op : g.ranks[0].ops) {
    if (!op.collective) continue;
    const auto& c = g.collectives[static_cast<std::size_t>(*op.collective)];
    if (op.name.find("grads.") == std::string::npos) continue;
    bytes += c.desc.bytes;
    buckets += op.name.find("grads.bucket") != std::string::npos;
    rest += op.name.find(".rest") != std::string::npos;
    blocking += op.host_waits;
    // Buckets belong to the last micro-batch (global batch 8, dp 2: micro-batches 0..3).
    if (op.name.find("grads.bucket") != std::string::npos) CHECK(op.name.rfind("mb3.", 0) == 0);
  }
  CHECK(buckets == 4);  // 4 layers on the one stage
  CHECK(rest == 1);     // embedding, final norm: after the backward
  CHECK(blocking == 0);
  CHECK(bytes == Approx(4.0 * transformer_rank_parameters(w, 0)));  // fp32 gradients of every parameter, once

  // The same job predicted with and without the overlap: never slower with it.
  auto time_of = [](bool overlap) {
    JsonDocument s = load_json_file(std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/dgx_h100.json");
    JsonDocument wl = load_json_file(std::string(PERFCAST_SOURCE_DIR) + "/configs/workloads/gpt3_1.3b.json");
    return predict_documents(std::move(s), std::move(wl), std::nullopt,
                             {"system.nodes=2", fmt::format("workload.overlap_grad_reduce={}", overlap)}, 3)
        ->timeline.iteration_time;
  };
  const double serial = time_of(false), overlapped = time_of(true);
  CHECK(overlapped <= serial);
  CHECK(overlapped < serial * 0.99);  // 2 nodes: the DP all-reduce is long enough to matter
}

TEST_CASE("symmetric simulation equals the full simulation rank by rank", "[transformer][symmetry]") {
  // 2 DGX H100 (16 GPUs): tp 2 x pp 2 x dp 4, over the network, with the distributed
  // optimizer and overlapped gradient reduction; once mirroring replicas, once simulating all.
  JsonDocument sys = load_json_file(std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/dgx_h100.json");
  apply_override(sys, "nodes", "2");
  const SystemSpec s = parse_system(sys);
  for (const bool overlap : {false, true}) {
    TransformerSpec w = small_gpt(2, 2, 4, 32);
    w.precision = DType::kBf16;
    w.sequence_parallel = true;
    w.distributed_optimizer = true;
    w.overlap_grad_reduce = overlap;
    TransformerSpec full = w;
    full.symmetric_simulation = false;
    const auto a = predict_transformer(s, w, {}, 3);
    const auto b = predict_transformer(s, full, {}, 3);
    CHECK_FALSE(a->graph.mirror_of.empty());
    CHECK(b->graph.mirror_of.empty());
    CHECK(a->timeline.iteration_time == b->timeline.iteration_time);
    REQUIRE(a->analysis.ranks.size() == 16);
    for (std::size_t r = 0; r < 16; ++r) {
      const auto &x = a->analysis.ranks[r], &y = b->analysis.ranks[r];
      CHECK(x.period == y.period);
      CHECK(x.compute_busy == y.compute_busy);
      CHECK(x.communication_busy == y.communication_busy);
      CHECK(x.exposed_communication == y.exposed_communication);
      CHECK(x.host_busy == y.host_busy);
      CHECK(x.gpu_idle == y.gpu_idle);
    }
    // tp 2 x dp 4 = 8 ranks per stage, 2 stages: one simulated rank per stage.
    int simulated = 0;
    for (int r = 0; r < 16; ++r) simulated += a->graph.simulated(r);
    CHECK(simulated == 2);
  }
}

TEST_CASE("tp_comm_overlap: each TP collective beside its GEMM, joined by the op after it; never slower", "[transformer]") {
  const ExecutionGraph g = tp_overlap_graph();
  const auto& ops = g.ranks[0].ops;
  auto index_of = [&](const std::string& name) {
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (ops[i].name == name) return static_cast<int>(i);
    return -1;
  };
  auto depends = [&](int op, int on) { return std::find(ops[op].deps.begin(), ops[op].deps.end(), on) != ops[op].deps.end(); };
  // Forward of layer 0, micro-batch 0: the all-gather beside the QKV GEMM, the reduce-scatter beside the output projection.
  const int ag = index_of("mb0.layer0.attention.all_gather"), qkv = index_of("mb0.layer0.qkv");
  const int core = index_of("mb0.layer0.flash_attention");
  const int dense = index_of("mb0.layer0.attention.dense"), rs = index_of("mb0.layer0.attention.tp_reduce");
  const int bda = index_of("mb0.layer0.attention.bias_dropout_add");
  REQUIRE(ag >= 0);
  REQUIRE(qkv >= 0);
  REQUIRE(core >= 0);
  REQUIRE(dense >= 0);
  REQUIRE(rs >= 0);
  REQUIRE(bda >= 0);
  CHECK_FALSE(depends(qkv, ag));  // the GEMM starts without waiting for the gather
  CHECK(depends(core, ag));       // the op after it waits for both
  CHECK(depends(core, qkv));
  CHECK_FALSE(depends(rs, dense));  // the reduce-scatter runs beside the GEMM that produces it
  CHECK(depends(bda, rs));
  CHECK(depends(bda, dense));
  for (const int c : {ag, rs}) CHECK_FALSE(ops[static_cast<std::size_t>(c)].host_waits);

  auto time_of = [](bool overlap) {
    JsonDocument s = load_json_file(std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/dgx_h100.json");
    JsonDocument wl = load_json_file(std::string(PERFCAST_SOURCE_DIR) + "/configs/workloads/gpt3_13b.json");
    return predict_documents(std::move(s), std::move(wl), std::nullopt, {fmt::format("workload.tp_comm_overlap={}", overlap)}, 3)
        ->timeline.iteration_time;
  };
  const double serial = time_of(false), overlapped = time_of(true);
  CHECK(overlapped <= serial);
  CHECK(overlapped < 0.95 * serial);  // tp 4 on one node: TP communication is a large share
}

TEST_CASE("tp_comm_overlap: the userbuffers kernels' SMs, taken from the GEMM beside them", "[transformer]") {
  const ExecutionGraph g = tp_overlap_graph();
  const auto& ops = g.ranks[0].ops;
  auto op = [&](const std::string& name) -> const Op& { return ops[op_index(g, name)]; };
  auto side_name = [&](const Op& o) { return ops[static_cast<std::size_t>(o.sm_sharing_op)].name; };
  // Transformer Engine's defaults: "pipeline" reduce-scatters beside the forward's row-parallel
  // GEMMs and "bulk" overlaps in the backward's QKV and fc1 take 16 SMs; "ring_exchange"
  // gathers 1.
  CHECK(side_name(op("mb0.layer0.attention.dense")) == "mb0.layer0.attention.tp_reduce");
  CHECK(op("mb0.layer0.attention.dense").sm_sharing_sms == 16);
  CHECK(side_name(op("mb0.layer0.qkv")) == "mb0.layer0.attention.all_gather");
  CHECK(op("mb0.layer0.qkv").sm_sharing_sms == 1);
  CHECK(op("mb0.layer0.backward.qkv").sm_sharing_sms == 16);
  CHECK(op("mb0.layer0.backward.attention.dense").sm_sharing_sms == 1);
  CHECK(op("mb0.layer0.flash_attention").sm_sharing_op == -1);

  // Annotation, against the same graph without the SM share.
  const SystemSpec s = dgx_a100(2);
  const auto comm = make_collective_model(s);
  Annotator a(s, *comm);
  const TimedGraph t = a.annotate(g);
  ExecutionGraph plain = g;
  for (Op& o : plain.ranks[0].ops) o.sm_sharing_sms = 0;
  Annotator b(s, *comm);
  const TimedGraph u = b.annotate(plain);
  const double sms = s.gpu.sm_count;
  CHECK(sms == 108);
  auto side_time = [&](std::size_t i) { return t.collectives[static_cast<std::size_t>(*ops[static_cast<std::size_t>(ops[i].sm_sharing_op)].collective)].time; };
  // In this small model the reduce-scatter outlasts the projection GEMM, which then runs on
  // 108 - 16 of the A100's 108 SMs throughout: its time x 16 / 92 is added.
  const std::size_t dense = op_index(g, "mb0.layer0.attention.dense");
  REQUIRE(side_time(dense) > kernel_time(u, dense) * sms / (sms - 16));
  CHECK(kernel_time(t, dense) - kernel_time(u, dense) == Approx(kernel_time(u, dense) * 16 / (sms - 16)));
  // A collective that ends first costs its duration x 16 / sms instead (never more than the
  // stretch): the QKV backward beside its 16-SM bulk gather.
  const std::size_t qkv = op_index(g, "mb0.layer0.backward.qkv");
  CHECK(kernel_time(t, qkv) - kernel_time(u, qkv) ==
        Approx(std::min(side_time(qkv) * 16 / sms, kernel_time(u, qkv) * 16 / (sms - 16))));
}

TEST_CASE("GEMM FLOPs per iteration equal Megatron-LM's formula", "[transformer][megatron]") {
  // Narayanan et al. 2021 (Megatron-LM at scale), eq. 3: FLOPs per iteration
  //   72 B s l h^2 (1 + s / 6h + V / 12 l h) without recomputation,
  //   96 B s l h^2 (1 + s / 6h + V / 16 l h) with full recomputation,
  // counting full (unmasked) attention matrices, 4h MLPs and the logit layer; V is the
  // padded vocabulary. The unfused attention path runs exactly those GEMMs.
  for (const Recompute rc : {Recompute::kNone, Recompute::kFull}) {
    for (const auto& [tp, pp, dp] : {std::tuple{1, 1, 1}, std::tuple{2, 2, 2}, std::tuple{4, 1, 2}}) {
      TransformerSpec w = small_gpt(tp, pp, dp, 16);
      w.attention = AttentionImpl::kUnfused;
      w.recompute = rc;
      w.symmetric_simulation = false;  // every rank's program, to add them all up
      const ExecutionGraph g = build_transformer_graph(w, tp * pp * dp);
      double flops = 0;
      for (const auto& prog : g.ranks)
        for (const auto& op : prog.ops)
          for (const auto& k : op.kernels)
            if (const auto* gm = std::get_if<GemmDesc>(&k)) flops += 2.0 * gm->m * gm->n * gm->k * gm->batch;
      const double B = double(w.global_batch), s = double(w.seq_len), l = double(w.layers), h = double(w.hidden),
                   V = double(w.padded_vocab());
      const double expected = rc == Recompute::kNone ? 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))
                                                     : 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
      INFO("tp " << tp << " pp " << pp << " dp " << dp << (rc == Recompute::kFull ? ", full recompute" : ""));
      CHECK(flops == Approx(expected).epsilon(1e-12));
    }
  }
}

}  // namespace perfcast_test_model_transformer_builder_test

// What the big training recipes need, hand-counted: pipeline transfers of 1/tp of the
// activation under sequence parallelism (1F1B and interleaved), activations as their own
// kernels (squared ReLU, GeGLU, ReLU), the memory of Megatron-Core and Transformer Engine
// (gradient buffer type, FP8 parameters, the framework's reserve, activations by the model's
// widths), MoE parallel folding (expert TP and expert DP apart from attention TP / CP / DP),
// runtime profiles found whatever the workload's folder, and the recipe presets.
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "model/graph/transformer_builder.hpp"
#include "model/predict/predict.hpp"
#include "model/predict/runtime_profile.hpp"
#include "tests/model/transformer_test_support.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_transformer_recipes_test {

using namespace perfcast;

namespace {

/// Bytes of every pipeline transfer of rank `rank` (2-rank all-to-allv collectives; the
/// context-parallel ring's transfers, also 2-rank all-to-allvs, are left out).
std::vector<double> transfer_bytes(const ExecutionGraph& g, int rank) {
  std::vector<double> out;
  for (const auto& op : g.ranks[static_cast<std::size_t>(rank)].ops) {
    if (!op.collective || op.name.find("cp_ring") != std::string::npos) continue;
    const auto& c = g.collectives[static_cast<std::size_t>(*op.collective)].desc;
    if (c.kind != CollectiveKind::kAllToAllV) continue;
    double b = 0;
    for (double x : c.pair_bytes) b = std::max(b, x);
    out.push_back(b);
  }
  return out;
}

/// Names of the kernels of the first op whose name ends with `suffix`.
std::vector<std::string> kernel_ops(const ExecutionGraph& g, const std::string& suffix) {
  for (const auto& op : g.ranks[0].ops) {
    if (op.name.size() < suffix.size() || op.name.compare(op.name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    std::vector<std::string> names;
    for (const auto& k : op.kernels)
      if (const auto* e = std::get_if<ElementwiseDesc>(&k)) names.push_back(e->op);
    return names;
  }
  return {};
}

}  // namespace

TEST_CASE("pipeline transfers carry 1/tp of the activation under sequence parallelism", "[transformer][recipes]") {
  // hidden 1024, sequence 1024, micro-batch 2, bf16: the whole activation is 1024 x 2 x 1024 x 2 B = 4 MiB.
  TransformerSpec w = test::gpt(1024, 16, 8, 1024);
  w.micro_batch = 2;
  w.global_batch = 16;
  w.tp = 4;
  w.pp = 2;
  w.dp = 1;
  const double whole = 1024.0 * 2 * 1024 * 2;
  SECTION("1F1B without sequence parallelism: the whole activation") {
    for (double b : transfer_bytes(build_transformer_graph(w, 8), 0)) CHECK(b == whole);
  }
  SECTION("1F1B with sequence parallelism: a quarter at tp 4 (Megatron-Core's get_tensor_shapes)") {
    w.sequence_parallel = true;
    const auto bytes = transfer_bytes(build_transformer_graph(w, 8), 0);
    REQUIRE(!bytes.empty());
    for (double b : bytes) CHECK(b == whole / 4);
  }
  SECTION("interleaved (vp 2) with sequence and context parallelism: each of the vp x more transfers a quarter of this rank's half") {
    w.sequence_parallel = true;
    w.vp = 2;
    w.cp = 2;
    w.pipeline_host_blocking = false;
    const ExecutionGraph g = build_transformer_graph(w, 16);
    const auto bytes = transfer_bytes(g, 0);
    for (double b : bytes) CHECK(b == whole / 2 / 4);
    // Every one of the 8 micro-batches crosses stage 0 twice (vp 2) each way, forward and
    // backward: 2 x 8 x 2 sends and as many receives, less the first chunk's input (no
    // receive) and the last backward's gradient (no send).
    CHECK(bytes.size() == 2 * 8 * 2 * 2 - 2 * 8);
  }
}

TEST_CASE("activations are their own kernels: squared ReLU, GeGLU, ReLU", "[transformer][recipes]") {
  TransformerSpec w = test::gpt(1024, 16, 2, 1024);
  w.global_batch = 1;
  resolve_parallelism(w, 1);
  SECTION("squared ReLU (Nemotron-4): bias add, relu and pow; backward pow then relu") {
    w.activation = Activation::kSquaredRelu;
    const ExecutionGraph g = build_transformer_graph(w, 1);
    CHECK(kernel_ops(g, "layer0.mlp.fc1") == std::vector<std::string>{"bias_add", "relu", "pow"});
    CHECK(kernel_ops(g, "layer0.backward.mlp.fc1") == std::vector<std::string>{"pow_backward", "relu_backward"});
    TransformerSpec gelu = w;
    gelu.activation = Activation::kGelu;
    CHECK(w.parameters() == gelu.parameters());  // not gated: fc1 as wide as GeLU's
  }
  SECTION("GeGLU doubles fc1 like SwiGLU") {
    w.activation = Activation::kGeglu;
    TransformerSpec swiglu = w;
    swiglu.activation = Activation::kSwiglu;
    CHECK(w.parameters() == swiglu.parameters());
    CHECK(kernel_ops(build_transformer_graph(w, 1), "layer0.mlp.fc1") == std::vector<std::string>{"bias_add", "geglu"});
  }
  SECTION("ReLU") {
    w.activation = Activation::kRelu;
    CHECK(kernel_ops(build_transformer_graph(w, 1), "layer0.mlp.fc1") == std::vector<std::string>{"bias_add", "relu"});
    CHECK(predict_transformer(test::system("h100_sxm", "gpus_per_node", 1), w)->timeline.iteration_time > 0);
  }
}

TEST_CASE("memory as Megatron-Core and Transformer Engine allocate it", "[transformer][recipes][memory]") {
  const SystemSpec s = test::system("dgx_h100", "gpus_per_node", 8);
  TransformerSpec w = test::gpt(1024, 16, 8, 1024);
  w.tp = 2;
  w.dp = 4;
  w.global_batch = 8;
  w.sequence_parallel = true;
  w.distributed_optimizer = true;
  resolve_parallelism(w, 8);
  const double params = transformer_rank_parameters(w, 0);
  SECTION("fp32 gradient buffer (grad_reduce_in_fp32) or bf16: 2 B weights + 4 or 2 B gradients + 12 B of Adam over dp 4") {
    CHECK(estimate_transformer_memory(w, s)[0].dense == Approx(params * (2 + 4) + 12 * params / 4));
    w.grad_reduce_dtype = DType::kBf16;
    CHECK(estimate_transformer_memory(w, s)[0].dense == Approx(params * (2 + 2) + 12 * params / 4));
  }
  SECTION("FP8: bf16 weights plus an FP8 copy and its transpose, or FP8 weights and their transpose alone") {
    w.grad_reduce_dtype = DType::kBf16;
    w.precision = DType::kFp8;
    CHECK(estimate_transformer_memory(w, s)[0].dense == Approx(params * (2 + 2 + 2) + 12 * params / 4));
    w.fp8_param_gather = true;
    CHECK(estimate_transformer_memory(w, s)[0].dense == Approx(params * (1 + 1 + 2) + 12 * params / 4));
  }
  SECTION("the framework's reserve: 2 GiB and 5% of HBM, not 15%") {
    CHECK(estimate_transformer_memory(w, s)[0].reserved == Approx(2.0 * (1 << 30) + 0.05 * s.gpu.memory));
  }
  SECTION("activations: 34 sbh / t per layer for GPT with dropout; 32 sbh / t without the two dropout masks") {
    const double sbh = 1024.0 * 1 * 1024;
    const double layers = 8, in_flight = 1, head = 2.0 * 1024 * 1 * double(w.padded_vocab()) / 2 * 4;
    CHECK(estimate_transformer_memory(w, s)[0].activations == Approx(in_flight * layers * 34 * sbh / 2 + head));
    w.dropout = 0;
    CHECK(estimate_transformer_memory(w, s)[0].activations == Approx(in_flight * layers * 32 * sbh / 2 + head));
    // Grouped-query attention with 4 kv heads of 16: K and V a quarter each (2 x 2 x 3/4 sbh less).
    w.kv_heads = 4;
    CHECK(estimate_transformer_memory(w, s)[0].activations == Approx(in_flight * layers * 29 * sbh / 2 + head));
  }
  SECTION("FP8: Transformer Engine keeps FP8 casts of the GEMM inputs: 29 sbh / t per layer for that GPT") {
    // QKV and fc1 inputs 1 B (-2 sbh), the projection's FP8 copy beside flash attention's bf16
    // output (+1 sbh), fc2's input 1 B (-4 sbh): 34 - 5 = 29; the LM head's fp32 logits unchanged.
    w.precision = DType::kFp8;
    const double sbh = 1024.0 * 1 * 1024;
    const double layers = 8, in_flight = 1, head = 2.0 * 1024 * 1 * double(w.padded_vocab()) / 2 * 4;
    CHECK(estimate_transformer_memory(w, s)[0].activations == Approx(in_flight * layers * 29 * sbh / 2 + head));
  }
}

TEST_CASE("MoE parallel folding: expert TP x ep x expert DP over the attention's tp x cp x dp ranks", "[transformer][recipes][moe]") {
  // 16 GPUs, one stage: attention tp 2 x cp 2 x dp 4; experts: expert TP 1 x ep 8 x expert DP 2.
  TransformerSpec w = test::gpt(512, 8, 2, 256);
  w.activation = Activation::kSwiglu;
  w.moe.experts = 16;
  w.moe.top_k = 2;
  w.moe.expert_tp = 1;
  w.tp = 2;
  w.cp = 2;
  w.dp = 4;
  w.ep = 8;
  w.sequence_parallel = true;
  w.distributed_optimizer = true;
  w.global_batch = 4;
  resolve_parallelism(w, 16);
  CHECK(w.expert_dp() == 2);
  const ExecutionGraph g = build_transformer_graph(w, 16);
  // Rank 0's groups: the ep group is ranks 0-7 (expert TP 1 fastest, then ep), the expert DP
  // group {0, 8}; the attention's TP group {0, 1} and its gradient group over dp x cp
  // (tp index 0): {0, 2, 4, ..., 14}.
  auto has_group = [&](std::vector<int> ranks) {
    for (const auto& grp : g.groups)
      if (grp.ranks == ranks) return true;
    return false;
  };
  CHECK(has_group({0, 1, 2, 3, 4, 5, 6, 7}));
  CHECK(has_group({0, 8}));
  CHECK(has_group({0, 1}));
  CHECK(has_group({0, 2, 4, 6, 8, 10, 12, 14}));
  // Expert GEMM rows: this rank's 256 / cp 2 / tp 2 = 64 tokens x top-2, gathered over expert
  // TP 1, times ep 8 ranks' tokens, over 16 experts: 64 rows per expert; 2 local experts.
  bool found = false;
  for (const auto& op : g.ranks[0].ops) {
    if (op.name != "mb0.layer0.mlp.experts.fc1") continue;
    for (const auto& k : op.kernels)
      if (const auto* gm = std::get_if<GemmDesc>(&k)) {
        CHECK(gm->m == 64);
        CHECK(gm->n == 2 * 2048);  // SwiGLU fc1 of the expert width 4 x 512, whole on expert TP 1
        CHECK(gm->batch == 2);
        found = true;
      }
  }
  CHECK(found);
  // Memory: expert Adam states shard over expert DP 2, the dense ones over dp x cp 8.
  const RankMemory m = estimate_transformer_memory(w, test::system("dgx_h100", "nodes", 2))[0];
  const double params = transformer_rank_parameters(w, 0), experts = transformer_stage_expert_parameters(w, 0);
  CHECK(experts == Approx(2 * 2 * (512.0 * 2 * 2048 + 2048.0 * 512)));  // 2 layers x 2 local experts x (fc1 + fc2)
  CHECK(m.dense == Approx(6 * params + 12 * ((params - experts) / 8 + experts / 2)));
}

TEST_CASE("runtime profiles are found from the shipped configs whatever the workload's folder, or named by path", "[transformer][recipes][runtime]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "perfcast_runtime_lookup_test";
  std::filesystem::create_directories(dir);
  const std::string workload = (dir / "w.json").string();
  const auto shipped = load_runtime_profile("megatron_core", workload, true);
  REQUIRE(shipped.has_value());
  CHECK(shipped->name == "megatron_core");
  const std::string path = std::string(PERFCAST_SOURCE_DIR) + "/configs/runtimes/megatron_deepspeed.json";
  const auto by_path = load_runtime_profile(path, workload, true);
  REQUIRE(by_path.has_value());
  CHECK(by_path->name == "megatron_deepspeed");
  CHECK_THROWS_WITH(load_runtime_profile("no_such_profile", workload, true), Catch::Contains("looked in"));
  CHECK_FALSE(load_runtime_profile("no_such_profile", workload, false).has_value());
  CHECK_THROWS_WITH(load_runtime_profile((dir / "missing.json").string(), workload, true), Catch::Contains("no such runtime profile"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("megatron_core runs Transformer Engine's attention kernel: cuDNN's from compute capability 9.0, flash-attn before", "[transformer][recipes][runtime]") {
  // The workload's folder has no runtimes/ beside it: the shipped profiles are read.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "perfcast_runtime_attention_test";
  std::filesystem::create_directories(dir / "workloads");
  const std::string workload = (dir / "workloads" / "w.json").string();
  const auto mc = load_runtime_profile("megatron_core", workload, true);
  REQUIRE(mc.has_value());
  CHECK(mc->attention_kernel_for(9.0) == AttentionKernel::kCudnn);   // H100, H200, GH200
  CHECK(mc->attention_kernel_for(10.0) == AttentionKernel::kCudnn);  // B200, GB200
  CHECK(mc->attention_kernel_for(8.0) == AttentionKernel::kFlash2);  // A100
  CHECK(mc->attention_kernel_for(0) == AttentionKernel::kFlash2);    // compute capability not stated
  // Profiles without rules choose nothing.
  CHECK_FALSE(load_runtime_profile("megatron_deepspeed", workload, true)->attention_kernel_for(9.0).has_value());

  // Applied where the workload names no kernel; the workload's own choice wins.
  GpuSpec hopper;
  hopper.compute_capability = 9.0;
  TransformerSpec unstated, stated;
  stated.attention_kernel_stated = true;
  CHECK(apply_runtime_transformer(unstated, *mc, hopper) == "attention_kernel cudnn (compute capability 9.0)");
  CHECK(unstated.attention_kernel == AttentionKernel::kCudnn);
  CHECK(unstated.attention_kernel_basis == "runtime megatron_core on compute capability 9.0");
  CHECK(apply_runtime_transformer(stated, *mc, hopper).empty());
  CHECK(stated.attention_kernel == AttentionKernel::kFlash2);

  // Bad rules exit with the file and the JSON path.
  auto profile = [&](const std::string& rules, const std::string& sources) {
    const std::string path = (dir / "p.json").string();
    std::ofstream(path) << R"({"schema": "perfcast.runtime", "schema_version": "1.0", "name": "p", "host": {}, "attention_kernel": )"
                        << rules << R"(, "sources": )" << sources << "}";
    return load_runtime_profile(path, workload, true);
  };
  const std::string sourced = R"({"attention_kernel": "a test"})";
  CHECK(profile(R"([{"min_compute_capability": 9.0, "kernel": "flash3"}])", sourced)->attention_kernel_for(9.0) == AttentionKernel::kFlash3);
  CHECK_THROWS_WITH(profile(R"([{"min_compute_capability": 9.0}])", sourced), Catch::Contains("/attention_kernel/0/kernel"));
  CHECK_THROWS_WITH(profile(R"([{"kernel": "sdpa"}])", sourced), Catch::Contains("/attention_kernel/0/kernel"));
  CHECK_THROWS_WITH(profile(R"([{"min_compute_capability": 0.5, "kernel": "cudnn"}])", sourced),
                    Catch::Contains("/attention_kernel/0/min_compute_capability"));
  CHECK_THROWS_WITH(profile("[]", sourced), Catch::Contains("/attention_kernel"));
  CHECK_THROWS_WITH(profile(R"([{"kernel": "cudnn"}])", "{}"), Catch::Contains("the setting attention_kernel needs a source"));
  std::filesystem::remove_all(dir);

  // End to end on one DGX H100: the preset (megatron_core, no kernel named) runs cuDNN's kernel,
  // faster than the same job told to run FlashAttention-2 (cuDNN's forward is fitted at 0.67 of
  // the bf16 peak, FlashAttention-2's at 0.36: docs/calibration.md).
  auto step = [](const std::vector<std::string>& set) {
    JsonDocument s = load_json_file(std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/dgx_h100.json");
    JsonDocument wl = load_json_file(std::string(PERFCAST_SOURCE_DIR) + "/configs/workloads/gpt3_1.3b.json");
    return predict_documents(std::move(s), std::move(wl), std::nullopt, set, 3)->timeline.iteration_time;
  };
  const double cudnn = step({"runtime=megatron_core"});
  CHECK(step({"runtime=megatron_core", "workload.attention_kernel=cudnn"}) == cudnn);
  CHECK(cudnn < step({"runtime=megatron_core", "workload.attention_kernel=flash2"}));
}

TEST_CASE("the recipe presets resolve on their recipes' GPU counts and the 8B and 70B runs fit", "[transformer][recipes][presets]") {
  struct Case {
    const char* preset;
    int gpus;
    bool must_fit;
  };
  // NeMo's published 8- and 64-GPU Llama runs; the others at their recipes' sizes.
  for (const Case c : {Case{"llama3.1_8b", 8, true}, Case{"llama3.1_70b", 64, true}, Case{"llama3.1_405b", 576, false},
                       Case{"nemotron4_340b", 6144, false}, Case{"mixtral_8x22b", 128, false}, Case{"qwen2_57b_a14b", 32, false},
                       Case{"qwen3_30b_a3b", 16, true}, Case{"qwen3_235b_a22b", 256, true}}) {
    INFO(c.preset);
    JsonDocument doc = load_json_file(std::string(PERFCAST_SOURCE_DIR) + "/configs/workloads/" + c.preset + ".json");
    (void)take_runtime_name(doc);
    TransformerSpec w = parse_transformer(doc);
    resolve_parallelism(w, c.gpus);
    const SystemSpec s = test::system("cluster_4x_dgx_h100", "nodes", c.gpus / 8);
    if (c.must_fit) CHECK(memory_verdict(estimate_transformer_memory(w, s)).empty());
  }
}

}  // namespace perfcast_test_model_transformer_recipes_test

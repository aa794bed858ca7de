// The software stack as an input (configs/runtimes/*.json "dlrm"): the shipped stacks load
// with a source for every setting, and each setting changes the graph as described in
// model/graph/workload_spec.hpp (DlrmStack); kernels and bytes by hand.
#include <fstream>

#include <catch2/catch.hpp>

#include "core/json_reader.hpp"
#include "model/graph/dlrm_builder.hpp"
#include "model/predict/predict.hpp"
#include "tests/model/dlrm_test_support.hpp"
#include "model/predict/runtime_profile.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_dlrm_stack_test {

using namespace perfcast;
using perfcast::test::has_op;
using perfcast::test::op_named;
using perfcast::test::src;

namespace {

const std::string kDcn = "configs/workloads/dlrm_dcnv2_mlperf.json";

/// DLRM-DCNv2 (26 tables of dim 128, bottom output 128, 3 cross layers of rank 512, global
/// batch 65,536, fp32) on 8 ranks: 8,192 samples a rank, interaction width 27 x 128 = 3,456.
DlrmSpec dcnv2() {
  DlrmSpec w = load_workload(src(kDcn));
  REQUIRE(w.tables.size() == 26);
  REQUIRE(w.interaction_width() == 3456);
  REQUIRE(w.batch_size == 65536);
  REQUIRE(w.mlp_dtype == DType::kFp32);
  return w;
}

/// Elementwise kernels of `op`: how many, and their bytes (elements x bytes per element).
std::pair<int, double> elementwise_bytes(const Op& op) {
  int n = 0;
  double bytes = 0;
  for (const auto& k : op.kernels)
    if (const auto* e = std::get_if<ElementwiseDesc>(&k)) {
      ++n;
      bytes += double(e->elements) * e->bytes_per_element;
    }
  return {n, bytes};
}

int gemms(const Op& op, int* epilogue_inputs = nullptr) {
  int n = 0;
  for (const auto& k : op.kernels)
    if (const auto* g = std::get_if<GemmDesc>(&k)) {
      ++n;
      if (epilogue_inputs) *epilogue_inputs += g->epilogue_inputs;
    }
  return n;
}

}  // namespace

TEST_CASE("shipped DLRM stacks: every setting sourced, each sets the stack it describes", "[dlrm][stack]") {
  const std::string wl = src(kDcn);
  {
    const auto r = load_runtime_profile("mlperf_hugectr", wl, true);
    REQUIRE(r);
    DlrmSpec w = dcnv2();
    const auto notes = apply_runtime_stack(w, *r);
    CHECK(w.stack.dcn_cross == Fusion::kPointwise);  // HugeCTR's fused elementwise kernel after the GEMMs
    CHECK(w.stack.mlp_backward == Fusion::kEpilogue);
    CHECK(w.stack.cuda_graphs);
    CHECK(w.stack.overlapped_reader);
    CHECK(w.stack.fused_embedding_optimizer);
    CHECK_FALSE(w.stack.compiled_dense);
    CHECK(w.pipeline == TrainPipeline::kSparseDist);
    CHECK(w.mlp_dtype == DType::kFp16);
    REQUIRE(w.stack.embedding_output.has_value());
    CHECK(*w.stack.embedding_output == DType::kFp16);  // HugeCTR's half embedding outputs under mixed precision
    // HugeCTR's per-element AdaGrad replaces the reference's row-wise AdaGrad on the tables.
    CHECK(w.embedding_optimizer == EmbeddingOptimizer::kAdagrad);
    CHECK(w.stack.async_weight_gradients);  // DenseLayerComputeConfig(async_wgrad=True)
    CHECK(w.stack.grouped_allreduce);       // grouped_all_reduce=True
    CHECK(w.stack.gradient_dtype == DType::kFp16);
    REQUIRE(notes.size() == 3);  // the pipeline, the precision and the embedding optimizer replace the workload's
    CHECK(notes[1] == "mlp_dtype fp16 (the workload says fp32)");
    CHECK(notes[2] == "embedding optimizer adagrad (the workload says rowwise_adagrad)");
    w.batch_size = 55296;
    const ExecutionGraph g = build_dlrm_graph(w, default_plan(w, 8), 8);
    CHECK(std::get<EmbeddingDesc>(op_named(g, 0, "embedding_backward").kernels.at(0)).optimizer == EmbeddingOptimizer::kAdagrad);
  }
  {
    const auto r = load_runtime_profile("torchrec_pipelined", wl, true);
    REQUIRE(r);
    DlrmSpec w = dcnv2();
    (void)apply_runtime_stack(w, *r);
    CHECK(w.stack.dcn_cross == Fusion::kNone);
    CHECK(w.stack.mlp_backward == Fusion::kNone);
    CHECK_FALSE(w.stack.cuda_graphs);
    CHECK(w.stack.overlapped_reader);
    CHECK_FALSE(w.stack.compiled_dense);
    CHECK(w.pipeline == TrainPipeline::kSparseDist);
    CHECK(w.mlp_dtype == DType::kFp32);  // not set: the workload's
    CHECK_FALSE(w.stack.async_weight_gradients);  // autograd: each layer's weight gradient in its backward
  }
  {
    const auto r = load_runtime_profile("torchrec_compiled", wl, true);
    REQUIRE(r);
    DlrmSpec w = dcnv2();
    (void)apply_runtime_stack(w, *r);
    CHECK(w.stack.dcn_cross == Fusion::kPointwise);
    CHECK(w.stack.mlp_backward == Fusion::kPointwise);
    CHECK(w.stack.compiled_dense);
    CHECK(w.pipeline == TrainPipeline::kSparseDist);
  }
}

TEST_CASE("a stack setting without a source is refused, naming it", "[dlrm][stack]") {
  const std::string dir = "/tmp/perfcast_stack_test";
  std::filesystem::create_directories(dir + "/runtimes");
  std::filesystem::create_directories(dir + "/workloads");
  std::ofstream(dir + "/runtimes/unsourced.json")
      << R"({"schema": "perfcast.runtime", "schema_version": "1.1", "name": "x", "host": {},
            "dlrm": {"launch": "cuda_graphs"}, "sources": {"host": "none"}})";
  try {
    (void)load_runtime_profile("unsourced", dir + "/workloads/w.json", true);
    FAIL("no error");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Catch::Contains("the setting dlrm.launch needs a source"));
  }
}

TEST_CASE("DCN cross fusion: the elementwise tail's kernels and bytes by hand", "[dlrm][stack]") {
  // Per cross layer on a rank: 8,192 x 3,456 = 28,311,552 elements, fp32 (4 B).
  const double elems = 8192.0 * 3456;
  auto layer = [&](Fusion f, const char* name) {
    DlrmSpec w = dcnv2();
    w.stack.dcn_cross = f;
    const ExecutionGraph g = build_dlrm_graph(w, default_plan(w, 8), 8);
    return op_named(g, 0, name);
  };
  SECTION("forward") {
    // eager: x0 * y then + x_l, each reads two and writes one (12 B an element, 2 kernels);
    // one generated kernel reads three and writes one (16 B); the epilogue: no kernel, W's GEMM
    // reads x0 and x_l.
    const Op none = layer(Fusion::kNone, "dcn.cross.0");
    CHECK(elementwise_bytes(none) == std::pair<int, double>{2, 2 * 12 * elems});
    const Op pw = layer(Fusion::kPointwise, "dcn.cross.0");
    CHECK(elementwise_bytes(pw) == std::pair<int, double>{1, 16 * elems});
    const Op ep = layer(Fusion::kEpilogue, "dcn.cross.0");
    int inputs = 0;
    CHECK(gemms(ep, &inputs) == 2);
    CHECK(inputs == 2);
    CHECK(elementwise_bytes(ep).first == 0);
  }
  SECTION("backward") {
    // eager: three kernels of 12 B an element, and the bias gradient (4 B); one generated
    // kernel (24 B) and the bias gradient; the epilogue: in the input-gradient GEMM (3 operands)
    // with the bias gradient in W's weight-gradient GEMM: no elementwise kernel.
    const Op none = layer(Fusion::kNone, "dcn.cross.0.backward");
    CHECK(elementwise_bytes(none) == std::pair<int, double>{4, 3 * 12 * elems + 4 * elems});
    const Op pw = layer(Fusion::kPointwise, "dcn.cross.0.backward");
    CHECK(elementwise_bytes(pw) == std::pair<int, double>{2, 24 * elems + 4 * elems});
    const Op ep = layer(Fusion::kEpilogue, "dcn.cross.0.backward");
    int inputs = 0;
    CHECK(gemms(ep, &inputs) == 4);
    CHECK(inputs == 3);
    CHECK(elementwise_bytes(ep).first == 0);
  }
}

TEST_CASE("embedding output type: lookups, all-to-all, concat and cross layers by hand", "[dlrm][stack]") {
  // fp16 MLPs with the pooled outputs in fp32 (TorchRec's default) or in the stack's fp16
  // (HugeCTR). Per rank 8,192 samples x 3,456 interaction elements.
  const double elems = 8192.0 * 3456;
  auto graph = [&](bool half_output) {
    DlrmSpec w = dcnv2();
    w.mlp_dtype = DType::kFp16;
    if (half_output) w.stack.embedding_output = DType::kFp16;
    return build_dlrm_graph(w, default_plan(w, 8), 8);
  };
  const ExecutionGraph full = graph(false), half = graph(true);
  // Concat: read and write 4 B each in fp32, then a cast to fp16 (4 + 2 B); in fp16, 2 + 2 B and no cast.
  CHECK(elementwise_bytes(op_named(full, 0, "interaction")) == std::pair<int, double>{2, 8 * elems + 6 * elems});
  CHECK(elementwise_bytes(op_named(half, 0, "interaction")) == std::pair<int, double>{1, 4 * elems});
  // The fused cross kernel reads three and writes one: 16 B an element in fp32, 8 B in fp16;
  // its backward 24 B / 12 B, plus the bias gradient in the MLPs' fp16 (2 B).
  CHECK(elementwise_bytes(op_named(full, 0, "dcn.cross.0")) == std::pair<int, double>{1, 16 * elems});
  CHECK(elementwise_bytes(op_named(half, 0, "dcn.cross.0")) == std::pair<int, double>{1, 8 * elems});
  CHECK(elementwise_bytes(op_named(half, 0, "dcn.cross.0.backward")) == std::pair<int, double>{2, 12 * elems + 2 * elems});
  // The pooled all-to-all moves half the bytes, and the lookup writes fp16.
  auto a2a = [](const ExecutionGraph& g) { return g.collectives[static_cast<std::size_t>(*op_named(g, 0, "output_dist").collective)].desc; };
  REQUIRE(a2a(full).pair_bytes.size() == 64);  // an 8 x 8 all-to-allv
  for (std::size_t i = 0; i < a2a(full).pair_bytes.size(); ++i) CHECK(a2a(half).pair_bytes[i] == Approx(a2a(full).pair_bytes[i] / 2));
  CHECK(std::get<EmbeddingDesc>(op_named(half, 0, "embedding_lookup").kernels.at(0)).output_dtype == DType::kFp16);
  CHECK(std::get<EmbeddingDesc>(op_named(full, 0, "embedding_lookup").kernels.at(0)).output_dtype == DType::kFp32);
  // A plan's own output_dtype wins over the stack's.
  DlrmSpec w = dcnv2();
  w.stack.embedding_output = DType::kFp16;
  TableSharding stated = default_plan(w, 8).tables[0];
  CHECK(pooled_output_bytes(w, stated) == 2);
  stated.output_dtype = "FP32";
  stated.output_bytes = 4;
  CHECK(pooled_output_bytes(w, stated) == 4);
}

TEST_CASE("MLP backward fusion: ReLU backward and bias gradient kernels by hand", "[dlrm][stack]") {
  // top_mlp.0 (3,456 -> 1,024, ReLU) on 8,192 samples: 8,388,608 output elements, fp32.
  const double out = 8192.0 * 1024;
  auto layer = [&](Fusion f) {
    DlrmSpec w = dcnv2();
    w.stack.mlp_backward = f;
    const ExecutionGraph g = build_dlrm_graph(w, default_plan(w, 8), 8);
    return op_named(g, 0, "top_mlp.0.backward");
  };
  // eager: relu_backward (12 B an element) and bias_grad (4 B); generated: one kernel (12 B);
  // epilogue: none, the ReLU backward read by the data-gradient GEMM.
  CHECK(elementwise_bytes(layer(Fusion::kNone)) == std::pair<int, double>{2, 12 * out + 4 * out});
  CHECK(elementwise_bytes(layer(Fusion::kPointwise)) == std::pair<int, double>{1, 12 * out});
  const Op ep = layer(Fusion::kEpilogue);
  int inputs = 0;
  CHECK(gemms(ep, &inputs) == 2);
  CHECK(inputs == 1);
  CHECK(elementwise_bytes(ep).first == 0);
}

TEST_CASE("reader, CUDA graphs, compiled dense part and host work: what each marks", "[dlrm][stack]") {
  DlrmSpec w = dcnv2();
  {
    const ExecutionGraph g = build_dlrm_graph(w, default_plan(w, 8), 8);
    // Blocking reader: the training thread assembles its 8,192 samples; the batch is this
    // iteration's. TorchRec splits the input of all 26 sharded tables; rank 0 looks up 4
    // (round-robin: tables 0, 8, 16, 24).
    const Op& copy = op_named(g, 0, "batch_h2d");
    CHECK(copy.host_samples == 8192);
    CHECK(op_named(g, 0, "input_dist.lengths").host_tables == 26);
    CHECK(op_named(g, 0, "embedding_lookup").host_tables == 4);
    CHECK_FALSE(op_named(g, 0, "bottom_mlp.0").deps.empty());
    CHECK_FALSE(has_op(g, 0, "cuda_graph.launch"));
  }
  w.stack.overlapped_reader = true;
  w.stack.cuda_graphs = true;
  w.stack.compiled_dense = true;
  const ExecutionGraph g = build_dlrm_graph(w, default_plan(w, 8), 8);
  const Op& copy = op_named(g, 0, "batch_h2d");
  CHECK(copy.host_samples == 0);  // the reader thread's
  CHECK(copy.captured == false);  // the reader's copy stays outside the graph
  // The first bottom layer reads the previous iteration's copy.
  CHECK(op_named(g, 0, "bottom_mlp.0").prev_deps.size() == 1);
  REQUIRE(has_op(g, 0, "cuda_graph.launch"));
  CHECK(op_named(g, 0, "cuda_graph.launch").graph_launch);
  CHECK(op_named(g, 0, "dcn.cross.1").captured);
  // Compiled: in a run of dense ops only the first pays a framework op's host cost.
  CHECK(op_named(g, 0, "dcn.cross.1").same_call);
  CHECK(op_named(g, 0, "top_mlp.0").same_call);
}

TEST_CASE("deferred weight gradients: the same kernels, the weight halves issued after the exchange", "[dlrm][stack]") {
  // HugeCTR's async_wgrad: every top MLP and cross layer backward splits into its data half
  // (on the chain to the interaction's gradient) and NAME.weights, issued after the embedding
  // gradients' all-to-all so that they run while it is in flight.
  auto graph = [&](bool deferred, Fusion mlp) {
    DlrmSpec w = dcnv2();
    w.mlp_dtype = DType::kFp16;
    w.stack.mlp_backward = mlp;
    w.stack.async_weight_gradients = deferred;
    return build_dlrm_graph(w, default_plan(w, 8), 8);
  };
  for (const Fusion mlp : {Fusion::kNone, Fusion::kPointwise, Fusion::kEpilogue}) {
    const ExecutionGraph in_layer = graph(false, mlp), deferred = graph(true, mlp);
    // Per layer: the kernels of the one op are those of the two halves.
    std::vector<std::string> layers{"dcn.cross.0.backward", "dcn.cross.2.backward"};
    for (int i = 0; i < 5; ++i) layers.push_back("top_mlp." + std::to_string(i) + ".backward");
    for (const auto& name : layers) {
      const Op& whole = op_named(in_layer, 0, name);
      const Op& data = op_named(deferred, 0, name);
      const Op& weights = op_named(deferred, 0, name + ".weights");
      CHECK(gemms(data) + gemms(weights) == gemms(whole));
      CHECK(elementwise_bytes(data).second + elementwise_bytes(weights).second == Approx(elementwise_bytes(whole).second));
      CHECK(weights.deps.size() == 1);
    }
    // The logit layer has no ReLU: its generated kernel is the bias gradient alone, a weight gradient.
    if (mlp == Fusion::kPointwise) CHECK(elementwise_bytes(op_named(deferred, 0, "top_mlp.4.backward")).first == 0);
  }
  const ExecutionGraph g = graph(true, Fusion::kEpilogue);
  // A cross layer's data half: its fused elementwise kernel, z's and x_l's gradient GEMMs;
  // the weights: W's and V's gradient GEMMs and the bias gradient (a read of the fp16
  // gradient, 2 B an element of 8,192 x 3,456 a rank).
  CHECK(gemms(op_named(g, 0, "dcn.cross.1.backward")) == 2);
  CHECK(gemms(op_named(g, 0, "dcn.cross.1.backward.weights")) == 2);
  CHECK(elementwise_bytes(op_named(g, 0, "dcn.cross.1.backward.weights")) == std::pair<int, double>{1, 2 * 8192.0 * 3456});
  // The logit layer under the epilogue fusion: the data-gradient GEMM, then the weight GEMM.
  CHECK(gemms(op_named(g, 0, "top_mlp.4.backward")) == 1);
  CHECK(gemms(op_named(g, 0, "top_mlp.4.backward.weights")) == 1);
  // Host order: the chain, the interaction's gradient, its exchange, then the weights, then
  // the embedding backward.
  const auto& ops = g.ranks[0].ops;
  auto index = [&](const std::string& name) {
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (ops[i].name == name) return static_cast<int>(i);
    FAIL("no op " << name);
    return -1;
  };
  CHECK(op_named(g, 0, "interaction.backward").deps == std::vector<int>{index("dcn.cross.0.backward")});
  CHECK(op_named(g, 0, "dcn.cross.0.backward").deps == std::vector<int>{index("dcn.cross.1.backward")});
  for (const auto& op : ops) {
    if (op.name.size() < 8 || op.name.compare(op.name.size() - 8, 8, ".weights") != 0) continue;
    CHECK(index(op.name) > index("output_dist.backward"));
    CHECK(index(op.name) < index("embedding_backward"));
  }
  // Rule: deferring removes waits only. With the HugeCTR stack on one DGX H100, never slower.
  const SystemSpec s = load_system(src("configs/systems/dgx_h100.json"));
  const auto r = load_runtime_profile("mlperf_hugectr", src(kDcn), true);
  DlrmSpec w = dcnv2();
  (void)apply_runtime_stack(w, *r);
  w.batch_size = 55296;
  const double deferred_time = predict_parsed(s, w, default_plan(w, 8), {})->timeline.iteration_time;
  w.stack.async_weight_gradients = false;
  const double in_layer_time = predict_parsed(s, w, default_plan(w, 8), {})->timeline.iteration_time;
  CHECK(deferred_time <= in_layer_time);
}

TEST_CASE("grouped fp16 gradient all-reduce: one collective of every dense gradient in half precision", "[dlrm][stack]") {
  // HugeCTR's grouped_all_reduce under mixed precision: the dense gradients (16,044,545 of
  // DLRM-DCNv2: bottom MLP 171,392, cross layers 3 x (2 x 3,456 x 512 + 3,456) = 10,627,200,
  // top MLP 5,245,953) all-reduced once in fp16.
  DlrmSpec w = dcnv2();
  w.mlp_dtype = DType::kFp16;
  const ExecutionGraph buckets = build_dlrm_graph(w, default_plan(w, 8), 8);
  w.stack.grouped_allreduce = true;
  w.stack.gradient_dtype = DType::kFp16;
  w.stack.async_weight_gradients = true;
  const ExecutionGraph grouped = build_dlrm_graph(w, default_plan(w, 8), 8);
  auto allreduces = [](const ExecutionGraph& g) {
    std::vector<double> bytes;
    for (const auto& op : g.ranks[0].ops)
      if (op.name.rfind("allreduce.bucket", 0) == 0) bytes.push_back(g.collectives[static_cast<std::size_t>(*op.collective)].desc.bytes);
    return bytes;
  };
  const auto b = allreduces(buckets), one = allreduces(grouped);
  CHECK(b.size() > 1);  // DDP's 25 MB buckets of fp32 gradients
  double fp32 = 0;
  for (double x : b) fp32 += x;
  CHECK(fp32 == Approx(4.0 * w.dense_parameters()));
  REQUIRE(one.size() == 1);
  CHECK(one[0] == Approx(2.0 * 16044545));
  CHECK(w.dense_parameters() == Approx(16044545));
  // The all-reduce is issued after the bottom MLP's backward, the last layer to produce a gradient.
  const auto& ops = grouped.ranks[0].ops;
  const Op& ar = op_named(grouped, 0, "allreduce.bucket0");
  REQUIRE(ar.deps.size() == 1);
  CHECK(ops[static_cast<std::size_t>(ar.deps[0])].name == "bottom_mlp.0.backward");
}

}  // namespace perfcast_test_model_dlrm_stack_test

#include <algorithm>

#include <catch2/catch.hpp>

#include "model/graph/dlrm_builder.hpp"
#include "model/graph/memory_estimate.hpp"
#include "model/predict/predict.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_dlrm_builder_test {

using namespace perfcast;

namespace {
DlrmSpec default_workload() { return load_workload(std::string(PERFCAST_SOURCE_DIR) + "/configs/workloads/dlrm_default.json"); }

int find(const RankProgram& p, const std::string& name) {
  for (std::size_t i = 0; i < p.ops.size(); ++i)
    if (p.ops[i].name == name) return static_cast<int>(i);
  return -1;
}
}  // namespace

TEST_CASE("single GPU: no collectives, forward before backward", "[builder]") {
  const DlrmSpec w = default_workload();
  const ExecutionGraph g = build_dlrm_graph(w, default_plan(w, 1), 1);
  REQUIRE(g.ranks.size() == 1);
  const auto& p = g.ranks[0];
  for (const auto& op : p.ops) CHECK_FALSE(op.collective.has_value());
  CHECK(find(p, "batch_h2d") == 0);
  CHECK(find(p, "embedding_lookup") < find(p, "interaction"));
  CHECK(find(p, "loss") < find(p, "loss.backward"));
  CHECK(find(p, "embedding_backward") > find(p, "interaction.backward"));
  CHECK(p.ops.back().name == "loss.item");
  CHECK(p.ops.back().host_waits);
  // A linear backward is the ReLU mask, two GEMMs and a bias reduction.
  const auto& top1 = p.ops[static_cast<std::size_t>(find(p, "top_mlp.1.backward"))];
  CHECK(top1.kernels.size() == 4);
  // The first bottom layer has no input gradient: one GEMM fewer.
  CHECK(p.ops[static_cast<std::size_t>(find(p, "bottom_mlp.0.backward"))].kernels.size() == 3);
  // One lookup kernel for all 8 tables, global batch.
  const auto& lookup = std::get<EmbeddingDesc>(p.ops[static_cast<std::size_t>(find(p, "embedding_lookup"))].kernels[0]);
  CHECK(lookup.tables.size() == 8);
  CHECK(lookup.batch == 2048);
}

TEST_CASE("two ranks, table-wise: all-to-all byte matrices worked by hand", "[builder]") {
  const DlrmSpec w = default_workload();
  const ExecutionGraph g = build_dlrm_graph(w, default_plan(w, 2), 2);
  const auto& p = g.ranks[0];
  const int out = find(p, "output_dist");
  const int in = find(p, "input_dist.indices");
  REQUIRE(out >= 0);
  REQUIRE(in >= 0);
  // Rank 0 holds tables 0, 2, 4, 6 (D 64): to rank 1 it sends 1024 samples x 4 x 64 fp32.
  const auto& o = g.collectives[static_cast<std::size_t>(*p.ops[static_cast<std::size_t>(out)].collective)].desc;
  CHECK(o.kind == CollectiveKind::kAllToAllV);
  CHECK(o.pair_bytes[1] == Approx(1024.0 * 4 * 64 * 4));
  // Indices: rank 0 sends rank 1 its 1024 samples x 4 tables x 100 indices x 8 bytes.
  const auto& i = g.collectives[static_cast<std::size_t>(*p.ops[static_cast<std::size_t>(in)].collective)].desc;
  CHECK(i.pair_bytes[1] == Approx(1024.0 * 4 * 100 * 8));
  // Each rank looks up its 4 tables for the global batch.
  const auto& lookup = std::get<EmbeddingDesc>(p.ops[static_cast<std::size_t>(find(p, "embedding_lookup"))].kernels[0]);
  CHECK(lookup.tables.size() == 4);
  CHECK(lookup.batch == 2048);
  // The backward exchange mirrors the forward one.
  const int back = find(p, "output_dist.backward");
  CHECK(back > find(p, "interaction.backward"));
  CHECK(back < find(p, "embedding_backward"));
}

TEST_CASE("a table's output dtype sets its output all-to-all bytes and its lookup's output", "[builder]") {
  // As the hand-worked two-rank case above, with rank 0's tables 0 and 2 in FP16 output
  // (TorchRec's output_dtype) and 4 and 6 in FP32: 1024 samples x (2 x 64 x 2 + 2 x 64 x 4) B.
  const DlrmSpec w = default_workload();
  ShardingPlan plan = default_plan(w, 2);
  plan.tables[0].output_bytes = plan.tables[2].output_bytes = 2;
  const ExecutionGraph g = build_dlrm_graph(w, plan, 2);
  const auto& p0 = g.ranks[0];
  const auto& o = g.collectives[static_cast<std::size_t>(*p0.ops[static_cast<std::size_t>(find(p0, "output_dist"))].collective)].desc;
  CHECK(o.pair_bytes[1] == Approx(1024.0 * (2 * 64 * 2 + 2 * 64 * 4)));
  // Mixed outputs: the lookup is modelled as writing fp32; rank 1 with every table in FP16 writes fp16.
  CHECK(std::get<EmbeddingDesc>(p0.ops[static_cast<std::size_t>(find(p0, "embedding_lookup"))].kernels[0]).output_dtype == DType::kFp32);
  for (std::size_t t = 1; t < plan.tables.size(); t += 2) plan.tables[t].output_bytes = 2;
  const ExecutionGraph h = build_dlrm_graph(w, plan, 2);
  const auto& p1 = h.ranks[1];
  CHECK(std::get<EmbeddingDesc>(p1.ops[static_cast<std::size_t>(find(p1, "embedding_lookup"))].kernels[0]).output_dtype == DType::kFp16);
  const auto& o1 = h.collectives[static_cast<std::size_t>(*p1.ops[static_cast<std::size_t>(find(p1, "output_dist"))].collective)].desc;
  CHECK(o1.pair_bytes[1 * 2 + 0] == Approx(1024.0 * 4 * 64 * 2));  // row: sender; rank 1 to rank 0, half the fp32 bytes
}

TEST_CASE("DDP buckets: 1 MiB first bucket, then 25 MB, in backward order", "[builder]") {
  const DlrmSpec w = default_workload();
  const ExecutionGraph g = build_dlrm_graph(w, default_plan(w, 2), 2);
  const auto& p = g.ranks[0];
  // top_mlp.3 (1024x1 + 1) then top_mlp.2 (1024x1024 + 1024) pass 1 MiB: bucket 0 follows
  // top_mlp.2.backward. The rest (top 1, 0; bottom 1, 0: about 5.8 MB) stays under 25 MB
  // and is flushed after the last layer.
  CHECK(find(p, "allreduce.bucket0") == find(p, "top_mlp.2.backward") + 1);
  CHECK(find(p, "allreduce.bucket1") == find(p, "bottom_mlp.0.backward") + 1);
  CHECK(find(p, "allreduce.bucket2") == -1);
  const auto bucket = [&](const char* name) {
    return g.collectives[static_cast<std::size_t>(*p.ops[static_cast<std::size_t>(find(p, name))].collective)].desc.bytes;
  };
  CHECK(bucket("allreduce.bucket0") == Approx((1024.0 + 1 + 1024.0 * 1024 + 1024) * 4));
  const double rest = (100.0 * 1024 + 1024) + (1024.0 * 1024 + 1024) + (512.0 * 64 + 64) + (512.0 * 512 + 512);
  CHECK(bucket("allreduce.bucket1") == Approx(rest * 4));
  // The optimizer waits for every bucket.
  const auto& opt = p.ops[static_cast<std::size_t>(find(p, "dense_optimizer.sgd"))];
  CHECK(opt.deps.size() == 2);
}

TEST_CASE("collectives are stored once and shared by every rank", "[builder]") {
  const DlrmSpec w = default_workload();
  const ExecutionGraph g = build_dlrm_graph(w, default_plan(w, 8), 8);
  std::vector<int> first;
  for (const auto& op : g.ranks[0].ops)
    if (op.collective) first.push_back(*op.collective);
  for (const auto& r : g.ranks) {
    std::vector<int> mine;
    for (const auto& op : r.ops)
      if (op.collective) mine.push_back(*op.collective);
    CHECK(mine == first);
  }
  CHECK(g.collectives.size() == first.size());
}

TEST_CASE("a batch that does not divide over the ranks is a config error", "[builder]") {
  DlrmSpec w = default_workload();
  w.batch_size = 1000;
  CHECK_THROWS_WITH(build_dlrm_graph(w, default_plan(w, 3), 3), Catch::Contains("/batch_size") && Catch::Contains("3 ranks"));
}

TEST_CASE("mixed precision: the dense features are cast and the master weights copied", "[builder]") {
  DlrmSpec w = default_workload();
  const auto op = [](const RankProgram& p, const std::string& name) -> const Op* {
    const int i = find(p, name);
    return i < 0 ? nullptr : &p.ops[static_cast<std::size_t>(i)];
  };
  {
    const ExecutionGraph g = build_dlrm_graph(w, default_plan(w, 1), 1);
    CHECK(op(g.ranks[0], "dense_features.cast") == nullptr);  // fp32: neither op
    CHECK(op(g.ranks[0], "copy_main_params") == nullptr);
  }
  w.mlp_dtype = DType::kBf16;
  const ExecutionGraph g = build_dlrm_graph(w, default_plan(w, 1), 1);
  const auto& p = g.ranks[0];
  const Op* cast = op(p, "dense_features.cast");
  const Op* copy = op(p, "copy_main_params");
  REQUIRE(cast != nullptr);
  REQUIRE(copy != nullptr);
  // 2048 samples x 512 dense features, read fp32 and written bf16.
  const auto& c = std::get<ElementwiseDesc>(cast->kernels.at(0));
  CHECK(c.elements == 2048 * 512);
  CHECK(c.bytes_per_element == Approx(6.0));
  CHECK(find(p, "dense_features.cast") < find(p, "bottom_mlp.0"));
  // MLP parameters by hand: bottom 512x512+512 + 512x64+64 = 295,488; top (interaction width
  // 64 + 9*8/2 = 100) 100x1024+1024 + 2 x (1024x1024+1024) + 1024+1 = 2,203,649.
  const auto& m = std::get<ElementwiseDesc>(copy->kernels.at(0));
  CHECK(m.elements == 2'499'137);
  CHECK(m.bytes_per_element == Approx(6.0));
  // After the optimizer step, before the loss is read.
  CHECK(find(p, "copy_main_params") > find(p, "dense_optimizer.sgd"));
  CHECK(p.ops.back().name == "loss.item");
  CHECK(op(p, "grad_scaler.unscale") == nullptr);  // bf16 needs no loss scaling
}

TEST_CASE("mixed precision: only the GEMMs' inputs are half; cat stays fp32, fp16 adds the grad scaler", "[builder]") {
  DlrmSpec w = default_workload();  // 8 tables of dim 64, fp32 embeddings, dot interaction
  w.mlp_dtype = DType::kFp16;
  const ExecutionGraph g = build_dlrm_graph(w, default_plan(w, 1), 1);
  const auto& p = g.ranks[0];
  const Op& inter = p.ops[static_cast<std::size_t>(find(p, "interaction"))];
  // Autocast promotes torch.cat of the fp16 bottom output and the fp32 embeddings to fp32
  // (2048 samples x 9 features x 64: read and write 4 B), then casts it for the bmm (4 + 2 B).
  const auto& concat = std::get<ElementwiseDesc>(inter.kernels.at(0));
  CHECK(concat.op == "concat");
  CHECK(concat.elements == 2048 * 9 * 64);
  CHECK(concat.bytes_per_element == Approx(8.0));
  const auto& cast = std::get<ElementwiseDesc>(inter.kernels.at(1));
  CHECK(cast.op == "cast");
  CHECK(cast.bytes_per_element == Approx(6.0));
  CHECK(std::get<GemmDesc>(inter.kernels.at(2)).dtype == DType::kFp16);
  // GradScaler: unscale 2,499,137 fp32 gradients (8 B each), then the host reads found_inf.
  const Op& unscale = p.ops[static_cast<std::size_t>(find(p, "grad_scaler.unscale"))];
  CHECK(std::get<ElementwiseDesc>(unscale.kernels.at(0)).elements == 2'499'137);
  CHECK(std::get<ElementwiseDesc>(unscale.kernels.at(0)).bytes_per_element == Approx(8.0));
  CHECK(p.ops[static_cast<std::size_t>(find(p, "grad_scaler.found_inf.item"))].host_waits);
  CHECK(find(p, "grad_scaler.found_inf.item") < find(p, "dense_optimizer.sgd"));
  // fp16 embeddings: the concat is half and nothing is cast.
  w.embedding_dtype = DType::kFp16;
  const ExecutionGraph half = build_dlrm_graph(w, default_plan(w, 1), 1);
  const Op& hinter = half.ranks[0].ops[static_cast<std::size_t>(find(half.ranks[0], "interaction"))];
  CHECK(std::get<ElementwiseDesc>(hinter.kernels.at(0)).bytes_per_element == Approx(4.0));
  CHECK(std::holds_alternative<GemmDesc>(hinter.kernels.at(1)));
}

namespace {

/// Index of the op named `name` in `ops` (fails the test when there is none).
int op_index(const std::vector<Op>& ops, const std::string& name) {
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (ops[i].name == name) return static_cast<int>(i);
  FAIL("no op " << name);
  return -1;
}

}  // namespace

TEST_CASE("TorchRec sparse_dist pipeline: inputs one iteration ahead, the backward waits for the next batch's", "[dlrm][pipeline]") {
  const std::string src = PERFCAST_SOURCE_DIR;
  DlrmSpec w = load_workload(src + "/configs/workloads/dlrm_default.json");
  w.pipeline = TrainPipeline::kSparseDist;
  const ExecutionGraph g = build_dlrm_graph(w, default_plan(w, 8), 8, 8);
  const auto& ops = g.ranks[3].ops;
  auto index = [&](const std::string& name) { return op_index(ops, name); };
  const int copy = index("batch_h2d"), indices = index("input_dist.indices");
  CHECK(ops[static_cast<std::size_t>(indices)].deps.empty());
  CHECK(ops[static_cast<std::size_t>(indices)].prev_deps == std::vector<int>{copy});
  const auto& lookup = ops[static_cast<std::size_t>(index("embedding_lookup"))];
  CHECK(lookup.deps.empty());
  CHECK(lookup.prev_deps == std::vector<int>{indices});
  CHECK(ops[static_cast<std::size_t>(index("bottom_mlp.0"))].prev_deps == std::vector<int>{copy});
  const auto& loss_grad = ops[static_cast<std::size_t>(index("loss.backward"))].deps;
  CHECK(std::find(loss_grad.begin(), loss_grad.end(), indices) != loss_grad.end());

  // One H100: the plain loop waits for the batch copy at the start of every iteration (it
  // only overlaps the previous iteration's tail after the loss.item() sync: the optimizer
  // kernels); the pipeline hides it completely. So the iteration is shorter by the copy
  // less that overlap: between 90% and 100% of the copy.
  const SystemSpec h100 = load_system(src + "/configs/systems/h100_sxm.json");
  w.pipeline = TrainPipeline::kNone;
  const auto plain = predict_parsed(h100, w, default_plan(w, 1), {});
  w.pipeline = TrainPipeline::kSparseDist;
  const auto piped = predict_parsed(h100, w, default_plan(w, 1), {});
  double copy_time = 0;
  for (std::size_t i = 0; i < plain->graph.ranks[0].ops.size(); ++i)
    if (plain->graph.ranks[0].ops[i].name == "batch_h2d") copy_time = plain->timed.ops[0][i].kernels[0].time;
  REQUIRE(copy_time > 0);
  const double saved = plain->timeline.iteration_time - piped->timeline.iteration_time;
  CHECK(saved <= copy_time * (1 + 1e-9));
  CHECK(saved >= 0.9 * copy_time);
  // Two batches of inputs are held: the I/O memory grows.
  CHECK(piped->memory[0].io > plain->memory[0].io);
}

TEST_CASE("DLRM-DCNv2: cross layers in the graph, the parameters and the gradients, by hand", "[dlrm][dcn]") {
  const std::string src = PERFCAST_SOURCE_DIR;
  const DlrmSpec w = load_workload(src + "/configs/workloads/dlrm_dcnv2_mlperf.json");
  REQUIRE(w.interaction == Interaction::kDcnV2);
  // Width: the bottom output (128) and 26 tables of 128 = 3,456.
  CHECK(w.interaction_width() == 3456);
  // Bottom 13-512-256-128: 171,392; three cross layers of V 3456x512, W 512x3456 and a 3456
  // bias: 3 x 3,542,400 = 10,627,200; top 3456-1024-1024-512-256-1: 5,245,953.
  CHECK(w.dense_parameters() == 171392.0 + 10627200.0 + 5245953.0);
  const ExecutionGraph g = build_dlrm_graph(w, default_plan(w, 8), 8, 8);
  const auto& ops = g.ranks[0].ops;
  const auto cross = std::find_if(ops.begin(), ops.end(), [](const Op& o) { return o.name == "dcn.cross.1"; });
  REQUIRE(cross != ops.end());
  // Local batch 65536 / 8: z = x V is 8192 x 512 x 3456, y = z W + b is 8192 x 3456 x 512.
  REQUIRE(cross->kernels.size() == 3);
  CHECK(std::get<GemmDesc>(cross->kernels[0]) == GemmDesc{8192, 512, 3456, 1, DType::kFp32, false});
  CHECK(std::get<GemmDesc>(cross->kernels[1]) == GemmDesc{8192, 3456, 512, 1, DType::kFp32, true});
  CHECK(std::get<ElementwiseDesc>(cross->kernels[2]).elements == 8192 * 3456);
  int cross_ops = 0, cross_backward_gemms = 0;
  for (const auto& o : ops) {
    if (o.name.rfind("dcn.cross.", 0) != 0) continue;
    ++cross_ops;
    for (const auto& k : o.kernels) cross_backward_gemms += o.phase == Phase::kBackward && std::holds_alternative<GemmDesc>(k);
  }
  CHECK(cross_ops == 6);                // 3 forward, 3 backward
  CHECK(cross_backward_gemms == 3 * 4);  // dW, dz, dV, dx per layer
  // DDP all-reduces every dense gradient once, in fp32.
  double reduced = 0;
  for (const auto& o : ops)
    if (o.collective && o.name.rfind("allreduce.bucket", 0) == 0) reduced += g.collectives[static_cast<std::size_t>(*o.collective)].desc.bytes;
  CHECK(reduced == Approx(w.dense_parameters() * 4).epsilon(1e-12));
}

TEST_CASE("hybrid dense layout: the bottom MLP on one rank for the global batch, its output exchanged", "[dlrm][hybrid]") {
  const std::string src = PERFCAST_SOURCE_DIR;
  DlrmSpec w = load_workload(src + "/configs/workloads/dlrm_default.json");
  w.bottom_mlp_rank = 2;
  const ExecutionGraph g = build_dlrm_graph(w, default_plan(w, 8), 8, 8);
  auto find = [&](int rank, const std::string& name) -> const Op* {
    for (const auto& o : g.ranks[static_cast<std::size_t>(rank)].ops)
      if (o.name == name) return &o;
    return nullptr;
  };
  // Rank 2 runs the bottom MLP for the whole global batch; the others run none.
  const Op* first = find(2, "bottom_mlp.0");
  REQUIRE(first != nullptr);
  CHECK(std::get<GemmDesc>(first->kernels[0]).m == w.batch_size);
  CHECK(find(5, "bottom_mlp.0") == nullptr);
  CHECK(find(5, "bottom_mlp.0.backward") == nullptr);
  // Every rank takes part in the exchange: rank 2 sends each other rank its local batch's
  // bottom output (local batch x width x 4 B, fp32 MLPs), and nothing to itself.
  const Op* ex = find(5, "bottom_mlp.output_dist");
  REQUIRE(ex != nullptr);
  const auto& pairs = g.collectives[static_cast<std::size_t>(*ex->collective)].desc.pair_bytes;
  const double local = double(w.batch_size / 8) * double(w.bottom_mlp.back()) * 4.0;
  CHECK(pairs[2 * 8 + 5] == local);
  CHECK(pairs[2 * 8 + 2] == 0);
  CHECK(pairs[5 * 8 + 2] == 0);
  REQUIRE(find(5, "bottom_mlp.output_dist.backward") != nullptr);
  // DDP all-reduces the top MLP only: the bottom MLP's weights exist once.
  double reduced = 0;
  for (const auto& o : g.ranks[5].ops)
    if (o.collective && o.name.rfind("allreduce.bucket", 0) == 0) reduced += g.collectives[static_cast<std::size_t>(*o.collective)].desc.bytes;
  CHECK(reduced == Approx((w.dense_parameters() - w.bottom_parameters()) * 4).epsilon(1e-12));
  // Memory: the bottom MLP (weights, gradients, SGD: no state, no DDP bucket) only on rank 2.
  const SystemSpec s = load_system(src + "/configs/systems/dgx_h100.json");
  const auto m = estimate_memory(w, default_plan(w, 8), s);
  CHECK(m[5].dense == Approx((w.dense_parameters() - w.bottom_parameters()) * 12));
  CHECK(m[2].dense - m[5].dense == Approx(w.bottom_parameters() * 8));
  CHECK(m[2].activations > m[5].activations);
}

TEST_CASE("TorchRec semi_sync pipeline: the interaction reads the previous iteration's embeddings", "[dlrm][pipeline]") {
  const std::string src = PERFCAST_SOURCE_DIR;
  DlrmSpec w = load_workload(src + "/configs/workloads/dlrm_mlperf.json");
  w.pipeline = TrainPipeline::kSemiSync;
  const ExecutionGraph g = build_dlrm_graph(w, default_plan(w, 8), 8, 8);
  const auto& ops = g.ranks[1].ops;
  auto index = [&](const std::string& name) { return op_index(ops, name); };
  const int indices = index("input_dist.indices"), exchange = index("output_dist");
  // The lookup reads the indices distributed in this iteration (the next batch's) ...
  CHECK(ops[static_cast<std::size_t>(index("embedding_lookup"))].deps == std::vector<int>{indices});
  // ... and the interaction the embeddings exchanged in the previous one.
  const auto& inter = ops[static_cast<std::size_t>(index("interaction"))];
  CHECK(std::find(inter.prev_deps.begin(), inter.prev_deps.end(), exchange) != inter.prev_deps.end());
  CHECK(std::find(inter.deps.begin(), inter.deps.end(), exchange) == inter.deps.end());
  // Rule: each pipeline stage only removes waits, so on DGX H100 semi_sync <= sparse_dist <= none.
  const SystemSpec s = load_system(src + "/configs/systems/dgx_h100.json");
  double t[3];
  const TrainPipeline kinds[3] = {TrainPipeline::kNone, TrainPipeline::kSparseDist, TrainPipeline::kSemiSync};
  for (int k = 0; k < 3; ++k) {
    w.pipeline = kinds[k];
    t[k] = predict_parsed(s, w, default_plan(w, 8), {})->timeline.iteration_time;
  }
  CHECK(t[1] <= t[0]);
  CHECK(t[2] <= t[1]);
  CHECK(t[2] < t[0]);
}

TEST_CASE("embedding weights and optimizer state per shard, by hand", "[dlrm][memory]") {
  // 1000 rows x 64 fp32 columns: 256,000 B of weights; row-wise Adagrad adds 4 B per row,
  // Adagrad 4 B per element, Adam 8 B per element.
  DlrmSpec w = default_workload();
  const std::pair<const char*, double> cases[] = {{"sgd", 0}, {"rowwise_adagrad", 4000}, {"adagrad", 256000}, {"adam", 512000}};
  for (const auto& [name, state] : cases) {
    w.embedding_optimizer = embedding_optimizer_from_name(name);
    INFO(name);
    CHECK(embedding_weight_and_state_bytes(w, 1000, 64) == Approx(256000 + state));
  }
}

}  // namespace perfcast_test_model_dlrm_builder_test

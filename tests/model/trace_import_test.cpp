// Execution-trace reader, kernel shapes from traces, `replay --kernels predicted` and
// `perfcast import` workloads: hand-worked values on tests/data/kineto_shapes.json and
// tests/data/et_shapes.json (one V100 rank of an 8-rank job: addmm with a split-K reduce,
// relu, an FBGEMM rowwise-Adagrad TBE forward and backward, a cumsum, an NCCL all-reduce
// of 1024 floats, a 4 KiB host-to-device copy), and runs on data (skipped with
// a warning where that folder is absent).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "model/traces/execution_trace.hpp"
#include "model/traces/kineto_trace.hpp"
#include "model/traces/trace_kernels.hpp"
#include "model/predict/trace_predict.hpp"
#include "model/traces/trace_replay.hpp"
#include "model/traces/trace_workload.hpp"
#include "predictors/registry.hpp"
#include "topology/collective_calibration.hpp"
#include "core/json_reader.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_trace_import_test {

using namespace perfcast;

namespace {

constexpr double us = 1e-6;
const std::string kData = std::string(PERFCAST_SOURCE_DIR) + "/tests/data/";
const std::string kRepoData = std::string(PERFCAST_SOURCE_DIR) + "/data/";
const std::string kV100 = std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/dgx1_v100.json";

bool repo_data(const std::string& rel) {
  REQUIRE(std::filesystem::exists(kRepoData + rel));
  return true;
}

KinetoTrace shapes_trace() { return load_kineto_traces({kData + "kineto_shapes.json"}).at(0); }

int op_named(const KinetoTrace& t, const std::string& name) {
  for (std::size_t i = 0; i < t.ops.size(); ++i)
    if (t.ops[i].name == name) return static_cast<int>(i);
  return -1;
}

JsonDocument doc_of(const std::string& text, const std::string& file = "<test>") {
  JsonDocument d;
  d.root = nlohmann::json::parse(text);
  d.file = file;
  return d;
}

}  // namespace

TEST_CASE("kernel shapes from a Kineto trace: GEMM, elementwise, TBE, memcpy, collective", "[trace_kernels]") {
  const KinetoTrace t = shapes_trace();
  REQUIRE(t.gpu.size() == 9);
  const auto s = trace_kernel_shapes(t);
  REQUIRE(s.size() == 9);
  // addmm(bias[256], [16,13], [13,256]): m 16, k 13, n 256, fp32 (volta_sgemm: no TF32).
  CHECK(s[0].family == TraceKernelFamily::kGemm);
  REQUIRE(s[0].desc);
  const auto g = std::get<GemmDesc>(*s[0].desc);
  CHECK(g.m == 16);
  CHECK(g.n == 256);
  CHECK(g.k == 13);
  CHECK(g.batch == 1);
  CHECK(g.dtype == DType::kFp32);
  // The split-K reduce is predicted with its GEMM.
  CHECK(s[1].family == TraceKernelFamily::kGemm);
  CHECK_FALSE(s[1].desc);
  CHECK(s[1].lead == 0);
  // relu on [16,256] fp32: 4096 elements, 4 B read + 4 B written each.
  REQUIRE(s[2].desc);
  const auto e = std::get<ElementwiseDesc>(*s[2].desc);
  CHECK(e.op == "relu");
  CHECK(e.elements == 4096);
  CHECK(e.bytes_per_element == Approx(8));
  // TBE: T = 2 (weights_offsets), B = (129 - 1) / 2 = 64, pooling 640 / 128 = 5,
  // total_D = 128 from the backward node's [64, 128] -> D 64, rows 2000 momenta / 2 tables.
  REQUIRE(s[3].desc);
  const auto fw = std::get<EmbeddingDesc>(*s[3].desc);
  CHECK(fw.pass == EmbeddingPass::kForward);
  CHECK(fw.batch == 64);
  CHECK(fw.optimizer == EmbeddingOptimizer::kRowwiseAdagrad);
  CHECK(fw.index_bytes == 8);
  REQUIRE(fw.tables.size() == 2);
  CHECK(fw.tables[0].rows == 1000);
  CHECK(fw.tables[0].dim == 64);
  CHECK(fw.tables[0].pooling == Approx(5));
  // The cumsum's scan kernel has no predictor.
  CHECK(s[4].family == TraceKernelFamily::kOther);
  CHECK(s[4].reason.find("aten::cumsum") != std::string::npos);
  CHECK(s[5].family == TraceKernelFamily::kCollective);
  REQUIRE(s[6].desc);
  CHECK(std::get<MemcpyDesc>(*s[6].desc).bytes == 4096);
  CHECK(std::get<MemcpyDesc>(*s[6].desc).kind == CopyKind::kHostToDevice);
  // Backward: the sort leads, the backward kernel joins it; same tables, backward pass.
  REQUIRE(s[7].desc);
  const auto bw = std::get<EmbeddingDesc>(*s[7].desc);
  CHECK(bw.pass == EmbeddingPass::kBackward);
  CHECK(bw.tables == fw.tables);
  CHECK(s[8].family == TraceKernelFamily::kEmbedding);
  CHECK(s[8].lead == 7);
}

TEST_CASE("kernel shapes: TF32 kernels, missing widths and the execution trace as fallback", "[trace_kernels]") {
  KinetoTrace t = shapes_trace();
  t.gpu[0].name = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>(Params)";
  CHECK(std::get<GemmDesc>(*trace_kernel_shapes(t)[0].desc).dtype == DType::kTf32);
  {
    // matmul [4, 4, 13] x [13, 256]: one GEMM of m = 16 over the flattened leading dims.
    KinetoTrace m = t;
    auto& op = m.ops[static_cast<std::size_t>(op_named(m, "aten::addmm"))];
    op.name = "aten::matmul";
    op.input_dims = {{4, 4, 13}, {13, 256}};
    op.input_types = {"float", "float"};
    const auto g = std::get<GemmDesc>(*trace_kernel_shapes(m)[0].desc);
    CHECK(g.m == 16);
    CHECK(g.k == 13);
    CHECK(g.n == 256);
    op.input_dims = {{4, 4, 12}, {13, 256}};
    CHECK(trace_kernel_shapes(m)[0].reason == "aten::matmul shapes are not [..., k] x [k, n]");
  }

  // Without the backward node's shape the pooled width is unknown ...
  const int node = op_named(t, "torch::autograd::CppNode<SplitLookupFunction_rowwise_adagrad_Op>");
  const int addmm = op_named(t, "aten::addmm");
  REQUIRE(node >= 0);
  t.ops[static_cast<std::size_t>(node)].input_dims.clear();
  t.ops[static_cast<std::size_t>(addmm)].input_dims.clear();
  auto s = trace_kernel_shapes(t);
  CHECK(s[3].family == TraceKernelFamily::kOther);
  CHECK(s[3].reason.find("pooled width unknown") != std::string::npos);
  CHECK(s[0].family == TraceKernelFamily::kOther);  // addmm without shapes
  // ... the execution trace gives it (TBE output [64, 128]) and the GEMM's input shapes.
  ExecutionTrace et = load_execution_traces({kData + "et_shapes.json"}).at(0);
  CHECK(link_execution_trace(et, t) == 4);  // addmm, relu, TBE, cumsum (by name and order)
  s = trace_kernel_shapes(t, &et);
  REQUIRE(s[3].desc);
  CHECK(std::get<EmbeddingDesc>(*s[3].desc).tables[0].dim == 64);
  REQUIRE(s[0].desc);
  CHECK(std::get<GemmDesc>(*s[0].desc).k == 13);
}

TEST_CASE("execution trace: nodes, parents, tensor data dependencies, links", "[execution_trace]") {
  ExecutionTrace et = load_execution_traces({kData + "et_shapes.json"}).at(0);
  CHECK(et.schema == "1.0.1");
  CHECK(et.pid == 100);
  REQUIRE(et.nodes.size() == 8);
  const EtNode& addmm = et.nodes[2];
  CHECK(addmm.name == "aten::addmm");
  CHECK(addmm.rf_id == 2);
  CHECK(addmm.input_tensors.size() == 3);  // the two Int arguments are not tensors
  CHECK(addmm.input_shapes[1] == std::vector<std::int64_t>{16, 13});
  CHECK(addmm.children == std::vector<int>{3});  // aten::empty
  CHECK(et.nodes[1].children == std::vector<int>{2, 4, 5, 6, 7});
  // relu reads the tensor aten::empty created inside addmm: the dependency is on addmm.
  CHECK(et.nodes[4].data_deps == std::vector<int>{2});
  // cat's tensor list: relu's output and addmm's bias (which no node wrote).
  CHECK(et.nodes[5].input_tensors.size() == 2);
  CHECK(et.nodes[5].data_deps == std::vector<int>{4});
  CHECK(et.nodes[2].data_deps.empty());

  KinetoTrace t = shapes_trace();
  CHECK(link_execution_trace(et, t) == 4);
  CHECK_FALSE(et.linked_by_rf_id);
  const int relu = op_named(t, "aten::relu");
  REQUIRE(et.node_for(relu));
  CHECK(et.node_for(relu)->id == 5);
  // Newer traces carry the record function id: it wins over name order.
  for (auto& o : t.ops) o.record_function_id = -1;
  t.ops[static_cast<std::size_t>(relu)].record_function_id = 4;
  CHECK(link_execution_trace(et, t) == 1);
  CHECK(et.linked_by_rf_id);
  CHECK(et.node_for(relu)->name == "aten::relu");
  CHECK(et.node_for(op_named(t, "aten::addmm")) == nullptr);

  // Pairing with Kineto traces: by pid.
  CHECK(pair_execution_traces({et}, {t}) == std::vector<int>{0});
  CHECK_THROWS_AS(pair_execution_traces({et, et}, {t}), ConfigError);
}

TEST_CASE("execution trace: bad input names the file and JSON path", "[execution_trace]") {
  auto error_of = [](const std::string& text) {
    try {
      (void)parse_execution_trace(text, "et.json");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error_of(R"({"schema": "2.0.0", "nodes": []})").find("/schema") != std::string::npos);
  CHECK(error_of(R"({"nodes": []})").find("/schema") != std::string::npos);
  CHECK(error_of(R"({"schema": "1.0.1", "nodes": [{"name": "x"}]})").find("/nodes/0/id") != std::string::npos);
  CHECK(error_of(R"({"schema": "1.0.1", "nodes": [{"id": 1, "name": "a"}, {"id": 1, "name": "b"}]})").find("twice") !=
        std::string::npos);
  CHECK(error_of("{").find("et.json") != std::string::npos);
}

TEST_CASE("replay with predicted kernels: per-family samples against the trace", "[replay][predicted]") {
  const auto traces = load_kineto_traces({kData + "kineto_shapes.json"});
  const SystemSpec v100 = load_system(kV100);
  ReplayOptions o;
  o.kernels = ReplayKernels::kPredicted;
  o.collectives = ReplayCollectives::kModel;  // the trace holds 1 of the job's 8 ranks: auto keeps the measurement
  o.system = &v100;
  const ReplayResult r = replay_traces(traces, o);
  const auto& info = r.replay->ranks[0];
  REQUIRE(info.samples.size() == 5);  // gemm, relu, TBE forward, copy, TBE backward
  const KernelSample& gemm = info.samples[0];
  CHECK(gemm.family == TraceKernelFamily::kGemm);
  CHECK(gemm.measured == Approx(12 * us));  // sgemm 10 us + split-K reduce 2 us
  CHECK(gemm.kernels == 2);
  GemmDesc g;
  g.m = 16;
  g.n = 256;
  g.k = 13;
  CHECK(gemm.predicted == Approx(predict_kernel(g, v100.gpu).time));
  CHECK(info.samples[4].measured == Approx(35 * us));  // sort 5 us + backward 30 us
  CHECK(r.unrecognized == 1);                          // the scan
  CHECK(r.unrecognized_time == Approx(4 * us));
  CHECK(r.predicted_kernels == 7);
  // The all-reduce of 1024 floats on the job's 8 ranks, against its measured 15 us.
  REQUIRE(r.replay->collective_samples.size() == 1);
  const auto comm = make_collective_model(v100);
  RankGroup eight;
  for (int i = 0; i < 8; ++i) eight.ranks.push_back(i);
  CollectiveDesc ar;
  ar.bytes = 4096;
  CHECK(r.replay->collective_samples[0].predicted == Approx(comm->estimate(ar, eight).time));
  CHECK(r.replay->collective_samples[0].measured == Approx(15 * us));

  REQUIRE(r.families.size() == 5);
  CHECK(r.families[0].name == "gemm");
  CHECK(r.families[0].count == 1);
  CHECK(r.families[0].geomean_abs_error == Approx(std::fabs(gemm.predicted / gemm.measured - 1)));
  CHECK(r.families[1].name == "embedding");
  CHECK(r.families[1].count == 2);
  CHECK(r.families[4].name == "collective");
  // auto (the default): one of the 8 ranks is traced, so the all-reduce keeps its measured
  // 15 us, which includes the traced rank's wait for the other 7.
  ReplayOptions automatic = o;
  automatic.collectives = ReplayCollectives::kAuto;
  const ReplayResult a = replay_traces(traces, automatic);
  CHECK(a.replay->collective_samples.empty());
  CHECK(a.replay->measured_collectives == 1);
  CHECK(a.replay->untraced_communicator == 8);
  REQUIRE(a.replay->timed.collectives.size() == 1);
  CHECK(a.replay->timed.collectives[0].time == Approx(15 * us));
  CHECK(r.replay->timed.collectives[0].time == Approx(comm->estimate(ar, eight).time));
  CHECK(a.families.size() == 4);  // no collective family
  ReplayOptions measured = o;
  measured.collectives = ReplayCollectives::kMeasured;
  CHECK(replay_traces(traces, measured).replay->timed.collectives[0].time == Approx(15 * us));
  // Measured replay of the same trace has no families; predicted needs a system.
  CHECK(replay_traces(traces).families.empty());
  ReplayOptions none;
  none.kernels = ReplayKernels::kPredicted;
  CHECK_THROWS_AS(replay_traces(traces, none), ConfigError);
}

TEST_CASE("family errors: geometric mean of |error| and bias", "[replay][predicted]") {
  KernelSample a{TraceKernelFamily::kGemm, "a", 10 * us, 11 * us, 1};  // +10%
  KernelSample b{TraceKernelFamily::kGemm, "b", 10 * us, 6 * us, 1};   // -40%
  KernelSample c{TraceKernelFamily::kElementwise, "c", 0, 1 * us, 1};  // no measurement: skipped
  const auto f = family_errors({&a, &b, &c});
  REQUIRE(f.size() == 1);
  CHECK(f[0].count == 2);
  CHECK(f[0].geomean_abs_error == Approx(std::sqrt(0.1 * 0.4)));
  CHECK(f[0].bias == Approx(17.0 / 20.0 - 1));
}

TEST_CASE("import: recognized ops, round trip through the workload file, predict", "[import]") {
  const auto traces = load_kineto_traces({kData + "kineto_shapes.json"});
  ImportStats stats;
  const TraceWorkload w = import_trace_workload(traces, {}, "shapes", stats);
  CHECK(stats.ops == 9);
  CHECK(stats.recognized == 8);
  CHECK(stats.unrecognized == 1);
  CHECK(stats.unrecognized_time == Approx(4 * us));
  CHECK(stats.recognized_time == Approx((10 + 2 + 3 + 20 + 15 + 3 + 5 + 30) * us));
  REQUIRE(stats.reasons.size() == 1);
  CHECK(w.group_size == std::vector<int>{8});
  CHECK(w.measured_iteration[0] == Approx(300 * us));

  const std::string text = trace_workload_to_json(w, {{"test", true}});
  const TraceWorkload back = parse_trace_workload(doc_of(text));
  REQUIRE(back.graph.ranks.size() == 1);
  const auto& a = w.graph.ranks[0].ops;
  const auto& b = back.graph.ranks[0].ops;
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("op " << i << " " << a[i].name);
    CHECK(a[i].name == b[i].name);
    CHECK(a[i].stream == b[i].stream);
    CHECK(a[i].deps == b[i].deps);
    CHECK(a[i].collective == b[i].collective);
    CHECK(a[i].host_waits == b[i].host_waits);
    CHECK(back.host_time[0][i] == Approx(w.host_time[0][i]).margin(1e-12));
    REQUIRE(a[i].kernels.size() == b[i].kernels.size());
    for (std::size_t k = 0; k < a[i].kernels.size(); ++k) {
      if (const auto* m = std::get_if<MeasuredKernelDesc>(&a[i].kernels[k])) {
        CHECK(std::get<MeasuredKernelDesc>(b[i].kernels[k]).duration == Approx(m->duration).margin(1e-12));
      } else {
        CHECK(a[i].kernels[k] == b[i].kernels[k]);
      }
    }
  }
  CHECK(back.graph.collectives[0].desc.bytes == 4096);

  // predict: every op runs; a GPU with twice the memory and L2 bandwidth is never slower.
  const SystemSpec v100 = load_system(kV100);
  const auto p = predict_trace(v100, back);
  CHECK(p->timeline.iteration_time > 0);
  SystemSpec fast = v100;
  fast.gpu.memory_bandwidth *= 2;
  fast.gpu.l2_bandwidth *= 2;
  CHECK(predict_trace(fast, back)->timeline.iteration_time <= p->timeline.iteration_time + 1e-12);
  // A collective of 8 ranks does not fit a one-GPU system.
  SystemSpec one = v100;
  one.gpus_per_node = 1;
  CHECK_THROWS_AS(predict_trace(one, back), ConfigError);
}

TEST_CASE("trace workload: bad input names the JSON path", "[import]") {
  auto error_of = [](nlohmann::json j) {
    try {
      (void)parse_trace_workload(doc_of(j.dump(), "w.json"));
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const nlohmann::json good = {
      {"schema", "perfcast.workload"},
      {"schema_version", "1.0"},
      {"model", "trace"},
      {"name", "t"},
      {"collectives", {{{"kind", "all_reduce"}, {"bytes", "4096B"}, {"group_size", 2}}}},
      {"ranks",
       {{{"rank", 0},
         {"ops",
          {{{"name", "a"}, {"host_time", "5us"}, {"kernels", {{{"family", "measured"}, {"name", "k"}, {"duration", "3us"}}}}},
           {{"name", "c"}, {"stream", "communication"}, {"deps", {0}}, {"collective", 0}}}}}}}};
  CHECK(error_of(good) == "no error");
  auto bad = good;
  bad["ranks"][0]["ops"][1]["deps"] = {1};
  CHECK(error_of(bad).find("/ranks/0/ops/1/deps/0") != std::string::npos);
  bad = good;
  bad["ranks"][0]["ops"][0]["kernels"][0]["family"] = "gem";
  CHECK(error_of(bad).find("/ranks/0/ops/0/kernels/0/family") != std::string::npos);
  bad = good;
  bad["ranks"][0]["ops"][1].erase("collective");
  CHECK(error_of(bad).find("issues 0 of the 1 collectives") != std::string::npos);
  bad = good;
  bad["collectives"][0]["bytes"] = "0B";
  CHECK(error_of(bad).find("/collectives/0/bytes") != std::string::npos);
  bad = good;
  bad["ranks"][0]["ops"][0]["host_tme"] = "1us";
  CHECK(error_of(bad).find("host_tme") != std::string::npos);
}

TEST_CASE("PARAM DLRM 8x V100: execution traces link, import and predicted replay run", "[import][data]") {
  if (!repo_data("param-dlrm-v100-8rank/dlrm_pytorch_et.tar.gz")) return;
  auto traces = load_kineto_traces({kRepoData + "param-dlrm-v100-8rank/dlrm_kineto.tar.gz"});
  auto ets = load_execution_traces({kRepoData + "param-dlrm-v100-8rank/dlrm_pytorch_et.tar.gz"});
  REQUIRE(ets.size() == 8);
  const auto pairing = pair_execution_traces(ets, traces);
  std::vector<const ExecutionTrace*> linked;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    ExecutionTrace& et = ets[static_cast<std::size_t>(pairing[i])];
    CHECK(et.pid == traces[i].pid);
    // Every Kineto cpu_op and annotation with an ET node of its name is linked.
    CHECK(link_execution_trace(et, traces[i]) >= 1600);
    linked.push_back(&et);
  }
  ImportStats stats;
  const TraceWorkload w = import_trace_workload(traces, linked, "param", stats);
  CHECK(w.graph.ranks.size() == 8);
  CHECK(stats.recognized > 0);
  CHECK(stats.recognized + stats.unrecognized == stats.ops);

  const SystemSpec v100 = load_system(kV100);
  ReplayOptions o;
  o.kernels = ReplayKernels::kPredicted;
  o.system = &v100;
  o.execution_traces = linked;
  const ReplayResult r = replay_traces(traces, o);
  std::vector<std::string> names;
  for (const auto& f : r.families) names.push_back(f.name);
  for (const char* f : {"gemm", "embedding", "elementwise", "collective"})
    CHECK(std::find(names.begin(), names.end(), f) != names.end());
  for (const auto& rr : r.ranks) CHECK(rr.simulated > 0);
}

TEST_CASE("torch.compile regions: their kernels keep measured times, not a region-shaped guess", "[import][compile]") {
  // One CompiledFunction op (a scalar input: its shapes say nothing) launching a Triton
  // kernel and an aten elementwise kernel, and an aten::mm inside it launching a GEMM.
  nlohmann::json ev = nlohmann::json::array();
  auto op = [&](const std::string& name, double ts, double dur, nlohmann::json dims, nlohmann::json types) {
    ev.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", name}, {"pid", 1}, {"tid", 1}, {"ts", ts}, {"dur", dur},
                  {"args", {{"Input Dims", dims}, {"Input type", types}}}});
  };
  auto launch = [&](int corr, double ts, const std::string& kernel, double kts, double kdur) {
    ev.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"pid", 1}, {"tid", 1}, {"ts", ts},
                  {"dur", 4}, {"args", {{"correlation", corr}}}});
    ev.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", kernel}, {"pid", 0}, {"tid", 7}, {"ts", kts}, {"dur", kdur},
                  {"args", {{"correlation", corr}, {"stream", 7}, {"device", 0}}}});
  };
  ev.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#1"}, {"pid", 1}, {"tid", 1}, {"ts", 0}, {"dur", 9000}});
  op("CompiledFunction", 10, 8000, nlohmann::json::array({nlohmann::json::array()}), {"float"});
  launch(1, 20, "triton_poi_fused_add_mul_0", 30, 4200);
  launch(2, 40, "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float> >", 4300, 3000);
  op("aten::mm", 50, 20, {{1024, 1024}, {1024, 1024}}, {"float", "float"});
  launch(3, 55, "ampere_sgemm_128x64_nn", 7400, 500);
  const nlohmann::json trace = {{"schemaVersion", 1}, {"traceEvents", ev}};
  const KinetoTrace t = parse_kineto_trace(trace.dump(), "compiled.json");
  REQUIRE(t.gpu.size() == 3);
  const auto shapes = trace_kernel_shapes(t);
  for (int i : {0, 1}) {
    INFO("kernel " << t.gpu[static_cast<std::size_t>(i)].name);
    CHECK_FALSE(shapes[static_cast<std::size_t>(i)].recognized());
    CHECK_THAT(shapes[static_cast<std::size_t>(i)].reason, Catch::Contains("torch.compile region (CompiledFunction)"));
  }
  CHECK_THAT(shapes[0].reason, Catch::StartsWith("Triton kernel"));
  CHECK(shapes[2].family == TraceKernelFamily::kGemm);
  CHECK(std::get<GemmDesc>(*shapes[2].desc).m == 1024);
}

}  // namespace perfcast_test_model_trace_import_test

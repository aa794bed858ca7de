// The CUDA executor against the CPU reference: one (and a few) training steps of small
// models, loss and every updated parameter. Skips (with a warning) when the build has no
// CUDA or the machine has no GPU; in a build without CUDA run_dlrm must say so.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "model/sharding_plan.hpp"
#include "profiler/cuda_error.hpp"
#include "profiler/device_info.hpp"
#include "validation/batch_generator.hpp"
#include "validation/dlrm_reference.hpp"
#include "validation/executor.hpp"
#include "validation/executor_trace.hpp"
#if PERFCAST_HAVE_CUDA
#include "validation/device_dlrm.hpp"
#endif

using namespace perfcast;
using namespace perfcast::validation;

namespace {

bool skip_without_gpu() {
  if (profiler::cuda_device_available()) return false;
  WARN("skipped: no CUDA device" << (profiler::cuda_support_built() ? "" : " (built without CUDA)"));
  return true;
}

#if PERFCAST_HAVE_CUDA
/// Elements where |gpu - cpu| > tol * max(1, |cpu|); logs the first few.
std::size_t mismatches(const std::vector<float>& gpu, const std::vector<float>& cpu, double tol, const char* what,
                       std::ostringstream& log) {
  if (gpu.size() != cpu.size()) {
    log << what << ": size " << gpu.size() << " != " << cpu.size() << "\n";
    return std::max(gpu.size(), cpu.size());
  }
  std::size_t bad = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(gpu[i]) - cpu[i]);
    if (!(diff <= tol * std::max(1.0, std::fabs(static_cast<double>(cpu[i]))))) {
      if (++bad <= 5) log << "  " << what << "[" << i << "] gpu " << gpu[i] << " cpu " << cpu[i] << "\n";
    }
  }
  return bad;
}

/// Trains `steps` steps on the GPU and on the CPU from the same initial model and batches;
/// compares every loss and, at the end, every parameter and optimizer state.
void compare(const DlrmConfig& c, double pooling, int steps) {
  const DlrmModel init = init_dlrm_model(c, 11);
  std::vector<DlrmBatch> batches;
  std::int64_t max_indices = 1;
  const std::vector<TableTraffic> traffic(c.tables.size(), TableTraffic{pooling, IndexDistribution::zipf(1.1)});
  for (int i = 0; i < steps; ++i) {
    batches.push_back(generate_dlrm_batch(c, traffic, 11, static_cast<std::uint64_t>(i)));
    max_indices = std::max<std::int64_t>(max_indices, static_cast<std::int64_t>(batches.back().indices.size()));
  }
  DeviceDlrmOptions opt;
  opt.max_indices = max_indices;
  DeviceDlrm dev(init, opt);
  DlrmModel cpu = init;
  for (int i = 0; i < steps; ++i) {
    const int id = dev.add_batch(batches[static_cast<std::size_t>(i)]);
    const double want = dlrm_train_step(cpu, batches[static_cast<std::size_t>(i)]);
    const float got = dev.step(id);
    INFO("step " << i);
    CHECK(got == Approx(want).epsilon(1e-4));
  }
  DlrmModel gpu = init;
  dev.download(gpu);
  std::ostringstream log;
  const double tol = 1e-4;  // fp32 GEMMs and reductions in a different order than the double-accumulating reference
  std::size_t bad_dense = 0, dense = 0;
  for (std::size_t l = 0; l < cpu.bottom.size(); ++l) {
    bad_dense += mismatches(gpu.bottom[l].weight, cpu.bottom[l].weight, tol, "bottom.w", log);
    bad_dense += mismatches(gpu.bottom[l].bias, cpu.bottom[l].bias, tol, "bottom.b", log);
    dense += cpu.bottom[l].weight.size() + cpu.bottom[l].bias.size();
  }
  for (std::size_t l = 0; l < cpu.top.size(); ++l) {
    bad_dense += mismatches(gpu.top[l].weight, cpu.top[l].weight, tol, "top.w", log);
    bad_dense += mismatches(gpu.top[l].bias, cpu.top[l].bias, tol, "top.b", log);
    dense += cpu.top[l].weight.size() + cpu.top[l].bias.size();
  }
  // Adam moves every parameter by about lr * sign(g) whatever |g| is, so a gradient that is
  // zero up to rounding (a cancelling sum) can step either way: allow 1% such elements.
  if (c.dense_optimizer == DenseOptimizer::kAdam) {
    INFO(log.str());
    CHECK(bad_dense <= dense / 100);
  } else {
    INFO(log.str());
    CHECK(bad_dense == 0);
  }
  std::size_t bad = 0;
  bad += mismatches(gpu.embeddings.to_floats(), cpu.embeddings.to_floats(), tol, "embedding", log);
  if (c.embedding_optimizer == EmbeddingOptimizer::kRowwiseAdagrad) {
    bad += mismatches(gpu.rowwise_state, cpu.rowwise_state, 1e-3, "rowwise_state", log);
  }
  INFO(log.str());
  CHECK(bad == 0);
}

/// Every parameter of a model, flat: MLP weights and biases, then the embeddings.
std::vector<double> flat_parameters(const DlrmModel& m) {
  std::vector<double> out;
  for (const auto* layers : {&m.bottom, &m.top}) {
    for (const auto& l : *layers) {
      out.insert(out.end(), l.weight.begin(), l.weight.end());
      out.insert(out.end(), l.bias.begin(), l.bias.end());
    }
  }
  for (const float v : m.embeddings.to_floats()) out.push_back(v);
  return out;
}

/// ||(after_a - before) - (after_b - before)|| / ||after_b - before||: how far one step's
/// update of every parameter is from the reference's, relative to its size.
double relative_update_error(const DlrmModel& before, const DlrmModel& after_a, const DlrmModel& after_b) {
  const auto p0 = flat_parameters(before), pa = flat_parameters(after_a), pb = flat_parameters(after_b);
  REQUIRE(pa.size() == p0.size());
  REQUIRE(pb.size() == p0.size());
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < p0.size(); ++i) {
    const double ua = pa[i] - p0[i], ub = pb[i] - p0[i];
    diff += (ua - ub) * (ua - ub);
    ref += ub * ub;
  }
  return std::sqrt(diff / ref);
}

/// Mixed precision against the fp32 CPU reference: one step from the same model and batch.
/// Half activations round every stored value (relative 2^-11 fp16, 2^-8 bf16), so the loss
/// agrees to a few of those and the whole update (every MLP parameter and embedding row, the
/// fp32 master weights) to a few percent; a missing unscale (x1024), a wrong operand type or
/// a stale half copy of the weights is far outside either bound.
void compare_mixed(const DlrmConfig& c, profiler::WeightPrecision precision, double loss_tol, double update_tol) {
  const DlrmModel init = init_dlrm_model(c, 11);
  const std::vector<TableTraffic> traffic(c.tables.size(), TableTraffic{3, IndexDistribution::zipf(1.1)});
  std::vector<DlrmBatch> batches;
  for (int i = 0; i < 2; ++i) batches.push_back(generate_dlrm_batch(c, traffic, 11, static_cast<std::uint64_t>(i)));
  DeviceDlrmOptions opt;
  opt.mlp_precision = precision;
  opt.max_indices = static_cast<std::int64_t>(std::max(batches[0].indices.size(), batches[1].indices.size()));
  DeviceDlrm dev(init, opt);
  DlrmModel cpu = init;
  const double want0 = dlrm_train_step(cpu, batches[0]);
  const float got0 = dev.step(dev.add_batch(batches[0]));
  CHECK(got0 == Approx(want0).epsilon(loss_tol));
  DlrmModel gpu = init;
  dev.download(gpu);
  const double err = relative_update_error(init, gpu, cpu);
  INFO("relative update error " << err);
  CHECK(err < update_tol);
  // The second step runs on the refreshed half weights: its loss must follow the reference's.
  const double want1 = dlrm_train_step(cpu, batches[1]);
  const float got1 = dev.step(dev.add_batch(batches[1]));
  CHECK(got1 == Approx(want1).epsilon(loss_tol));
}

DlrmConfig small(Interaction inter, DenseOptimizer dopt, EmbeddingOptimizer eopt) {
  DlrmConfig c;
  c.batch_size = 64;
  c.bottom_mlp = {13, 32, 16};
  c.top_mlp = {24, 8, 1};
  c.interaction = inter;
  c.tables = {profiler::TableShape{1000, 16}, profiler::TableShape{50, 16}, profiler::TableShape{7, 16}};
  c.dense_optimizer = dopt;
  c.embedding_optimizer = eopt;
  return c;
}
#endif

}  // namespace

TEST_CASE("executor: one step on the GPU matches the CPU reference", "[validation][gpu]") {
  if (skip_without_gpu()) return;
#if PERFCAST_HAVE_CUDA
  SECTION("dot, SGD, SGD") { compare(small(Interaction::kDot, DenseOptimizer::kSgd, EmbeddingOptimizer::kSgd), 3, 1); }
  SECTION("cat, SGD, row-wise Adagrad") {
    compare(small(Interaction::kCat, DenseOptimizer::kSgd, EmbeddingOptimizer::kRowwiseAdagrad), 2.5, 1);
  }
  SECTION("dot, Adam, row-wise Adagrad, 3 steps") {
    compare(small(Interaction::kDot, DenseOptimizer::kAdam, EmbeddingOptimizer::kRowwiseAdagrad), 4, 3);
  }
#endif
}

TEST_CASE("executor: mixed-precision steps follow the fp32 CPU reference", "[validation][gpu]") {
  if (skip_without_gpu()) return;
#if PERFCAST_HAVE_CUDA
  SECTION("fp16 (loss scale 1024), dot, SGD, SGD") {
    compare_mixed(small(Interaction::kDot, DenseOptimizer::kSgd, EmbeddingOptimizer::kSgd),
                  profiler::WeightPrecision::kFp16, 5e-3, 0.05);
  }
  SECTION("bf16, cat, SGD, row-wise Adagrad") {
    compare_mixed(small(Interaction::kCat, DenseOptimizer::kSgd, EmbeddingOptimizer::kRowwiseAdagrad),
                  profiler::WeightPrecision::kBf16, 3e-2, 0.2);
  }
  SECTION("fp16, dot, Adam, row-wise Adagrad") {
    // Adam's update is about lr * sign(g) per element: compared as a whole it is still close.
    compare_mixed(small(Interaction::kDot, DenseOptimizer::kAdam, EmbeddingOptimizer::kRowwiseAdagrad),
                  profiler::WeightPrecision::kFp16, 5e-3, 0.2);
  }
#endif
}

TEST_CASE("executor: availability is reported, run_dlrm refuses without a device", "[validation]") {
  std::string why;
  const bool ok = executor_available(&why);
  if (ok) {
    CHECK(why.empty());
    return;
  }
  CHECK((why == "this build has no CUDA" || why == "no CUDA device visible"));
  SystemSpec sys;
  DlrmSpec w;
  CHECK_THROWS_AS(run_dlrm(sys, w, ShardingPlan{}, ExecutorOptions{}), profiler::NoCudaDeviceError);
}

TEST_CASE("executor trace: GPU ops as a Chrome trace", "[validation]") {
  profiler::CorrelationResult r;
  profiler::CorrelatedOp k;
  k.gpu.kind = profiler::GpuOpKind::kKernel;
  k.gpu.name = "gemm";
  k.gpu.start_ns = 1'000'000;
  k.gpu.end_ns = 1'004'500;
  k.gpu.device = 0;
  k.gpu.stream = 7;
  profiler::CorrelatedOp c = k;
  c.gpu.kind = profiler::GpuOpKind::kMemcpy;
  c.gpu.name = "memcpy HtoD";
  c.gpu.start_ns = 998'000;
  c.gpu.end_ns = 999'000;
  c.gpu.stream = 8;
  c.gpu.bytes = 4096;
  r.ops = {c, k};
  const auto j = gpu_ops_chrome_trace(r);
  const auto& ev = j.at("traceEvents");
  REQUIRE(ev.size() == 2 + 1 + 2);  // 2 ops, 1 process name, 2 thread names
  CHECK(ev[0].at("name") == "memcpy HtoD");
  CHECK(ev[0].at("ts").get<double>() == Approx(0.0));
  CHECK(ev[0].at("dur").get<double>() == Approx(1.0));  // 1000 ns = 1 us
  CHECK(ev[0].at("args").at("bytes") == 4096);
  CHECK(ev[1].at("ts").get<double>() == Approx(2.0));
  CHECK(ev[1].at("dur").get<double>() == Approx(4.5));
  CHECK(ev[1].at("tid") == 7);
  CHECK(ev[2].at("args").at("name") == "GPU 0");
}

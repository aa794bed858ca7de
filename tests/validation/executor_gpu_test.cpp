// The CUDA executor against the CPU reference: one (and a few) training steps of small
// models, loss and every updated parameter. Skips (with a warning) when the build has no
// CUDA or the machine has no GPU; in a build without CUDA run_dlrm must say so.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "model/graph/sharding_plan.hpp"
#include "profiler/cuda_error.hpp"
#include "profiler/device_info.hpp"
#include "validation/batch_generator.hpp"
#include "validation/dlrm_reference.hpp"
#include "validation/executor.hpp"
#include "validation/executor_trace.hpp"
#if PERFCAST_HAVE_CUDA
#include "validation/device_dlrm.hpp"
#endif

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_validation_executor_gpu_test {

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

/// MLP weights (or biases) of bottom then top layers, flat.
std::vector<double> mlp_flat(const std::vector<DenseLayer>& bottom, const std::vector<DenseLayer>& top, bool weights) {
  std::vector<double> out;
  for (const auto* layers : {&bottom, &top}) {
    for (const auto& l : *layers) {
      const auto& v = weights ? l.weight : l.bias;
      out.insert(out.end(), v.begin(), v.end());
    }
  }
  return out;
}

std::vector<double> embedding_flat(const DlrmModel& m) {
  const auto f = m.embeddings.to_floats();
  return {f.begin(), f.end()};
}

/// ||(a - p0) - (b - p0)|| / ||b - p0||: how far one step's update `a` is from the
/// reference's `b`, relative to the reference update's size.
double relative_update_error(const std::vector<double>& p0, const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == p0.size());
  REQUIRE(b.size() == p0.size());
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < p0.size(); ++i) {
    const double ua = a[i] - p0[i], ub = b[i] - p0[i];
    diff += (ua - ub) * (ua - ub);
    ref += ub * ub;
  }
  REQUIRE(ref > 0);
  return std::sqrt(diff / ref);
}

/// Mixed precision against the fp32 CPU reference, from the same model and batches.
/// Tolerances sized by a one-off CPU emulation of the mixed step made during review (every
/// stored half value rounded, the loss scale applied and undone; a scratch program, not part
/// of the repository, so these are estimates): loss error ~2e-5 (fp16) / 6e-5 (bf16); update
/// errors of the MLP weights, biases and embeddings ~1e-2 (fp16) / 1.5e-2 (bf16) each,
/// checked separately so that no part hides behind a larger one. SGD runs at lr 1 so that a
/// stale half copy of the weights moves the second step's loss by ~2e-2 (far outside
/// loss_tol). Adam's first step is about lr * sign(g) whatever the gradient's scale, so it
/// compares the first moment m = (1 - beta1) g instead: a missing unscale is a factor 1024.
void compare_mixed(DlrmConfig c, profiler::WeightPrecision precision, double loss_tol, double part_tol) {
  c.hyper.dense_lr = 1.0f;
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
  CHECK(relative_update_error(embedding_flat(init), embedding_flat(gpu), embedding_flat(cpu)) < part_tol);
  if (c.dense_optimizer == DenseOptimizer::kAdam) {
    const std::vector<DenseLayer> none;
    const auto m_cpu = mlp_flat(cpu.adam_m, none, true), m_gpu = mlp_flat(gpu.adam_m, none, true);
    CHECK(relative_update_error(std::vector<double>(m_cpu.size(), 0.0), m_gpu, m_cpu) < part_tol);
  } else {
    for (const bool weights : {true, false}) {
      INFO((weights ? "MLP weights" : "MLP biases"));
      CHECK(relative_update_error(mlp_flat(init.bottom, init.top, weights), mlp_flat(gpu.bottom, gpu.top, weights),
                                  mlp_flat(cpu.bottom, cpu.top, weights)) < part_tol);
    }
  }
  // The second step runs on the refreshed half weights: its loss follows the reference's.
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
                  profiler::WeightPrecision::kFp16, 1e-3, 0.05);
  }
  SECTION("bf16, cat, SGD, row-wise Adagrad") {
    compare_mixed(small(Interaction::kCat, DenseOptimizer::kSgd, EmbeddingOptimizer::kRowwiseAdagrad),
                  profiler::WeightPrecision::kBf16, 3e-3, 0.15);
  }
  SECTION("fp16, dot, Adam, row-wise Adagrad") {
    compare_mixed(small(Interaction::kDot, DenseOptimizer::kAdam, EmbeddingOptimizer::kRowwiseAdagrad),
                  profiler::WeightPrecision::kFp16, 1e-3, 0.05);
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

}  // namespace perfcast_test_validation_executor_gpu_test

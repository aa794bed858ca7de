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

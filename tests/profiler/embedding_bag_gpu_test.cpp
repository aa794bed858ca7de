// CUDA kernels against the CPU reference on random problems. Skips (with a warning) when the
// build has no CUDA or the machine has no GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "profiler/device_embedding_bag.hpp"
#include "profiler/device_info.hpp"
#include "profiler/embedding_bag_reference.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_profiler_embedding_bag_gpu_test {

using namespace perfcast::profiler;

namespace {

struct RandomProblem {
  EmbeddingBagLayout layout;
  std::vector<float> values;  // initial weights
  std::vector<float> state;   // initial row-wise state
  std::vector<std::int64_t> indices;
  std::vector<std::int64_t> offsets;
  std::vector<float> grad_output;
};

/// Bags of 0..max_len indices (a fifth forced empty); half of the indices hit the first three
/// rows of their table, so duplicates within and across bags are common.
RandomProblem make_problem(const std::vector<TableShape>& shapes, std::int64_t batch, int max_len,
                           std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  RandomProblem p;
  p.layout = make_embedding_bag_layout(shapes, batch);
  p.values.resize(static_cast<std::size_t>(p.layout.total_weight_elements));
  for (float& v : p.values) v = value(rng);
  p.state.resize(static_cast<std::size_t>(p.layout.total_rows));
  for (float& s : p.state) s = std::abs(value(rng));
  p.offsets.push_back(0);
  for (const TableShape& shape : shapes) {
    for (std::int64_t b = 0; b < batch; ++b) {
      const int len = rng() % 5 == 0 ? 0 : static_cast<int>(rng() % static_cast<std::uint64_t>(max_len + 1));
      for (int i = 0; i < len; ++i) {
        const std::uint64_t range = rng() % 2 == 0 ? std::min<std::uint64_t>(3, shape.rows) : shape.rows;
        p.indices.push_back(static_cast<std::int64_t>(rng() % range));
      }
      p.offsets.push_back(static_cast<std::int64_t>(p.indices.size()));
    }
  }
  p.grad_output.resize(static_cast<std::size_t>(batch * p.layout.total_dim));
  for (float& g : p.grad_output) g = value(rng);
  return p;
}

/// Number of elements where |gpu - cpu| > tol * max(1, |cpu|); describes the first few in `log`.
std::size_t count_mismatches(const std::vector<float>& gpu, const std::vector<float>& cpu, double tol,
                             std::ostringstream& log) {
  if (gpu.size() != cpu.size()) {
    log << "size " << gpu.size() << " != " << cpu.size() << "\n";
    return std::max(gpu.size(), cpu.size());
  }
  std::size_t bad = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    const double diff = std::abs(static_cast<double>(gpu[i]) - cpu[i]);
    if (!(diff <= tol * std::max(1.0, std::abs(static_cast<double>(cpu[i]))))) {
      if (++bad <= 5) log << "  [" << i << "] gpu " << gpu[i] << " cpu " << cpu[i] << "\n";
    }
  }
  return bad;
}

/// Relative tolerance of a stored weight: one unit in the last place of the storage type
/// (the Adagrad sum of squares is added in a different order on the GPU, which can flip a
/// rounding), or a few fp32 ulps.
double weight_tolerance(WeightPrecision p) {
  switch (p) {
    case WeightPrecision::kFp16: return 0x1p-10;
    case WeightPrecision::kBf16: return 0x1p-7;
    case WeightPrecision::kFp32: break;
  }
  return 1e-5;
}

void run_case(const RandomProblem& problem, WeightPrecision precision, PoolingMode pooling,
              OptimizerKind optimizer_kind) {
  INFO("precision " << precision_name(precision) << ", pooling " << pooling_name(pooling) << ", optimizer "
                    << optimizer_name(optimizer_kind) << ", " << problem.indices.size() << " indices");
  const OptimizerConfig optimizer{optimizer_kind, 0.05f, 1e-6f};
  auto cpu_weights = HostEmbeddingWeights::from_floats(precision, problem.values);
  std::vector<float> cpu_state = problem.state;
  DeviceEmbeddingBag gpu(problem.layout, cpu_weights, cpu_state);

  for (int step = 0; step < 2; ++step) {
    INFO("step " << step);
    std::ostringstream log;
    const auto cpu_out =
        embedding_bag_forward_reference(problem.layout, cpu_weights, problem.indices, problem.offsets, pooling);
    const auto gpu_out = gpu.forward(problem.indices, problem.offsets, pooling);
    const std::size_t bad_out = count_mismatches(gpu_out, cpu_out, 1e-5, log);
    INFO("forward mismatches:\n" << log.str());
    CHECK(bad_out == 0);

    embedding_bag_backward_update_reference(problem.layout, cpu_weights, cpu_state, problem.indices,
                                            problem.offsets, pooling, problem.grad_output, optimizer);
    gpu.backward_update(problem.indices, problem.offsets, pooling, problem.grad_output, optimizer);
    std::ostringstream wlog;
    const std::size_t bad_w =
        count_mismatches(gpu.download_weights().to_floats(), cpu_weights.to_floats(), weight_tolerance(precision), wlog);
    INFO("weight mismatches:\n" << wlog.str());
    CHECK(bad_w == 0);
    std::ostringstream slog;
    const std::size_t bad_s = count_mismatches(gpu.download_rowwise_state(), cpu_state, 1e-5, slog);
    INFO("state mismatches:\n" << slog.str());
    CHECK(bad_s == 0);
    // Keep the two sides bit-identical for the next step, so differences do not compound.
    cpu_weights = gpu.download_weights();
    cpu_state = gpu.download_rowwise_state();
  }
}

bool skip_without_device() {
  if (cuda_device_available()) return false;
  WARN("skipped: no CUDA device" << (cuda_support_built() ? "" : " (built without CUDA)"));
  return true;
}

}  // namespace

TEST_CASE("GPU embedding bag matches the CPU reference on random problems", "[profiler][gpu]") {
  if (skip_without_device()) return;
  struct Scenario {
    const char* name;
    std::vector<TableShape> shapes;
    std::int64_t batch;
    int max_len;
  };
  const std::vector<Scenario> scenarios = {
      // dims multiple of 4 and 4-aligned tables: vector loads/stores, small thread groups;
      // a 1-row table makes every index of its table a duplicate.
      {"small aligned dims", {{3, 4}, {50, 8}, {1000, 16}, {7, 12}, {1, 16}}, 33, 12},
      // dims not multiple of 4 (scalar paths), misaligned table starts, dims 1 and 5.
      {"odd dims", {{5, 7}, {100, 33}, {9, 130}, {2, 5}, {64, 1}, {13, 4}}, 17, 9},
      // the largest dims: every lane holds 8 float4 accumulators.
      {"large dims", {{20, 1024}, {301, 1000}, {4, 64}, {11, 3}}, 9, 20},
      // no indices at all: forward writes zeros, backward changes nothing.
      {"all bags empty", {{4, 8}, {3, 6}}, 5, 0},
  };
  std::uint64_t seed = 1234;
  for (const Scenario& s : scenarios) {
    INFO("scenario: " << s.name);
    const RandomProblem problem = make_problem(s.shapes, s.batch, s.max_len, seed++);
    for (const auto precision : {WeightPrecision::kFp32, WeightPrecision::kFp16, WeightPrecision::kBf16}) {
      for (const auto pooling : {PoolingMode::kSum, PoolingMode::kMean}) {
        for (const auto opt : {OptimizerKind::kSgd, OptimizerKind::kRowwiseAdagrad}) {
          run_case(problem, precision, pooling, opt);
        }
      }
    }
  }
}

TEST_CASE("GPU embedding bag reproduces the hand-worked Adagrad example", "[profiler][gpu]") {
  if (skip_without_device()) return;
  // Same numbers as the CPU reference test: rows hit twice in a bag and across bags.
  const std::vector<TableShape> shapes = {{4, 2}};
  const auto layout = make_embedding_bag_layout(shapes, 2);
  const auto weights = HostEmbeddingWeights::from_floats(WeightPrecision::kFp32, std::vector<float>(8, 10.0f));
  const std::vector<float> state = {0, 5, 0, 7};
  DeviceEmbeddingBag gpu(layout, weights, state);
  const std::vector<std::int64_t> indices = {0, 1, 1, 2, 2};
  const std::vector<std::int64_t> offsets = {0, 2, 5};
  gpu.backward_update(indices, offsets, PoolingMode::kSum, std::vector<float>{1, 7, 1, -1},
                      OptimizerConfig{OptimizerKind::kRowwiseAdagrad, 5.0f, 0.0f});
  CHECK(gpu.download_rowwise_state() == std::vector<float>{25, 25, 4, 7});
  CHECK(gpu.download_weights().to_floats() == std::vector<float>{9, 3, 8, 4, 5, 15, 10, 10});
}

}  // namespace perfcast_test_profiler_embedding_bag_gpu_test

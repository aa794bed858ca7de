// The multi-GPU executor's training step (DeviceDlrm ranks with NCCL) against the CPU
// single-process reference: the same model trained on the global batch. With one GPU the
// test runs one rank holding every kind of shard (table_wise, two column_wise halves, a
// row_wise range, a data-parallel copy), so each collective runs with one participant; with
// two GPUs the shards are spread over two ranks. Skips (with a warning) unless the build has
// CUDA and NCCL and a GPU is visible.
#include <cmath>
#include <cstdint>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "plan_builders.hpp"

#include "profiler/device_info.hpp"

#if defined(PERFCAST_HAVE_NCCL) && PERFCAST_HAVE_NCCL
#include "model/graph/sharding_plan.hpp"
#include "model/graph/workload_spec.hpp"
#include "validation/batch_generator.hpp"
#include "validation/device_dlrm.hpp"
#include "validation/dlrm_reference.hpp"
#include "validation/multi_gpu_layout.hpp"
#include "validation/nccl_comm.hpp"
#endif

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_validation_multi_gpu_step_gpu_test {

using namespace perfcast;

#if defined(PERFCAST_HAVE_NCCL) && PERFCAST_HAVE_NCCL
namespace {

using test::shard;

using namespace perfcast::validation;

/// batch 16, bottom 13-16-8 (d = 8), tables A 200, B 60, C 30, D 20 rows (dim 8), dot
/// interaction (8 + 5*4/2 = 18 wide), top 16-1.
DlrmSpec workload(EmbeddingOptimizer eopt, DenseOptimizer dopt) {
  DlrmSpec w;
  w.name = "multi_gpu_step";
  w.file = "multi_gpu_step.json";
  w.batch_size = 16;
  w.bottom_mlp = {13, 16, 8};
  w.top_mlp = {16, 1};
  w.embedding_optimizer = eopt;
  w.dense_optimizer = dopt;
  w.first_bucket = 256;  // two or three DDP buckets for these few-KB layers
  w.gradient_bucket = 1024;
  test::add_tables(w, {{"A", 200}, {"B", 60}, {"C", 30}, {"D", 20}}, 8, 3);
  return w;
}

/// A table_wise on the last rank; B column_wise halves on rank 0 and the last rank (table_wise
/// on rank 0 when !column_wise: row-wise Adagrad keeps one accumulator per shard row, so
/// column_wise shards legitimately differ from the single-process step, as in TorchRec); C
/// row_wise over all ranks; D data_parallel.
ShardingPlan plan_for(int world, bool column_wise) {
  ShardingPlan p;
  p.source = "plan.json";
  const int last = world - 1;
  p.tables.push_back({ShardingType::kTableWise, {last}, {shard(0, 200, 0, 8, last)}});
  if (column_wise) {
    p.tables.push_back({ShardingType::kColumnWise, {0, last}, {shard(0, 60, 0, 4, 0), shard(0, 60, 4, 4, last)}});
  } else {
    p.tables.push_back({ShardingType::kTableWise, {0}, {shard(0, 60, 0, 8, 0)}});
  }
  TableSharding c{ShardingType::kRowWise, {}, {}};
  TableSharding d{ShardingType::kDataParallel, {}, {}};
  const std::int64_t per = 30 / world;
  for (int r = 0; r < world; ++r) {
    c.ranks.push_back(r);
    c.shards.push_back(shard(r * per, r + 1 == world ? 30 - r * per : per, 0, 8, r));
    d.ranks.push_back(r);
    d.shards.push_back(shard(0, 20, 0, 8, r));
  }
  p.tables.push_back(c);
  p.tables.push_back(d);
  return p;
}

/// `mlp`: fp16/bf16 runs the ranks in mixed precision against the fp32 reference: the loss
/// within 5e-3 relative (a few fp16 roundings of the logits) and the MLP weights after the
/// steps within 1e-3 of max(1, |w|) (the SGD steps move them by lr * g, and the half
/// gradients are off by about 1e-3 of that).
void compare(int world, EmbeddingOptimizer eopt, DenseOptimizer dopt, int steps,
             profiler::WeightPrecision mlp = profiler::WeightPrecision::kFp32) {
  const bool fp32 = mlp == profiler::WeightPrecision::kFp32;
  const double loss_tol = fp32 ? 1e-4 : 5e-3, weight_tol = fp32 ? 1e-4 : 1e-3;
  const DlrmSpec w = workload(eopt, dopt);
  const ShardingPlan plan = plan_for(world, eopt == EmbeddingOptimizer::kSgd);
  const MultiGpuLayout layout = multi_gpu_layout(w, plan, world);
  const std::uint64_t seed = 5;
  DlrmModel cpu = init_dlrm_model(dlrm_config_from_spec(w, w.batch_size), seed);
  const DlrmConfig global_cfg = cpu.config;
  const DlrmModel local = init_dlrm_model(dlrm_config_from_spec(w, layout.local_batch), seed, false);
  const auto traffic = table_traffic(w);
  std::vector<DlrmBatch> batches;
  std::vector<std::vector<RankInput>> inputs(static_cast<std::size_t>(world));
  std::vector<DeviceDlrmShard> shards(static_cast<std::size_t>(world));
  for (int i = 0; i < steps; ++i) {
    batches.push_back(generate_dlrm_batch(global_cfg, traffic, seed, static_cast<std::uint64_t>(i)));
    for (int r = 0; r < world; ++r) {
      auto& s = shards[static_cast<std::size_t>(r)];
      RankInput in = split_batch(layout, w, batches.back(), r);
      grow_index_capacity(s.max_indices, in);
      inputs[static_cast<std::size_t>(r)].push_back(std::move(in));
    }
  }
  std::vector<int> devices;
  for (int r = 0; r < world; ++r) devices.push_back(r);
  const auto comms = NcclComm::init_all(devices);
  std::vector<std::unique_ptr<DeviceDlrm>> ranks;
  for (int r = 0; r < world; ++r) {
    auto& s = shards[static_cast<std::size_t>(r)];
    s.layout = &layout;
    s.rank = r;
    s.comm = comms[static_cast<std::size_t>(r)].get();
    DeviceDlrmOptions opt;
    opt.device = r;
    opt.seed = seed;
    opt.mlp_precision = mlp;
    ranks.push_back(std::make_unique<DeviceDlrm>(local, opt, s));
  }
  for (int i = 0; i < steps; ++i) {
    const double want = dlrm_train_step(cpu, batches[static_cast<std::size_t>(i)]);
    std::vector<float> got(static_cast<std::size_t>(world));
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        auto& rank = *ranks[static_cast<std::size_t>(r)];
        got[static_cast<std::size_t>(r)] = rank.step(rank.add_batch(inputs[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)]));
      });
    }
    for (auto& t : threads) t.join();
    double mean = 0;
    for (const float g : got) mean += g;
    mean /= world;
    INFO("step " << i);
    CHECK(mean == Approx(want).epsilon(loss_tol));
  }
  // Every rank ends with the same MLPs, equal to the single-process ones.
  for (int r = 0; r < world; ++r) {
    DlrmModel gpu = local;
    ranks[static_cast<std::size_t>(r)]->download(gpu);
    std::size_t bad = 0, total = 0;
    std::ostringstream log;
    const auto cmp = [&](const std::vector<float>& a, const std::vector<float>& b, const char* what) {
      REQUIRE(a.size() == b.size());
      for (std::size_t k = 0; k < a.size(); ++k) {
        ++total;
        if (!(std::fabs(static_cast<double>(a[k]) - b[k]) <= weight_tol * std::max(1.0, std::fabs(static_cast<double>(b[k]))))) {
          if (++bad <= 5) log << what << "[" << k << "] gpu " << a[k] << " cpu " << b[k] << "\n";
        }
      }
    };
    for (std::size_t l = 0; l < cpu.bottom.size(); ++l) {
      cmp(gpu.bottom[l].weight, cpu.bottom[l].weight, "bottom.w");
      cmp(gpu.bottom[l].bias, cpu.bottom[l].bias, "bottom.b");
    }
    for (std::size_t l = 0; l < cpu.top.size(); ++l) {
      cmp(gpu.top[l].weight, cpu.top[l].weight, "top.w");
      cmp(gpu.top[l].bias, cpu.top[l].bias, "top.b");
    }
    INFO("rank " << r << "\n" << log.str());
    // Adam: a gradient that is zero up to rounding can step either way (see executor_gpu_test).
    CHECK(bad <= (dopt == DenseOptimizer::kAdam ? total / 100 : 0));
  }
}

}  // namespace
#endif

TEST_CASE("multi-GPU executor: sharded ranks train like the single-process CPU reference", "[validation][gpu]") {
#if defined(PERFCAST_HAVE_NCCL) && PERFCAST_HAVE_NCCL
  const int n = profiler::cuda_device_available() ? profiler::cuda_device_count() : 0;
  if (n == 0) {
    WARN("skipped: no CUDA device");
    return;
  }
  const int world = n >= 2 ? 2 : 1;
  SECTION("SGD, SGD, 2 steps") { compare(world, EmbeddingOptimizer::kSgd, DenseOptimizer::kSgd, 2); }
  SECTION("Adam, row-wise Adagrad (no column_wise table), 3 steps") {
    compare(world, EmbeddingOptimizer::kRowwiseAdagrad, DenseOptimizer::kAdam, 3);
  }
  SECTION("fp16 mixed precision (loss scale through DDP buckets and the data-parallel table), SGD, SGD, 2 steps") {
    compare(world, EmbeddingOptimizer::kSgd, DenseOptimizer::kSgd, 2, profiler::WeightPrecision::kFp16);
  }
#else
  WARN("skipped: built without CUDA or NCCL");
#endif
}

}  // namespace perfcast_test_validation_multi_gpu_step_gpu_test

// Multi-GPU parts on real devices: NCCL all-to-allv with the per-pair sizes of a
// multi_gpu_layout (the executor's pooled-embedding exchange), reduce-scatter (row-wise
// partial sums) and the averaging all-reduce of DDP buckets. Skips (with a warning) unless
// the build has CUDA and NCCL and at least two GPUs are visible.
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "plan_builders.hpp"

#include "profiler/device_info.hpp"

#if defined(PERFCAST_HAVE_NCCL) && PERFCAST_HAVE_NCCL
#include <cuda_runtime_api.h>

#include "model/graph/sharding_plan.hpp"
#include "profiler/cuda_check.hpp"
#include "validation/multi_gpu_layout.hpp"
#include "validation/nccl_comm.hpp"
#endif

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_validation_multi_gpu_gpu_test {

namespace {

bool skip_without_two_gpus() {
#if defined(PERFCAST_HAVE_NCCL) && PERFCAST_HAVE_NCCL
  const int n = perfcast::profiler::cuda_device_available() ? perfcast::profiler::cuda_device_count() : 0;
  if (n >= 2) return false;
  WARN("skipped: " << n << " CUDA device(s) visible, the multi-GPU tests need 2");
#else
  WARN("skipped: built without CUDA or NCCL");
#endif
  return true;
}

}  // namespace

#if defined(PERFCAST_HAVE_NCCL) && PERFCAST_HAVE_NCCL
using namespace perfcast;
using namespace perfcast::validation;

namespace {

using test::shard;

/// The 2-rank plan of multi_gpu_layout_test.cpp: rank 0 sends 4 x 2 floats per peer, rank 1 4 x 6.
MultiGpuLayout layout() {
  DlrmSpec w;
  w.file = "tiny.json";
  w.batch_size = 8;
  w.bottom_mlp = {4, 8, 4};
  w.top_mlp = {8, 1};
  test::add_tables(w, {{"A", 100}, {"B", 100}, {"C", 100}}, 4, EmbeddingTableSpec{}.pooling);
  ShardingPlan p;
  p.source = "plan.json";
  p.tables.push_back({ShardingType::kTableWise, {1}, {shard(0, 100, 0, 4, 1)}});
  p.tables.push_back({ShardingType::kColumnWise, {0, 1}, {shard(0, 100, 0, 2, 0), shard(0, 100, 2, 2, 1)}});
  p.tables.push_back({ShardingType::kRowWise, {0, 1}, {shard(0, 50, 0, 4, 0), shard(50, 50, 0, 4, 1)}});
  return multi_gpu_layout(w, p, 2);
}

float sent_value(int src, int dst, std::int64_t k) { return static_cast<float>(1000 * src + 100 * dst) + static_cast<float>(k); }

}  // namespace

TEST_CASE("NCCL: pooled all-to-allv with the layout's per-pair sizes, reduce-scatter, averaging all-reduce",
          "[validation][multi_gpu][gpu]") {
  if (skip_without_two_gpus()) return;
  const MultiGpuLayout L = layout();
  const int world = L.world;
  auto comms = NcclComm::init_all({0, 1});
  std::vector<std::vector<float>> received(2), reduced(2), averaged(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        const auto n = static_cast<std::size_t>(world);
        const auto ur = static_cast<std::size_t>(r);
        PERFCAST_CUDA_CHECK(cudaSetDevice(r));
        cudaStream_t stream = nullptr;
        PERFCAST_CUDA_CHECK(cudaStreamCreate(&stream));
        // Send: to every peer j the block of L.pooled_bytes[r][j] / 4 floats.
        std::vector<std::int64_t> sc(n), sd(n), rc(n), rd(n);
        std::vector<float> send;
        std::int64_t recv_total = 0;
        for (std::size_t j = 0; j < n; ++j) {
          sc[j] = L.pooled_bytes[ur * n + j] / 4;
          sd[j] = static_cast<std::int64_t>(send.size());
          for (std::int64_t k = 0; k < sc[j]; ++k) send.push_back(sent_value(r, static_cast<int>(j), k));
          rc[j] = L.pooled_bytes[j * n + ur] / 4;
          rd[j] = recv_total;
          recv_total += rc[j];
        }
        float *dsend = nullptr, *drecv = nullptr, *dbuf = nullptr;
        PERFCAST_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dsend), send.size() * 4));
        PERFCAST_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&drecv), static_cast<std::size_t>(recv_total) * 4));
        PERFCAST_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dbuf), 8 * 4));
        PERFCAST_CUDA_CHECK(cudaMemcpy(dsend, send.data(), send.size() * 4, cudaMemcpyHostToDevice));
        comms[ur]->all_to_all_v(dsend, sc, sd, drecv, rc, rd, stream);
        received[ur].resize(static_cast<std::size_t>(recv_total));
        PERFCAST_CUDA_CHECK(cudaMemcpyAsync(received[ur].data(), drecv, received[ur].size() * 4, cudaMemcpyDeviceToHost, stream));
        // Reduce-scatter of 8 values (rank r contributes 10 r + i): each rank keeps 4 sums.
        std::vector<float> partial(8);
        for (int i = 0; i < 8; ++i) partial[static_cast<std::size_t>(i)] = static_cast<float>(10 * r + i);
        PERFCAST_CUDA_CHECK(cudaMemcpy(dbuf, partial.data(), 8 * 4, cudaMemcpyHostToDevice));
        comms[ur]->reduce_scatter(dbuf, drecv, 4, stream);
        reduced[ur].resize(4);
        PERFCAST_CUDA_CHECK(cudaMemcpyAsync(reduced[ur].data(), drecv, 16, cudaMemcpyDeviceToHost, stream));
        // Averaging all-reduce (DDP bucket): mean of 10 r + i over the ranks.
        PERFCAST_CUDA_CHECK(cudaMemcpyAsync(dbuf, partial.data(), 8 * 4, cudaMemcpyHostToDevice, stream));
        comms[ur]->all_reduce_mean(dbuf, 8, stream);
        averaged[ur].resize(8);
        PERFCAST_CUDA_CHECK(cudaMemcpyAsync(averaged[ur].data(), dbuf, 32, cudaMemcpyDeviceToHost, stream));
        PERFCAST_CUDA_CHECK(cudaStreamSynchronize(stream));
        cudaFree(dsend);
        cudaFree(drecv);
        cudaFree(dbuf);
        cudaStreamDestroy(stream);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  comms.clear();
  REQUIRE(errors[0].empty());
  REQUIRE(errors[1].empty());
  // Rank 0 receives 8 floats from itself, then 24 from rank 1; rank 1 8 from rank 0, 24 from itself.
  REQUIRE(received[0].size() == 32);
  REQUIRE(received[1].size() == 32);
  for (std::int64_t k = 0; k < 8; ++k) {
    CHECK(received[0][static_cast<std::size_t>(k)] == sent_value(0, 0, k));
    CHECK(received[1][static_cast<std::size_t>(k)] == sent_value(0, 1, k));
  }
  for (std::int64_t k = 0; k < 24; ++k) {
    CHECK(received[0][static_cast<std::size_t>(8 + k)] == sent_value(1, 0, k));
    CHECK(received[1][static_cast<std::size_t>(8 + k)] == sent_value(1, 1, k));
  }
  // Sums of i and 10 + i: rank 0 keeps i = 0..3, rank 1 i = 4..7.
  for (int i = 0; i < 4; ++i) {
    CHECK(reduced[0][static_cast<std::size_t>(i)] == static_cast<float>(10 + 2 * i));
    CHECK(reduced[1][static_cast<std::size_t>(i)] == static_cast<float>(10 + 2 * (i + 4)));
  }
  for (int i = 0; i < 8; ++i) {
    CHECK(averaged[0][static_cast<std::size_t>(i)] == static_cast<float>(5 + i));
    CHECK(averaged[1][static_cast<std::size_t>(i)] == static_cast<float>(5 + i));
  }
}
#else
TEST_CASE("NCCL: pooled all-to-allv with the layout's per-pair sizes, reduce-scatter, averaging all-reduce",
          "[validation][multi_gpu][gpu]") {
  (void)skip_without_two_gpus();
}
#endif

}  // namespace perfcast_test_validation_multi_gpu_gpu_test

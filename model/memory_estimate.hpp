#pragma once
/// \file memory_estimate.hpp
/// First-order device memory per rank: embedding shards with optimizer state, dense
/// parameters with gradients and optimizer state, activations kept for the backward,
/// communication buffers and a fixed reserve. The full memory model (pipeline depth,
/// allocator fragmentation) belongs to the sharding issue.

#include <vector>

#include "model/sharding_plan.hpp"
#include "model/workload_spec.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {

struct RankMemory {
  int rank = 0;
  Bytes embedding = 0;   ///< weights + optimizer state of the rank's shards
  Bytes dense = 0;       ///< MLP weights, gradients, DDP buckets, optimizer state
  Bytes activations = 0; ///< saved activations, embedding outputs and a2a buffers
  Bytes reserved = 0;    ///< CUDA context, cuBLAS workspace, NCCL buffers
  Bytes capacity = 0;    ///< the GPU's memory
  [[nodiscard]] Bytes total() const { return embedding + dense + activations + reserved; }
  [[nodiscard]] bool fits() const { return total() <= capacity; }
};

/// Reserve per GPU for the CUDA context, cuBLAS workspaces and NCCL channel buffers:
/// 2 GiB, assumed (the context alone is ~0.5 GiB on Hopper; NCCL adds ~0.3-1 GiB).
inline constexpr Bytes kDeviceReserve = 2.0 * 1024 * 1024 * 1024;

[[nodiscard]] std::vector<RankMemory> estimate_memory(const DlrmSpec& w, const ShardingPlan& plan, const SystemSpec& s);

}  // namespace perfcast

#pragma once
/// \file memory_estimate.hpp
/// Device memory per rank for a DLRM and a sharding plan:
///  - embedding: the rank's shards (rows x cols x weight bytes) and optimizer state
///    (SGD none, Adam two fp32 moments per element, row-wise Adagrad one fp32 per row);
///  - dense: MLP weights, gradients, DDP bucket copies (fp32) and optimizer state;
///  - io: embedding input and output buffers of the rank's shards for the global batch
///    (indices and offsets in, pooled fp32 rows out, and the received local-batch outputs),
///    times the pipeline depth (in-flight batches);
///  - activations: the MLP and interaction activations kept for the backward, and their
///    gradients;
///  - reserved: a share of HBM held back for the CUDA context, cuBLAS and NCCL buffers and
///    allocator fragmentation;
///  - host: fused_uvm and fused_uvm_caching shards keep their rows and optimizer state in
///    host memory (checked against the rank's share of the node's host_memory); a cached
///    shard adds its HBM cache (load factor x rows x row bytes) and the cache's bookkeeping,
///    rows x (4 + 16 x load factor) bytes (TorchRec's planner estimate,
///    docs/sharding-planners.md section 2.5), to `embedding`.

#include <string>
#include <vector>

#include "model/graph/sharding_plan.hpp"
#include "model/graph/workload_spec.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {

struct RankMemory {
  int rank = 0;
  Bytes embedding = 0;
  Bytes dense = 0;
  Bytes io = 0;
  Bytes activations = 0;
  Bytes reserved = 0;
  Bytes capacity = 0;       ///< the GPU's memory
  Bytes host = 0;           ///< host memory of the rank's fused_uvm / fused_uvm_caching shards
  Bytes host_capacity = 0;  ///< the rank's share of its node's host memory (HostMemorySpec::per_rank)
  /// Device memory (HBM) in use.
  [[nodiscard]] Bytes total() const { return embedding + dense + io + activations + reserved; }
  [[nodiscard]] bool fits_device() const { return total() <= capacity; }
  [[nodiscard]] bool fits_host() const { return host <= host_capacity; }
  [[nodiscard]] bool fits() const { return fits_device() && fits_host(); }
};

struct MemoryOptions {
  /// Share of HBM reserved: 0.15, TorchRec's HeuristicalStorageReservation default
  /// (docs/sharding-planners.md section 2.5).
  double reserved_share = 0.15;
  /// Transformers (estimate_transformer_memory) reserve instead what the software stack holds
  /// besides the tensors it counts: `framework_reserve` bytes (CUDA context with lazy
  /// module loading, cuBLAS / Transformer Engine workspaces, NCCL communicator buffers; an
  /// assumed 2 GiB) plus `fragmentation_share` of HBM (memory PyTorch's caching allocator
  /// holds in partly used blocks; assumed 5%).
  double framework_reserve = 2.0 * 1024 * 1024 * 1024;
  double fragmentation_share = 0.05;
  /// Batches whose embedding inputs are in flight (TorchRec's TRAIN_SPARSE_DIST pipeline
  /// holds 2 inputs; a plain loop 1).
  int pipeline_depth = 1;
};

[[nodiscard]] std::vector<RankMemory> estimate_memory(const DlrmSpec& w, const ShardingPlan& plan, const SystemSpec& s,
                                                      const MemoryOptions& options = {});

/// Embedding weights and optimizer state of `rows` x `cols` of a table of `w`, bytes (SGD
/// none, row-wise Adagrad one fp32 per row, Adam two fp32 moments per element).
[[nodiscard]] Bytes embedding_weight_and_state_bytes(const DlrmSpec& w, double rows, double cols);

/// Bytes one shard of table `t` (of `w`) takes in HBM and in host memory under plan entry `ts`:
/// rows and optimizer state (in host memory for host-stored tables), and the HBM cache.
struct ShardFootprint {
  Bytes device = 0, host = 0;
};
[[nodiscard]] ShardFootprint shard_footprint(const DlrmSpec& w, const TableSharding& ts, const Shard& sh);

/// "" when every rank fits, else e.g. "rank 3 needs 91.2 GiB of 80.0 GiB (embedding 85.1 GiB, ...)"
/// or "rank 0 needs 300 GiB of host memory, 230 GiB available (host_memory ...)".
[[nodiscard]] std::string memory_verdict(const std::vector<RankMemory>& m);

}  // namespace perfcast

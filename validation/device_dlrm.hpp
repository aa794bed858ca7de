#pragma once
/// \file device_dlrm.hpp
/// One DLRM replica training on one GPU (the single-GPU executor): parameters, optimizer
/// state, activations and gradients in device memory; batches staged in pinned host memory
/// and copied host-to-device on a copy stream every step; cuBLASLt GEMMs (bias and ReLU
/// epilogues forward; data and weight gradients backward), the embedding-bag kernels of
/// profiler/kernels (forward, backward with fused SGD / row-wise Adagrad), the dot
/// interaction as two batched GEMMs, BCE, SGD or Adam on the MLPs. Mirrors
/// dlrm_reference.hpp operator by operator. Includes no CUDA header; defined only in CUDA
/// builds (PERFCAST_HAVE_CUDA).
///
/// The same class runs one rank of a multi-GPU run (one thread per GPU, NCCL; see
/// multi_gpu_layout.hpp for what a rank holds and exchanges): the MLPs data-parallel on the
/// rank's local batch, its table_wise/column_wise shards looked up on the global batch and
/// exchanged by an all-to-allv, its row_wise shards' partial sums reduce-scattered, its
/// data-parallel tables looked up locally; backward: the transposed all-to-allv, the
/// all-gather of the row-wise gradients, the data-parallel tables' dense gradient all-reduced
/// and applied densely, the MLP gradients all-reduced (summed) in DDP buckets on a separate
/// communication stream as their layers finish, overlapping the rest of the backward. The
/// logit gradient is divided by the GLOBAL batch, so the summed gradients are the single-GPU
/// step's (dlrm_sharded_reference.hpp is the CPU reference of exactly this algorithm).

#include <array>
#include <cstdint>
#include <memory>

#include "validation/dlrm_reference.hpp"

namespace perfcast::validation {

class NcclComm;
struct MultiGpuLayout;
struct RankInput;

/// One rank of a multi-GPU run.
struct DeviceDlrmShard {
  const MultiGpuLayout* layout = nullptr;  ///< outlives the DeviceDlrm
  int rank = 0;
  const NcclComm* comm = nullptr;          ///< world == layout->world, rank == rank; outlives the DeviceDlrm
  /// Index capacity of the rank's three lookup groups (pooled, row_wise, data_parallel):
  /// the largest GroupInput::indices of the batches it will be given.
  std::array<std::int64_t, 3> max_indices{};
};

/// Static loss scale of fp16 mixed precision: the logit gradient is multiplied by it, the
/// optimizers divide the fp32 MLP gradients by it and the pooled-embedding gradient is
/// divided by it before the embedding backward. 2^10 keeps a 1/batch-sized logit gradient
/// and what the backward makes of it inside fp16's normal range (>= 6.1e-5) without
/// approaching its maximum (65504) for the batches and widths DLRM uses; there is no
/// overflow check (as Apex's static loss scaling; torch.cuda.amp.GradScaler is dynamic).
/// bf16 has fp32's exponent range and needs none (scale 1).
inline constexpr float kFp16LossScale = 1024.0f;

struct DeviceDlrmOptions {
  int device = 0;                 ///< CUDA ordinal
  bool tf32 = false;              ///< fp32 MLPs: GEMMs with CUBLAS_COMPUTE_32F_FAST_TF32 (fp32 storage)
  /// Storage of the MLP and interaction activations and of the GEMM operands. fp16/bf16 is
  /// mixed precision as torch.autocast + fp32 master weights run it: fp32 parameters,
  /// gradients and optimizer state; a half copy of the parameters refreshed after every
  /// optimizer step; half activations with fp32 accumulation in every GEMM and reduction;
  /// weight and bias gradients written in fp32; the loss computed in fp32. Embedding lookups,
  /// their exchanges and gradients stay fp32 (TorchRec's default output dtype).
  profiler::WeightPrecision mlp_precision = profiler::WeightPrecision::kFp32;
  std::int64_t max_indices = 0;   ///< capacity of the index buffer (largest batch's indices)
  std::uint64_t seed = 1;         ///< draws the embeddings on the device when the model has none
};

/// Wall times of one step, seconds.
struct StepTiming {
  double host_s = 0;   ///< host clock: before the H2D copy is enqueued to the loss on the host
  double event_s = 0;  ///< CUDA events around the same work (compute stream)
};

class DeviceDlrm {
 public:
  /// Uploads `model` (MLPs, optimizer state; embeddings and row-wise state, or, when
  /// model.embeddings is empty, draws them on the device exactly as init_dlrm_model would with
  /// options.seed). Throws NoCudaDeviceError / CudaError (out of memory names the bytes) /
  /// std::runtime_error (cuBLASLt status) / std::invalid_argument (model inconsistent).
  DeviceDlrm(const DlrmModel& model, const DeviceDlrmOptions& options);
  /// One rank of a multi-GPU run. `model` holds the MLPs (config.batch_size = the LOCAL batch,
  /// config.tables = every table of the workload) and no embeddings: each shard is drawn on
  /// the device as the slice of the table init_dlrm_model would draw with options.seed.
  /// options.max_indices is ignored (shard.max_indices counts). Throws as above, and
  /// std::logic_error when the build has no NCCL.
  DeviceDlrm(const DlrmModel& model, const DeviceDlrmOptions& options, const DeviceDlrmShard& shard);
  ~DeviceDlrm();
  DeviceDlrm(const DeviceDlrm&) = delete;
  DeviceDlrm& operator=(const DeviceDlrm&) = delete;

  /// Copies `batch` into a new pinned host staging buffer; returns its id. Validates it
  /// against the model (std::invalid_argument), including indices <= max_indices.
  int add_batch(const DlrmBatch& batch);
  /// Multi-GPU rank: stages the rank's share of a global batch (split_batch).
  int add_batch(const RankInput& input);

  /// One training step on staged batch `id`: H2D copy (copy stream), forward, BCE, backward,
  /// optimizers, loss copied to the host and the compute stream synchronized (loss.item()).
  /// Returns the loss before the update.
  float step(int id, StepTiming* timing = nullptr);

  /// Copies parameters and optimizer state back into `model` (same config it was built from;
  /// embeddings resized and filled when the model had none). A multi-GPU rank copies the MLPs
  /// and their optimizer state only (model.embeddings and rowwise_state are cleared).
  void download(DlrmModel& model) const;

  /// Device bytes allocated for the model, activations, batches and workspaces.
  [[nodiscard]] std::size_t device_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace perfcast::validation

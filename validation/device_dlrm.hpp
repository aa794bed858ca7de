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

#include <cstdint>
#include <memory>

#include "validation/dlrm_reference.hpp"

namespace perfcast::validation {

struct DeviceDlrmOptions {
  int device = 0;                 ///< CUDA ordinal
  bool tf32 = false;              ///< MLP GEMMs with CUBLAS_COMPUTE_32F_FAST_TF32 (fp32 storage)
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
  ~DeviceDlrm();
  DeviceDlrm(const DeviceDlrm&) = delete;
  DeviceDlrm& operator=(const DeviceDlrm&) = delete;

  /// Copies `batch` into a new pinned host staging buffer; returns its id. Validates it
  /// against the model (std::invalid_argument), including indices <= max_indices.
  int add_batch(const DlrmBatch& batch);

  /// One training step on staged batch `id`: H2D copy (copy stream), forward, BCE, backward,
  /// optimizers, loss copied to the host and the compute stream synchronized (loss.item()).
  /// Returns the loss before the update.
  float step(int id, StepTiming* timing = nullptr);

  /// Copies parameters and optimizer state back into `model` (same config it was built from;
  /// embeddings resized and filled when the model had none).
  void download(DlrmModel& model) const;

  /// Device bytes allocated for the model, activations, batches and workspaces.
  [[nodiscard]] std::size_t device_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace perfcast::validation

#pragma once
/// \file device_embedding_bag.hpp
/// Owns one embedding-bag problem in GPU memory (weights, row-wise optimizer state, table
/// metadata) and runs the CUDA kernels on host data, synchronously. Used by the GPU tests and
/// as the simplest way to drive the kernels; includes no CUDA header. In a build without CUDA
/// the class exists but its constructor throws NoCudaDeviceError.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "profiler/embedding_bag_layout.hpp"
#include "profiler/embedding_bag_types.hpp"
#include "profiler/host_embedding_weights.hpp"

namespace perfcast::profiler {

class DeviceEmbeddingBag {
 public:
  /// Copies `weights` (layout.total_weight_elements elements) and `rowwise_state` ([total_rows]
  /// fp32, or empty for all zeros) to device `device`. Throws NoCudaDeviceError when no device
  /// is available, std::invalid_argument on size mismatches, CudaError on CUDA failures.
  DeviceEmbeddingBag(EmbeddingBagLayout layout, const HostEmbeddingWeights& weights,
                     std::span<const float> rowwise_state = {}, int device = 0);
  ~DeviceEmbeddingBag();
  DeviceEmbeddingBag(DeviceEmbeddingBag&&) noexcept;
  DeviceEmbeddingBag& operator=(DeviceEmbeddingBag&&) noexcept;
  DeviceEmbeddingBag(const DeviceEmbeddingBag&) = delete;
  DeviceEmbeddingBag& operator=(const DeviceEmbeddingBag&) = delete;

  [[nodiscard]] const EmbeddingBagLayout& layout() const;

  /// Runs the forward kernel on one batch and returns the [B, total_dim] fp32 output.
  /// The batch is validated on the host first (validate_embedding_bag_batch).
  [[nodiscard]] std::vector<float> forward(std::span<const std::int64_t> indices,
                                           std::span<const std::int64_t> offsets, PoolingMode pooling);

  /// Runs the backward + fused optimizer kernels on one batch, updating the device weights and
  /// state; grad_output is [B, total_dim] fp32. Validated on the host first.
  void backward_update(std::span<const std::int64_t> indices, std::span<const std::int64_t> offsets,
                       PoolingMode pooling, std::span<const float> grad_output, const OptimizerConfig& optimizer);

  /// Copies the current device weights back to the host.
  [[nodiscard]] HostEmbeddingWeights download_weights() const;
  /// Copies the current row-wise optimizer state ([total_rows] fp32) back to the host.
  [[nodiscard]] std::vector<float> download_rowwise_state() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace perfcast::profiler

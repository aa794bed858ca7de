#pragma once
/// \file kernels/embedding_bag.hpp
/// Host-callable launchers of the CUDA embedding-bag kernels (kernels/embedding_bag.cu).
/// Includes no CUDA header. The launchers are defined only when PERFCAST_HAVE_CUDA is 1;
/// code that may run without CUDA should use DeviceEmbeddingBag (device_embedding_bag.hpp)
/// or check cuda_device_available() first.
///
/// Results match the CPU reference (embedding_bag_reference.hpp) up to fp32 rounding of the
/// row-wise Adagrad sum of squares (summed in a different order here). All launchers only
/// enqueue work on `stream` (a cudaStream_t passed as void*; nullptr = legacy default
/// stream) and return without synchronizing. They throw std::invalid_argument on bad host-side
/// arguments and CudaError when a launch fails; errors during execution surface at the next
/// synchronizing call.

#include <cstddef>
#include <cstdint>

#include "profiler/embedding_bag_types.hpp"
#include "profiler/embedding_table_meta.hpp"

namespace perfcast::profiler {
struct EmbeddingBagLayout;  // embedding_bag_layout.hpp (C++20; this header stays C++17 for nvcc)
}  // namespace perfcast::profiler

namespace perfcast::profiler::kernels {

/// One batch on the device. Every pointer is a device pointer; the sizes are host values
/// describing them. The index data must satisfy validate_embedding_bag_batch(); the kernels
/// do not read out of bounds even if it does not (an index outside its table is skipped), but
/// the results are then unspecified.
struct EmbeddingBagDeviceBatch {
  const EmbeddingTableMeta* tables = nullptr;  ///< [num_tables], a copy of EmbeddingBagLayout::tables
  std::int32_t num_tables = 0;
  std::int32_t batch_size = 0;              ///< B
  std::int32_t total_dim = 0;               ///< width of an output row
  std::int32_t max_dim = 0;                 ///< largest table dim, 1 .. kMaxEmbeddingDim
  std::int64_t total_rows = 0;              ///< rows of all tables (length of the row-wise state)
  const std::int64_t* indices = nullptr;    ///< [num_indices]
  std::int64_t num_indices = 0;             ///< < 2^31
  const std::int64_t* offsets = nullptr;    ///< [num_tables * batch_size + 1]
  WeightPrecision precision = WeightPrecision::kFp32;  ///< storage type of the weights
  PoolingMode pooling = PoolingMode::kSum;
};

/// Fills the host-side sizes of a batch from `layout`; the caller sets the pointers.
/// (Plain C++, defined in every build.)
[[nodiscard]] EmbeddingBagDeviceBatch make_device_batch(const EmbeddingBagLayout& layout, WeightPrecision precision,
                                                        PoolingMode pooling, std::int64_t num_indices);

/// Forward: output[B, total_dim] (fp32, device) = pooled rows of `weights` (device, flat
/// buffer of `batch.precision` elements laid out as in EmbeddingBagLayout). Every output
/// element is written; an empty bag gives zeros.
void launch_embedding_bag_forward(const EmbeddingBagDeviceBatch& batch, const void* weights, float* output,
                                  void* stream);

/// Bytes of device scratch memory launch_embedding_bag_backward_update needs for up to
/// `num_indices` indices on the current device. Queries CUB, so it needs a device (throws
/// CudaError otherwise).
[[nodiscard]] std::size_t embedding_bag_backward_workspace_bytes(std::int64_t num_indices);

/// Backward with the optimizer step fused in: updates `weights` (device) in place, and
/// `rowwise_state` (device, fp32 [total_rows]; only for kRowwiseAdagrad, may be nullptr for
/// kSgd), given grad_output (device, fp32 [B, total_dim]). Duplicate rows (within a bag or
/// across bags) are combined before the single update of each row: (row, bag) pairs are
/// radix-sorted by row with CUB, then one thread group per distinct row sums its gradient and
/// applies the update. A row that occurs k times is summed serially by its group (k steps);
/// FBGEMM splits such long runs over several warps, so heavily skewed batches run slower here. `workspace` (device, 256-byte aligned) must hold
/// embedding_bag_backward_workspace_bytes(batch.num_indices) bytes and must not be used by
/// other work until this batch has finished on `stream`.
void launch_embedding_bag_backward_update(const EmbeddingBagDeviceBatch& batch, void* weights, float* rowwise_state,
                                          const float* grad_output, const OptimizerConfig& optimizer,
                                          void* workspace, std::size_t workspace_bytes, void* stream);

}  // namespace perfcast::profiler::kernels

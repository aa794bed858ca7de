#pragma once
/// \file embedding_bag_reference.hpp
/// CPU reference of the batched pooled embedding-bag operator (forward, and backward with a
/// fused optimizer update). Slow and simple; it defines the results the CUDA kernels in
/// kernels/embedding_bag.hpp must reproduce. Data layout: see embedding_bag_layout.hpp.
///
/// Arithmetic contract (shared with the kernels): weights are loaded exactly into fp32; a bag
/// is summed in fp32 in index order; mean pooling multiplies by inv_len = 1.0f / len (an empty
/// bag gives 0). Backward: the gradient of a row is the fp32 sum, in position order, of
/// grad_output[b] * scale over every occurrence of the row in the batch (scale = 1 for sum,
/// inv_len of the bag for mean); every touched row is then updated once and the new weight is
/// rounded to nearest even into the storage precision. Untouched rows and their state are left
/// unchanged.

#include <cstdint>
#include <span>
#include <vector>

#include "profiler/embedding_bag_layout.hpp"
#include "profiler/embedding_bag_types.hpp"
#include "profiler/host_embedding_weights.hpp"

namespace perfcast::profiler {

/// Pooled lookup. `output` must hold B * total_dim floats and is overwritten:
/// output[b * total_dim + output_offset_t + c] = pool over i in bag (t, b) of W_t[indices[i]][c].
/// Throws std::invalid_argument / std::out_of_range on inconsistent sizes, offsets or indices.
void embedding_bag_forward_reference(const EmbeddingBagLayout& layout, const HostEmbeddingWeights& weights,
                                     std::span<const std::int64_t> indices, std::span<const std::int64_t> offsets,
                                     PoolingMode pooling, std::span<float> output);

/// Same, returning a newly allocated [B, total_dim] output.
[[nodiscard]] std::vector<float> embedding_bag_forward_reference(const EmbeddingBagLayout& layout,
                                                                 const HostEmbeddingWeights& weights,
                                                                 std::span<const std::int64_t> indices,
                                                                 std::span<const std::int64_t> offsets,
                                                                 PoolingMode pooling);

/// Backward of the pooled lookup with the optimizer step fused in, updating `weights` in place.
/// `grad_output` is [B, total_dim] fp32 (dLoss/dOutput). `rowwise_state` is the row-wise
/// Adagrad accumulator, one fp32 per row of all tables ([total_rows]); it is required for
/// kRowwiseAdagrad and ignored (may be empty) for kSgd.
/// Per touched row r with summed gradient g (length dim):
///   SGD:              w_r = w_r - lr * g
///   row-wise Adagrad: state_r += (sum_c g_c^2) / dim;  m = lr / (sqrt(state_r) + eps);  w_r = w_r - m * g
/// Throws std::invalid_argument / std::out_of_range on inconsistent sizes, offsets or indices
/// (before changing anything).
void embedding_bag_backward_update_reference(const EmbeddingBagLayout& layout, HostEmbeddingWeights& weights,
                                             std::span<float> rowwise_state, std::span<const std::int64_t> indices,
                                             std::span<const std::int64_t> offsets, PoolingMode pooling,
                                             std::span<const float> grad_output, const OptimizerConfig& optimizer);

}  // namespace perfcast::profiler

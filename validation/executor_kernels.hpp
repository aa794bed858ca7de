#pragma once
/// \file executor_kernels.hpp
/// Host launchers of the executor's small CUDA kernels (executor_kernels.cu): weight init,
/// interaction gather/scatter, ReLU backward, bias gradient, BCE loss, dense optimizers.
/// C++17 and free of CUDA headers (streams are cudaStream_t passed as void*). Every launcher
/// only enqueues work on `stream` and throws CudaError when the launch fails. Element counts
/// are int64; the kernels use grid-stride loops.

#include <cstdint>

#include "profiler/embedding_bag_types.hpp"

namespace perfcast::validation::kernels {

/// p[i] = counter_uniform(seed, stream_id, i, lo, hi) for i < n, stored as `precision`
/// (rounded to nearest even), the same values init_dlrm_model draws on the host.
void launch_fill_counter_uniform(void* p, profiler::WeightPrecision precision, std::int64_t n, std::uint64_t seed,
                                 std::uint64_t stream_id, float lo, float hi, void* stream);

/// A rows x cols slice of a matrix with full_cols columns, starting at (first_row,
/// first_col): element (r, c) of p is the value element (first_row + r, first_col + c) of the
/// whole matrix gets from launch_fill_counter_uniform, i.e. counter index
/// (first_row + r) * full_cols + first_col + c. The shards of a multi-GPU run draw exactly
/// the values of the single-GPU tables they are cut from.
void launch_fill_counter_uniform_slice(void* p, profiler::WeightPrecision precision, std::int64_t rows,
                                       std::int64_t cols, std::int64_t full_cols, std::int64_t first_row,
                                       std::int64_t first_col, std::uint64_t seed, std::uint64_t stream_id, float lo,
                                       float hi, void* stream);

/// Column map between the pooled embeddings [rows, width] (row-major) and the multi-GPU
/// exchange buffer: element (s, k) of pooled corresponds to exch[base[k] + s * stride[k]]
/// (base, stride: device arrays of `width`). to_pooled: pooled = exch (forward, after the
/// collectives); otherwise exch = pooled (backward, before them). Every k must map to
/// distinct exchange elements.
void launch_column_map(float* pooled, std::int64_t width, float* exch, const std::int64_t* base,
                       const std::int32_t* stride, std::int64_t rows, bool to_pooled, void* stream);

/// Optimizer step of one data-parallel embedding table from its dense gradient `grad`
/// ([rows, dim] fp32, already summed over ranks): SGD w -= lr g, or row-wise Adagrad
/// (state[r] += mean(g_r^2); w_r -= lr / (sqrt(state[r]) + eps) g_r) as the fused backward of
/// profiler/kernels does it; rows whose gradient is all zero are not touched (the sparse
/// update never sees them). `weights` are `precision` elements, fp32 arithmetic, one rounding.
void launch_dense_embedding_update(void* weights, profiler::WeightPrecision precision, const float* grad,
                                   float* rowwise_state, std::int64_t rows, std::int64_t dim,
                                   const profiler::OptimizerConfig& optimizer, void* stream);

/// out[b, :] = [a[b, 0:wa], c[b, 0:wc]] for b < batch: row concatenation of two row-major
/// matrices. Dot interaction: the features F [batch, T+1, d] = [bottom, pooled] (the operand of
/// the batched GEMM Z_b = F_b F_b^T); cat interaction: the output itself.
void launch_concat_rows(const float* a, std::int64_t wa, const float* c, std::int64_t wc, float* out,
                        std::int64_t batch, void* stream);

/// Inverse of launch_concat_rows: a[b] = in[b, 0:wa] (+ add[b, 0:wa] when add != nullptr,
/// `add` row-major with row stride add_stride), c[b] = in[b, wa:wa+wc].
void launch_split_rows(const float* in, std::int64_t wa, std::int64_t wc, float* a, const float* add,
                       std::int64_t add_stride, float* c, std::int64_t batch, void* stream);

/// Dot interaction, forward, part 2: out[b] = [bottom[b] (d), Z_b[i][j] for i = 1..n-1, j < i]
/// with Z [batch, n, n] row-major (n = T + 1).
void launch_interaction_gather(const float* bottom, std::int64_t d, const float* z, std::int64_t n, float* out,
                               std::int64_t batch, void* stream);

/// Dot interaction, backward, part 1: from dOut [batch, d + n(n-1)/2], the symmetric
/// S_b[i][j] = S_b[j][i] = dOut[b, d + pair(i, j)], S_b[i][i] = 0 ([batch, n, n]), so that
/// dF_b = S_b F_b (one batched GEMM).
void launch_interaction_scatter(const float* dout, std::int64_t d, std::int64_t n, float* s, std::int64_t batch,
                                void* stream);

/// ReLU backward in place: g[i] = y[i] > 0 ? g[i] : 0, for i < n.
void launch_relu_backward(float* g, const float* y, std::int64_t n, void* stream);

/// Bias gradient: db[o] = sum over b < rows of g[b, o] (g row-major [rows, cols]), fp32
/// accumulation in a fixed order (deterministic).
void launch_bias_grad(const float* g, std::int64_t rows, std::int64_t cols, float* db, void* stream);

/// Mean binary cross-entropy with logits. One block: loss[0] = mean over b < batch of
/// max(z,0) - z*y + log1p(exp(-|z|)) (fp32, deterministic order); dz[b] = (sigmoid(z_b) - y_b) /
/// grad_denominator: the batch itself on one GPU, the GLOBAL batch on each rank of a
/// multi-GPU run (so that summing the ranks' gradients gives the single-GPU gradient).
void launch_bce_with_logits(const float* z, const float* y, std::int64_t batch, std::int64_t grad_denominator,
                            float* loss, float* dz, void* stream);

/// SGD: w[i] -= lr * g[i], for i < n.
void launch_sgd(float* w, const float* g, std::int64_t n, float lr, void* stream);

/// Adam (torch.optim.Adam, no weight decay) with the bias corrections c1 = 1/(1 - beta1^t),
/// c2 = 1/(1 - beta2^t) computed by the caller: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
/// w -= lr * (m c1) / (sqrt(v c2) + eps).
void launch_adam(float* w, const float* g, float* m, float* v, std::int64_t n, float lr, float beta1, float beta2,
                 float eps, float c1, float c2, void* stream);

}  // namespace perfcast::validation::kernels

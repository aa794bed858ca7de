#pragma once
/// \file executor_kernels.hpp
/// Host launchers of the executor's small CUDA kernels (executor_kernels.cu): weight init,
/// interaction gather/scatter, ReLU backward, bias gradient, BCE loss, dense optimizers,
/// precision conversion (mixed precision).
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

// Activation kernels. `act` is the storage of the MLP/interaction activations and their
// gradients (void* arguments): fp32, or fp16/bf16 in mixed precision. Every value is loaded
// to fp32, computed in fp32 and rounded once (to nearest even) when stored; float* arguments
// are fp32 whatever `act` is (pooled embeddings and their gradients, labels, loss, bias
// gradients).

/// out[b, :] = [a[b, 0:wa], c[b, 0:wc]] for b < batch: row concatenation of two row-major
/// matrices (a, out: act; c: fp32). Dot interaction: the features F [batch, T+1, d] =
/// [bottom, pooled] (the operand of the batched GEMM Z_b = F_b F_b^T); cat interaction: the
/// output itself.
void launch_concat_rows(const void* a, std::int64_t wa, const float* c, std::int64_t wc, void* out,
                        std::int64_t batch, profiler::WeightPrecision act, void* stream);

/// Inverse of launch_concat_rows: a[b] = in[b, 0:wa] (+ add[b, 0:wa] when add != nullptr,
/// `add` row-major with row stride add_stride), c[b] = in[b, wa:wa+wc] * c_scale (in, a, add:
/// act; c: fp32). c_scale undoes a loss scale before the embedding backward (1 otherwise).
void launch_split_rows(const void* in, std::int64_t wa, std::int64_t wc, void* a, const void* add,
                       std::int64_t add_stride, float* c, float c_scale, std::int64_t batch,
                       profiler::WeightPrecision act, void* stream);

/// Dot interaction, forward, part 2: out[b] = [bottom[b] (d), Z_b[i][j] for i = 1..n-1, j < i]
/// with Z [batch, n, n] row-major (n = T + 1). All act.
void launch_interaction_gather(const void* bottom, std::int64_t d, const void* z, std::int64_t n, void* out,
                               std::int64_t batch, profiler::WeightPrecision act, void* stream);

/// Dot interaction, backward, part 1: from dOut [batch, d + n(n-1)/2], the symmetric
/// S_b[i][j] = S_b[j][i] = dOut[b, d + pair(i, j)], S_b[i][i] = 0 ([batch, n, n]), so that
/// dF_b = S_b F_b (one batched GEMM). All act.
void launch_interaction_scatter(const void* dout, std::int64_t d, std::int64_t n, void* s, std::int64_t batch,
                                profiler::WeightPrecision act, void* stream);

/// ReLU backward in place: g[i] = y[i] > 0 ? g[i] : 0, for i < n. Both act.
void launch_relu_backward(void* g, const void* y, std::int64_t n, profiler::WeightPrecision act, void* stream);

/// Bias gradient: db[o] = sum over b < rows of g[b, o] (g: act, row-major [rows, cols]; db:
/// fp32), fp32 accumulation in a fixed order (deterministic).
void launch_bias_grad(const void* g, std::int64_t rows, std::int64_t cols, float* db, profiler::WeightPrecision act,
                      void* stream);

/// Mean binary cross-entropy with logits z (act; loss in fp32 as autocast runs it). One
/// block: loss[0] = mean over b < batch of max(z,0) - z*y + log1p(exp(-|z|)) (fp32,
/// deterministic order); dz[b] (act) = (sigmoid(z_b) - y_b) * loss_scale / grad_denominator:
/// grad_denominator is the batch itself on one GPU, the GLOBAL batch on each rank of a
/// multi-GPU run (so that summing the ranks' gradients gives the single-GPU gradient);
/// loss_scale is 1 except for fp16 (see DeviceDlrm).
void launch_bce_with_logits(const void* z, const float* y, std::int64_t batch, std::int64_t grad_denominator,
                            float loss_scale, float* loss, void* dz, profiler::WeightPrecision act, void* stream);

/// dst[i] = src[i] rounded to `precision` (nearest even), for i < n (fp32 dense features to
/// half activations).
void launch_convert(const float* src, void* dst, std::int64_t n, profiler::WeightPrecision precision, void* stream);

/// One segment of launch_convert_segments: n elements from src + src_at to dst + dst_at.
struct ConvertSegment {
  std::int64_t src_at = 0, dst_at = 0, n = 0;
};

/// For every segment s < count (`segments`: a DEVICE array), dst[s.dst_at + i] =
/// src[s.src_at + i] rounded to `precision`, i < s.n: the refresh of the half copy of the
/// fp32 master parameters, every tensor at its own aligned place, in one launch.
void launch_convert_segments(const float* src, void* dst, const ConvertSegment* segments, int count,
                             std::int64_t max_n, profiler::WeightPrecision precision, void* stream);

/// SGD: w[i] -= lr * (g[i] * grad_scale), for i < n (grad_scale: 1 / loss scale).
void launch_sgd(float* w, const float* g, std::int64_t n, float lr, float grad_scale, void* stream);

/// Adam (torch.optim.Adam, no weight decay) with the bias corrections c1 = 1/(1 - beta1^t),
/// c2 = 1/(1 - beta2^t) computed by the caller, on the unscaled gradient g = g[i] * grad_scale:
/// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; w -= lr * (m c1) / (sqrt(v c2) + eps).
void launch_adam(float* w, const float* g, float* m, float* v, std::int64_t n, float lr, float beta1, float beta2,
                 float eps, float c1, float c2, float grad_scale, void* stream);

}  // namespace perfcast::validation::kernels

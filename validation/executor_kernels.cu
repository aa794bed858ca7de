#include "validation/executor_kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>

#include "profiler/cuda_check.hpp"
#include "validation/counter_rng.hpp"

namespace perfcast::validation::kernels {
namespace {

constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over n elements (at most 65535 * 16 blocks; enough to fill
/// any current GPU, the loop covers the rest).
unsigned blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<std::int64_t>(b, 1, 65535 * 16));
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

void check_launch() { PERFCAST_CUDA_CHECK(cudaGetLastError()); }

__global__ void fill_counter_uniform_kernel(void* p, int precision, std::int64_t rows, std::int64_t cols,
                                            std::int64_t full_cols, std::int64_t first_row, std::int64_t first_col,
                                            std::uint64_t seed, std::uint64_t stream_id, float lo, float hi) {
  const std::int64_t n = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t counter = (first_row + i / cols) * full_cols + first_col + i % cols;
    const float v = counter_uniform(seed, stream_id, static_cast<std::uint64_t>(counter), lo, hi);
    if (precision == 0) {
      static_cast<float*>(p)[i] = v;
    } else if (precision == 1) {
      static_cast<__half*>(p)[i] = __float2half_rn(v);
    } else {
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
    }
  }
}

__global__ void concat_rows_kernel(const float* a, std::int64_t wa, const float* c, std::int64_t wc, float* out,
                                   std::int64_t batch) {
  const std::int64_t w = wa + wc, n = batch * w;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t b = i / w, k = i % w;
    out[i] = k < wa ? a[b * wa + k] : c[b * wc + (k - wa)];
  }
}

__global__ void split_rows_kernel(const float* in, std::int64_t wa, std::int64_t wc, float* a, const float* add,
                                  std::int64_t add_stride, float* c, std::int64_t batch) {
  const std::int64_t w = wa + wc, n = batch * w;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t b = i / w, k = i % w;
    if (k < wa) {
      a[b * wa + k] = add ? in[i] + add[b * add_stride + k] : in[i];
    } else {
      c[b * wc + (k - wa)] = in[i];
    }
  }
}

/// Pair (i, j), j < i, of output column p (0-based after the dense part): i is the largest
/// integer with i(i-1)/2 <= p, as DLRM's li/lj lists enumerate rows then columns.
__device__ void pair_of(std::int64_t p, std::int64_t& i, std::int64_t& j) {
  i = static_cast<std::int64_t>((1.0 + sqrt(1.0 + 8.0 * static_cast<double>(p))) / 2.0);
  while (i * (i - 1) / 2 > p) --i;
  while ((i + 1) * i / 2 <= p) ++i;
  j = p - i * (i - 1) / 2;
}

__global__ void interaction_gather_kernel(const float* bottom, std::int64_t d, const float* z, std::int64_t n,
                                          float* out, std::int64_t batch) {
  const std::int64_t pairs = n * (n - 1) / 2, w = d + pairs, total = batch * w;
  for (std::int64_t q = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; q < total;
       q += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t b = q / w, k = q % w;
    if (k < d) {
      out[q] = bottom[b * d + k];
    } else {
      std::int64_t i = 0, j = 0;
      pair_of(k - d, i, j);
      out[q] = z[(b * n + i) * n + j];
    }
  }
}

__global__ void interaction_scatter_kernel(const float* dout, std::int64_t d, std::int64_t n, float* s,
                                           std::int64_t batch) {
  const std::int64_t pairs = n * (n - 1) / 2, w = d + pairs, total = batch * n * n;
  for (std::int64_t q = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; q < total;
       q += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t b = q / (n * n), r = q % (n * n), i = r / n, j = r % n;
    float v = 0.0f;
    if (i > j) v = dout[b * w + d + i * (i - 1) / 2 + j];
    if (j > i) v = dout[b * w + d + j * (j - 1) / 2 + i];
    s[q] = v;
  }
}

__global__ void relu_backward_kernel(float* g, const float* y, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if (!(y[i] > 0.0f)) g[i] = 0.0f;
  }
}

/// Block (32, 32): threadIdx.x picks a column of the block's 32, threadIdx.y strides the
/// rows; partial sums are reduced in shared memory in a fixed order.
__global__ void bias_grad_kernel(const float* g, std::int64_t rows, std::int64_t cols, float* db) {
  __shared__ float part[32][33];
  const std::int64_t col = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.0f;
  if (col < cols) {
    for (std::int64_t r = threadIdx.y; r < rows; r += 32) acc += g[r * cols + col];
  }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float s = 0.0f;
    for (int k = 0; k < 32; ++k) s += part[k][threadIdx.x];
    db[col] = s;
  }
}

__global__ void bce_kernel(const float* z, const float* y, std::int64_t batch, std::int64_t grad_denominator,
                           float* loss, float* dz) {
  __shared__ float part[kThreads];
  float acc = 0.0f;
  const float inv_b = 1.0f / static_cast<float>(batch);
  const float inv_g = 1.0f / static_cast<float>(grad_denominator);
  for (std::int64_t b = threadIdx.x; b < batch; b += blockDim.x) {
    const float zb = z[b], yb = y[b];
    acc += fmaxf(zb, 0.0f) - zb * yb + log1pf(expf(-fabsf(zb)));
    const float s = zb >= 0.0f ? 1.0f / (1.0f + expf(-zb)) : expf(zb) / (1.0f + expf(zb));
    dz[b] = (s - yb) * inv_g;
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (static_cast<int>(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) loss[0] = part[0] * inv_b;
}

__global__ void sgd_kernel(float* w, const float* g, std::int64_t n, float lr) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    w[i] -= lr * g[i];
  }
}

__global__ void adam_kernel(float* w, const float* g, float* m, float* v, std::int64_t n, float lr, float beta1,
                            float beta2, float eps, float c1, float c2) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float gi = g[i];
    const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] -= lr * (mi * c1) / (sqrtf(vi * c2) + eps);
  }
}


__global__ void column_map_kernel(float* pooled, std::int64_t width, float* exch, const std::int64_t* base,
                                  const std::int32_t* stride, std::int64_t rows, bool to_pooled) {
  const std::int64_t n = rows * width;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t s = i / width, k = i % width;
    const std::int64_t e = base[k] + s * stride[k];
    if (to_pooled) {
      pooled[i] = exch[e];
    } else {
      exch[e] = pooled[i];
    }
  }
}

__device__ float load_weight(const void* w, int precision, std::int64_t i) {
  if (precision == 0) return static_cast<const float*>(w)[i];
  if (precision == 1) return __half2float(static_cast<const __half*>(w)[i]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(w)[i]);
}

__device__ void store_weight(void* w, int precision, std::int64_t i, float v) {
  if (precision == 0) {
    static_cast<float*>(w)[i] = v;
  } else if (precision == 1) {
    static_cast<__half*>(w)[i] = __float2half_rn(v);
  } else {
    static_cast<__nv_bfloat16*>(w)[i] = __float2bfloat16_rn(v);
  }
}

/// One thread per row; the fp32 operations of the fused backward of
/// profiler/kernels/embedding_bag.cu (sum of squares, divided by dim, added to the state;
/// multiplier lr / (sqrt(state) + eps); w + g * -multiplier), the sum of squares accumulated
/// serially instead of by warp shuffles. Rows with an all-zero gradient
/// are skipped: they did not occur in the batch, and the sparse update leaves them alone.
__global__ void dense_embedding_update_kernel(void* w, int precision, const float* g, float* state, std::int64_t rows,
                                              std::int64_t dim, int kind, float lr, float eps) {
  for (std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float* gr = g + r * dim;
    bool any = false;
    float sum_squares = 0.0f;
    for (std::int64_t q = 0; q < dim; ++q) {
      any = any || gr[q] != 0.0f;
      sum_squares = __fadd_rn(sum_squares, __fmul_rn(gr[q], gr[q]));
    }
    if (!any) continue;
    float multiplier = lr;
    if (kind == 1) {
      const float s = __fadd_rn(state[r], __fdiv_rn(sum_squares, static_cast<float>(dim)));
      state[r] = s;
      multiplier = __fdiv_rn(lr, __fadd_rn(__fsqrt_rn(s), eps));
    }
    for (std::int64_t q = 0; q < dim; ++q) {
      const std::int64_t i = r * dim + q;
      store_weight(w, precision, i, __fadd_rn(load_weight(w, precision, i), __fmul_rn(gr[q], -multiplier)));
    }
  }
}

}  // namespace

void launch_fill_counter_uniform(void* p, profiler::WeightPrecision precision, std::int64_t n, std::uint64_t seed,
                                 std::uint64_t stream_id, float lo, float hi, void* stream) {
  launch_fill_counter_uniform_slice(p, precision, 1, n, n, 0, 0, seed, stream_id, lo, hi, stream);
}

void launch_fill_counter_uniform_slice(void* p, profiler::WeightPrecision precision, std::int64_t rows,
                                       std::int64_t cols, std::int64_t full_cols, std::int64_t first_row,
                                       std::int64_t first_col, std::uint64_t seed, std::uint64_t stream_id, float lo,
                                       float hi, void* stream) {
  if (rows <= 0 || cols <= 0) return;
  fill_counter_uniform_kernel<<<blocks_for(rows * cols), kThreads, 0, as_stream(stream)>>>(
      p, static_cast<int>(precision), rows, cols, full_cols, first_row, first_col, seed, stream_id, lo, hi);
  check_launch();
}

void launch_column_map(float* pooled, std::int64_t width, float* exch, const std::int64_t* base,
                       const std::int32_t* stride, std::int64_t rows, bool to_pooled, void* stream) {
  const std::int64_t n = rows * width;
  if (n <= 0) return;
  column_map_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(pooled, width, exch, base, stride, rows,
                                                                       to_pooled);
  check_launch();
}

void launch_dense_embedding_update(void* weights, profiler::WeightPrecision precision, const float* grad,
                                   float* rowwise_state, std::int64_t rows, std::int64_t dim,
                                   const profiler::OptimizerConfig& optimizer, void* stream) {
  if (rows <= 0 || dim <= 0) return;
  dense_embedding_update_kernel<<<blocks_for(rows), kThreads, 0, as_stream(stream)>>>(
      weights, static_cast<int>(precision), grad, rowwise_state, rows, dim, static_cast<int>(optimizer.kind),
      optimizer.learning_rate, optimizer.eps);
  check_launch();
}

void launch_concat_rows(const float* a, std::int64_t wa, const float* c, std::int64_t wc, float* out,
                        std::int64_t batch, void* stream) {
  const std::int64_t n = batch * (wa + wc);
  if (n <= 0) return;
  concat_rows_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(a, wa, c, wc, out, batch);
  check_launch();
}

void launch_split_rows(const float* in, std::int64_t wa, std::int64_t wc, float* a, const float* add,
                       std::int64_t add_stride, float* c, std::int64_t batch, void* stream) {
  const std::int64_t n = batch * (wa + wc);
  if (n <= 0) return;
  split_rows_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(in, wa, wc, a, add, add_stride, c, batch);
  check_launch();
}

void launch_interaction_gather(const float* bottom, std::int64_t d, const float* z, std::int64_t n, float* out,
                               std::int64_t batch, void* stream) {
  const std::int64_t total = batch * (d + n * (n - 1) / 2);
  if (total <= 0) return;
  interaction_gather_kernel<<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(bottom, d, z, n, out, batch);
  check_launch();
}

void launch_interaction_scatter(const float* dout, std::int64_t d, std::int64_t n, float* s, std::int64_t batch,
                                void* stream) {
  const std::int64_t total = batch * n * n;
  if (total <= 0) return;
  interaction_scatter_kernel<<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(dout, d, n, s, batch);
  check_launch();
}

void launch_relu_backward(float* g, const float* y, std::int64_t n, void* stream) {
  if (n <= 0) return;
  relu_backward_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(g, y, n);
  check_launch();
}

void launch_bias_grad(const float* g, std::int64_t rows, std::int64_t cols, float* db, void* stream) {
  if (cols <= 0) return;
  const auto grid = static_cast<unsigned>((cols + 31) / 32);
  bias_grad_kernel<<<grid, dim3(32, 32), 0, as_stream(stream)>>>(g, rows, cols, db);
  check_launch();
}

void launch_bce_with_logits(const float* z, const float* y, std::int64_t batch, std::int64_t grad_denominator,
                            float* loss, float* dz, void* stream) {
  if (batch <= 0) return;
  bce_kernel<<<1, kThreads, 0, as_stream(stream)>>>(z, y, batch, grad_denominator > 0 ? grad_denominator : batch,
                                                    loss, dz);
  check_launch();
}

void launch_sgd(float* w, const float* g, std::int64_t n, float lr, void* stream) {
  if (n <= 0) return;
  sgd_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(w, g, n, lr);
  check_launch();
}

void launch_adam(float* w, const float* g, float* m, float* v, std::int64_t n, float lr, float beta1, float beta2,
                 float eps, float c1, float c2, void* stream) {
  if (n <= 0) return;
  adam_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(w, g, m, v, n, lr, beta1, beta2, eps, c1, c2);
  check_launch();
}

}  // namespace perfcast::validation::kernels

#include "validation/executor_kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <stdexcept>
#include <type_traits>

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

// Activation element types: loaded as fp32, stored rounded to nearest even.
__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

/// Calls f(T*{}) with T the element type of `p` (float, __half or __nv_bfloat16).
template <typename F>
void with_type(profiler::WeightPrecision p, F&& f) {
  switch (p) {
    case profiler::WeightPrecision::kFp32: f(static_cast<float*>(nullptr)); return;
    case profiler::WeightPrecision::kFp16: f(static_cast<__half*>(nullptr)); return;
    case profiler::WeightPrecision::kBf16: f(static_cast<__nv_bfloat16*>(nullptr)); return;
  }
  throw std::invalid_argument("executor kernels: unknown precision");
}

template <typename T, typename P>
T* as(P* p) { return static_cast<T*>(p); }
template <typename T, typename P>
const T* as(const P* p) { return static_cast<const T*>(p); }

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

template <typename T>
__global__ void concat_rows_kernel(const T* a, std::int64_t wa, const float* c, std::int64_t wc, T* out,
                                   std::int64_t batch) {
  const std::int64_t w = wa + wc, n = batch * w;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t b = i / w, k = i % w;
    out[i] = k < wa ? a[b * wa + k] : from_f<T>(c[b * wc + (k - wa)]);
  }
}

template <typename T>
__global__ void split_rows_kernel(const T* in, std::int64_t wa, std::int64_t wc, T* a, const T* add,
                                  std::int64_t add_stride, float* c, float c_scale, std::int64_t batch) {
  const std::int64_t w = wa + wc, n = batch * w;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t b = i / w, k = i % w;
    if (k < wa) {
      a[b * wa + k] = add ? from_f<T>(to_f(in[i]) + to_f(add[b * add_stride + k])) : in[i];
    } else {
      c[b * wc + (k - wa)] = to_f(in[i]) * c_scale;
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

template <typename T>
__global__ void interaction_gather_kernel(const T* bottom, std::int64_t d, const T* z, std::int64_t n, T* out,
                                          std::int64_t batch) {
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

template <typename T>
__global__ void interaction_scatter_kernel(const T* dout, std::int64_t d, std::int64_t n, T* s, std::int64_t batch) {
  const std::int64_t pairs = n * (n - 1) / 2, w = d + pairs, total = batch * n * n;
  for (std::int64_t q = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; q < total;
       q += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t b = q / (n * n), r = q % (n * n), i = r / n, j = r % n;
    T v = from_f<T>(0.0f);
    if (i > j) v = dout[b * w + d + i * (i - 1) / 2 + j];
    if (j > i) v = dout[b * w + d + j * (j - 1) / 2 + i];
    s[q] = v;
  }
}

template <typename T>
__global__ void relu_backward_kernel(T* g, const T* y, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if (!(to_f(y[i]) > 0.0f)) g[i] = from_f<T>(0.0f);
  }
}

/// Block (32, 32): threadIdx.x picks a column of the block's 32, threadIdx.y strides the
/// rows; partial sums are reduced in shared memory in a fixed order.
template <typename T>
__global__ void bias_grad_kernel(const T* g, std::int64_t rows, std::int64_t cols, float* db) {
  __shared__ float part[32][33];
  const std::int64_t col = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.0f;
  if (col < cols) {
    for (std::int64_t r = threadIdx.y; r < rows; r += 32) acc += to_f(g[r * cols + col]);
  }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float s = 0.0f;
    for (int k = 0; k < 32; ++k) s += part[k][threadIdx.x];
    db[col] = s;
  }
}

template <typename T>
__global__ void bce_kernel(const T* z, const float* y, std::int64_t batch, std::int64_t grad_denominator,
                           float loss_scale, float* loss, T* dz) {
  __shared__ float part[kThreads];
  float acc = 0.0f;
  const float inv_b = 1.0f / static_cast<float>(batch);
  const float inv_g = loss_scale / static_cast<float>(grad_denominator);
  for (std::int64_t b = threadIdx.x; b < batch; b += blockDim.x) {
    const float zb = to_f(z[b]), yb = y[b];
    acc += fmaxf(zb, 0.0f) - zb * yb + log1pf(expf(-fabsf(zb)));
    const float s = zb >= 0.0f ? 1.0f / (1.0f + expf(-zb)) : expf(zb) / (1.0f + expf(zb));
    dz[b] = from_f<T>((s - yb) * inv_g);
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (static_cast<int>(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) loss[0] = part[0] * inv_b;
}

__global__ void sgd_kernel(float* w, const float* g, std::int64_t n, float lr, float grad_scale) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    w[i] -= lr * (g[i] * grad_scale);
  }
}

__global__ void adam_kernel(float* w, const float* g, float* m, float* v, std::int64_t n, float lr, float beta1,
                            float beta2, float eps, float c1, float c2, float grad_scale) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float gi = g[i] * grad_scale;
    const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] -= lr * (mi * c1) / (sqrtf(vi * c2) + eps);
  }
}

template <typename T>
__global__ void convert_kernel(const float* src, T* dst, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = from_f<T>(src[i]);
  }
}

/// blockIdx.y: the segment; blocks along x stride over its elements.
template <typename T>
__global__ void convert_segments_kernel(const float* src, T* dst, const ConvertSegment* segments) {
  const ConvertSegment seg = segments[blockIdx.y];
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < seg.n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    dst[seg.dst_at + i] = from_f<T>(src[seg.src_at + i]);
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

void launch_concat_rows(const void* a, std::int64_t wa, const float* c, std::int64_t wc, void* out,
                        std::int64_t batch, profiler::WeightPrecision act, void* stream) {
  const std::int64_t n = batch * (wa + wc);
  if (n <= 0) return;
  with_type(act, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    concat_rows_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(as<T>(a), wa, c, wc, as<T>(out), batch);
  });
  check_launch();
}

void launch_split_rows(const void* in, std::int64_t wa, std::int64_t wc, void* a, const void* add,
                       std::int64_t add_stride, float* c, float c_scale, std::int64_t batch,
                       profiler::WeightPrecision act, void* stream) {
  const std::int64_t n = batch * (wa + wc);
  if (n <= 0) return;
  with_type(act, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    split_rows_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(as<T>(in), wa, wc, as<T>(a), as<T>(add),
                                                                             add_stride, c, c_scale, batch);
  });
  check_launch();
}

void launch_interaction_gather(const void* bottom, std::int64_t d, const void* z, std::int64_t n, void* out,
                               std::int64_t batch, profiler::WeightPrecision act, void* stream) {
  const std::int64_t total = batch * (d + n * (n - 1) / 2);
  if (total <= 0) return;
  with_type(act, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    interaction_gather_kernel<T><<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(as<T>(bottom), d, as<T>(z), n,
                                                                                         as<T>(out), batch);
  });
  check_launch();
}

void launch_interaction_scatter(const void* dout, std::int64_t d, std::int64_t n, void* s, std::int64_t batch,
                                profiler::WeightPrecision act, void* stream) {
  const std::int64_t total = batch * n * n;
  if (total <= 0) return;
  with_type(act, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    interaction_scatter_kernel<T><<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(as<T>(dout), d, n, as<T>(s),
                                                                                          batch);
  });
  check_launch();
}

void launch_relu_backward(void* g, const void* y, std::int64_t n, profiler::WeightPrecision act, void* stream) {
  if (n <= 0) return;
  with_type(act, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    relu_backward_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(as<T>(g), as<T>(y), n);
  });
  check_launch();
}

void launch_bias_grad(const void* g, std::int64_t rows, std::int64_t cols, float* db, profiler::WeightPrecision act,
                      void* stream) {
  if (cols <= 0) return;
  const auto grid = static_cast<unsigned>((cols + 31) / 32);
  with_type(act, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    bias_grad_kernel<T><<<grid, dim3(32, 32), 0, as_stream(stream)>>>(as<T>(g), rows, cols, db);
  });
  check_launch();
}

void launch_bce_with_logits(const void* z, const float* y, std::int64_t batch, std::int64_t grad_denominator,
                            float loss_scale, float* loss, void* dz, profiler::WeightPrecision act, void* stream) {
  if (batch <= 0) return;
  with_type(act, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    bce_kernel<T><<<1, kThreads, 0, as_stream(stream)>>>(
        as<T>(z), y, batch, grad_denominator > 0 ? grad_denominator : batch, loss_scale, loss, as<T>(dz));
  });
  check_launch();
}

void launch_convert(const float* src, void* dst, std::int64_t n, profiler::WeightPrecision precision, void* stream) {
  if (n <= 0) return;
  with_type(precision, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    convert_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(src, as<T>(dst), n);
  });
  check_launch();
}

void launch_convert_segments(const float* src, void* dst, const ConvertSegment* segments, int count,
                             std::int64_t max_n, profiler::WeightPrecision precision, void* stream) {
  if (count <= 0 || max_n <= 0) return;
  if (count > 65535) throw std::invalid_argument("launch_convert_segments: more than 65535 segments");
  // x: enough blocks for the largest segment, at most 1024 per segment (the loop covers the rest).
  const dim3 grid(std::min(blocks_for(max_n), 1024u), static_cast<unsigned>(count));
  with_type(precision, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    convert_segments_kernel<T><<<grid, kThreads, 0, as_stream(stream)>>>(src, as<T>(dst), segments);
  });
  check_launch();
}

void launch_sgd(float* w, const float* g, std::int64_t n, float lr, float grad_scale, void* stream) {
  if (n <= 0) return;
  sgd_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(w, g, n, lr, grad_scale);
  check_launch();
}

void launch_adam(float* w, const float* g, float* m, float* v, std::int64_t n, float lr, float beta1, float beta2,
                 float eps, float c1, float c2, float grad_scale, void* stream) {
  if (n <= 0) return;
  adam_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(w, g, m, v, n, lr, beta1, beta2, eps, c1, c2,
                                                                 grad_scale);
  check_launch();
}

}  // namespace perfcast::validation::kernels

#include "profiler/bench_kernels.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "profiler/cuda_check.hpp"

namespace perfcast::profiler::bench {

namespace {

constexpr int kThreads = kBlockThreads;

/// Blocks for a grid-stride loop over n elements, at most kMaxBlocks (bench_kernels.hpp).
unsigned blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

/// splitmix64 finalizer: a good 64-bit mix of a counter.
__device__ __forceinline__ std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
/// Uniform in [0, 1) with 53 random bits.
__device__ __forceinline__ double unit(std::uint64_t h) { return static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0); }

__global__ void fill_f32(float* p, std::int64_t n, std::uint64_t seed, float lo, float hi) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    p[i] = lo + (hi - lo) * static_cast<float>(unit(mix(seed ^ mix(static_cast<std::uint64_t>(i)))));
  }
}

__global__ void fill_16(std::uint16_t* p, std::int64_t n, std::uint64_t seed, float lo, float hi, bool bf16) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float v = lo + (hi - lo) * static_cast<float>(unit(mix(seed ^ mix(static_cast<std::uint64_t>(i)))));
    if (bf16) {
      const __nv_bfloat16 h = __float2bfloat16_rn(v);
      p[i] = *reinterpret_cast<const std::uint16_t*>(&h);
    } else {
      const __half h = __float2half_rn(v);
      p[i] = *reinterpret_cast<const std::uint16_t*>(&h);
    }
  }
}

enum Op { kRelu, kAdd, kMul, kSigmoid, kBce };

template <int OP>
__global__ void elementwise(std::int64_t n, const float* __restrict__ a, const float* __restrict__ b,
                            float* __restrict__ out) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float x = a[i];
    float y;
    if (OP == kRelu) y = fmaxf(x, 0.f);
    if (OP == kAdd) y = x + b[i];
    if (OP == kMul) y = x * b[i];
    if (OP == kSigmoid) y = 1.f / (1.f + __expf(-x));
    if (OP == kBce) {
      const float p = fminf(fmaxf(x, 1e-7f), 1.f - 1e-7f);
      const float t = b[i];
      y = -(t * __logf(p) + (1.f - t) * __logf(1.f - p));
    }
    out[i] = y;
  }
}

/// One thread per column, a block of 32 columns x 8 row-slices; partial sums combined with
/// atomics (db must be zeroed first). Coalesced: consecutive threads read consecutive columns.
__global__ void bias_grad(const float* __restrict__ dy, std::int64_t rows, std::int64_t cols, float* db) {
  const std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  const std::int64_t chunk = (rows + gridDim.y - 1) / gridDim.y;
  const std::int64_t r0 = blockIdx.y * chunk;
  const std::int64_t r1 = r0 + chunk < rows ? r0 + chunk : rows;
  float s = 0;
  for (std::int64_t r = r0; r < r1; ++r) s += dy[r * cols + c];
  atomicAdd(db + c, s);
}

__global__ void gen_indices(std::int64_t* out, std::int64_t n, std::int64_t rows, IndexGenParams p, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t h = mix(seed ^ mix(static_cast<std::uint64_t>(i)));
    const double u = unit(h);
    std::int64_t r;
    if (p.kind == 1) {
      // Continuous power law on [1, rows + 1): inverse CDF, then rank - 1.
      const double nmax = static_cast<double>(rows) + 1.0;
      double x;
      if (fabs(p.alpha - 1.0) < 1e-9) {
        x = exp(u * log(nmax));
      } else {
        const double e = 1.0 - p.alpha;
        x = pow(u * (pow(nmax, e) - 1.0) + 1.0, 1.0 / e);
      }
      const std::int64_t rank = static_cast<std::int64_t>(x) - 1;
      // Scatter ranks over rows: (rank * large odd) mod rows is a bijection only for coprime
      // moduli, so use a mixed hash; collisions merely merge a few ranks.
      r = rank == 0 ? 0 : static_cast<std::int64_t>(mix(static_cast<std::uint64_t>(rank) ^ seed) % static_cast<std::uint64_t>(rows));
    } else if (p.kind == 2) {
      std::int64_t hot = static_cast<std::int64_t>(p.hot_rows_fraction * static_cast<double>(rows));
      if (hot < 1) hot = 1;
      const double v = unit(mix(h));
      r = u < p.hot_access_fraction ? static_cast<std::int64_t>(v * static_cast<double>(hot))
                                    : static_cast<std::int64_t>(v * static_cast<double>(rows));
    } else {
      r = static_cast<std::int64_t>(u * static_cast<double>(rows));
    }
    out[i] = r < 0 ? 0 : (r >= rows ? rows - 1 : r);
  }
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

void launch_fill_uniform_f32(float* p, std::int64_t n, std::uint64_t seed, float lo, float hi, void* stream) {
  if (n <= 0) return;
  fill_f32<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(p, n, seed, lo, hi);
  PERFCAST_CUDA_CHECK(cudaGetLastError());
}

void launch_fill_uniform_16(void* p, std::int64_t n, std::uint64_t seed, float lo, float hi, bool bf16, void* stream) {
  if (n <= 0) return;
  fill_16<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(static_cast<std::uint16_t*>(p), n, seed, lo, hi, bf16);
  PERFCAST_CUDA_CHECK(cudaGetLastError());
}

void launch_elementwise(const char* op, std::int64_t n, const float* a, const float* b, float* out, void* stream) {
  const unsigned g = blocks_for(n);
  const cudaStream_t s = as_stream(stream);
  if (n <= 0) return;
  if (std::strcmp(op, "relu") == 0) {
    elementwise<kRelu><<<g, kThreads, 0, s>>>(n, a, b, out);
  } else if (std::strcmp(op, "add") == 0) {
    elementwise<kAdd><<<g, kThreads, 0, s>>>(n, a, b, out);
  } else if (std::strcmp(op, "mul") == 0) {
    elementwise<kMul><<<g, kThreads, 0, s>>>(n, a, b, out);
  } else if (std::strcmp(op, "sigmoid") == 0) {
    elementwise<kSigmoid><<<g, kThreads, 0, s>>>(n, a, b, out);
  } else if (std::strcmp(op, "bce") == 0) {
    elementwise<kBce><<<g, kThreads, 0, s>>>(n, a, b, out);
  } else {
    throw std::invalid_argument(std::string("launch_elementwise: unknown op ") + op);
  }
  PERFCAST_CUDA_CHECK(cudaGetLastError());
}

void launch_bias_grad(const float* dy, std::int64_t rows, std::int64_t cols, float* db, void* stream) {
  if (rows <= 0 || cols <= 0) return;
  PERFCAST_CUDA_CHECK(cudaMemsetAsync(db, 0, static_cast<std::size_t>(cols) * sizeof(float), as_stream(stream)));
  const unsigned gx = static_cast<unsigned>((cols + 31) / 32);
  // Enough row slices for ~4 blocks per SM of a 132-SM H100 overall, at most one per 64 rows.
  std::int64_t gy = (528 + gx - 1) / gx;
  if (gy > (rows + 63) / 64) gy = (rows + 63) / 64;
  if (gy < 1) gy = 1;
  if (gy > 65535) gy = 65535;
  bias_grad<<<dim3(gx, static_cast<unsigned>(gy)), 32, 0, as_stream(stream)>>>(dy, rows, cols, db);
  PERFCAST_CUDA_CHECK(cudaGetLastError());
}

void launch_generate_indices(std::int64_t* out, std::int64_t n, std::int64_t rows, const IndexGenParams& p,
                             std::uint64_t seed, void* stream) {
  if (n <= 0) return;
  if (rows < 1) throw std::invalid_argument("launch_generate_indices: rows < 1");
  gen_indices<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(out, n, rows, p, seed);
  PERFCAST_CUDA_CHECK(cudaGetLastError());
}

}  // namespace perfcast::profiler::bench

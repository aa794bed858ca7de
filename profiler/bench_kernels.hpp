#pragma once
/// \file bench_kernels.hpp
/// Host launchers of the microbenchmark kernels (bench_kernels.cu): input fills, the
/// elementwise family of DLRM training (relu, add, mul, sigmoid, BCE), the bias-gradient
/// reduction and embedding index generation. Includes no CUDA header and stays C++17 for nvcc.
/// Streams are cudaStream_t passed as void*. Launchers only enqueue; they throw CudaError when a
/// launch fails. Defined only when PERFCAST_HAVE_CUDA is 1.

#include <cstdint>

namespace perfcast::profiler::bench {

/// Launch shape of the grid-stride kernels below: blocks of kBlockThreads threads, at most
/// kMaxBlocks of them (enough to fill any current GPU: 132 SMs x 8 blocks of 256 threads is
/// about 1,000; the cap bounds tiny launches' overhead too).
inline constexpr int kBlockThreads = 256;
inline constexpr std::int64_t kMaxBlocks = 65536;
/// An elementwise launch over n elements runs one thread per element (each thread's loop
/// makes one trip) up to kBlockThreads x kMaxBlocks = 16,777,216 elements.
constexpr bool launches_thread_per_element(std::int64_t n) { return n <= kBlockThreads * kMaxBlocks; }

/// p[i] = uniform in [lo, hi) from a counter-based hash of (seed, i); deterministic.
void launch_fill_uniform_f32(float* p, std::int64_t n, std::uint64_t seed, float lo, float hi, void* stream);
/// The same into 16-bit storage: fp16 when !bf16, else bf16 (round to nearest even).
void launch_fill_uniform_16(void* p, std::int64_t n, std::uint64_t seed, float lo, float hi, bool bf16, void* stream);

/// Elementwise op `op` over n fp32 elements ("relu": out = max(a, 0); "add": a + b; "mul":
/// a * b; "sigmoid": 1 / (1 + exp(-a)); "bce": -(b log a + (1 - b) log(1 - a)) with a clamped to
/// [1e-7, 1 - 1e-7]). `b` is unused by unary ops. Throws std::invalid_argument on an unknown op.
void launch_elementwise(const char* op, std::int64_t n, const float* a, const float* b, float* out, void* stream);

/// db[c] = sum over r of dy[r * cols + c] (the bias gradient of a linear layer), fp32.
void launch_bias_grad(const float* dy, std::int64_t rows, std::int64_t cols, float* db, void* stream);

/// How generated indices are spread over a table's rows.
struct IndexGenParams {
  std::int32_t kind = 0;             ///< 0 uniform, 1 zipf, 2 hot set
  double alpha = 1.05;               ///< zipf exponent
  double hot_rows_fraction = 0.01;   ///< hot set: share of rows that are hot
  double hot_access_fraction = 0.9;  ///< hot set: share of accesses that hit hot rows
};
/// out[i] in [0, rows): uniform, Zipf(alpha) by inverse CDF of the continuous power law over
/// ranks (rank r then scattered over the rows by a multiplicative hash, so hot rows are not
/// adjacent), or hot set. Counter-based from (seed, i): deterministic.
void launch_generate_indices(std::int64_t* out, std::int64_t n, std::int64_t rows, const IndexGenParams& p,
                             std::uint64_t seed, void* stream);

}  // namespace perfcast::profiler::bench

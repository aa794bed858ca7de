/// \file kernels/embedding_bag.cu
/// CUDA kernels of the batched pooled embedding-bag operator: forward (sum / mean pooling)
/// and backward with fused SGD or row-wise Adagrad. Written for Hopper (sm_90), correct on
/// any architecture CUB supports.
///
/// Work split: a group of G threads (G a power of two, 1..32, chosen from the largest dim)
/// handles one bag (forward) or one distinct row (backward). Lane l of a group owns columns
/// 4*(l + v*G) .. +3 for v = 0..kMaxVecsPerThread-1 and keeps them in registers; loads and
/// stores are 16-byte (fp32) / 8-byte (fp16, bf16) vectors when the row start and dim allow,
/// element-wise otherwise. Arithmetic uses explicit round-to-nearest intrinsics (no FMA
/// contraction) so results follow the CPU reference's fp32 operation order.
///
/// Template instantiations: two kernels x three weight precisions, plus one CUB radix sort.

#include <cub/device/device_radix_sort.cuh>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "profiler/cuda_check.hpp"
#include "profiler/kernels/embedding_bag.hpp"

namespace perfcast::profiler::kernels {
namespace {

constexpr int kBlockThreads = 256;
constexpr int kWarpSize = 32;
constexpr int kMaxVecsPerThread = kMaxEmbeddingDim / (4 * kWarpSize);  // 8
constexpr std::size_t kWorkspaceAlignment = 256;
static_assert(kMaxVecsPerThread * 4 * kWarpSize == kMaxEmbeddingDim, "dims must split into float4 per lane");

// ---- weight storage ------------------------------------------------------------------

template <WeightPrecision P>
using Storage = std::conditional_t<P == WeightPrecision::kFp32, float, std::uint16_t>;

template <WeightPrecision P>
__device__ __forceinline__ float to_float(Storage<P> s) {
  if constexpr (P == WeightPrecision::kFp32) {
    return s;
  } else if constexpr (P == WeightPrecision::kFp16) {
    return __half2float(__ushort_as_half(s));
  } else {
    return __uint_as_float(static_cast<unsigned>(s) << 16);
  }
}

template <WeightPrecision P>
__device__ __forceinline__ Storage<P> from_float(float f) {
  if constexpr (P == WeightPrecision::kFp32) {
    return f;
  } else if constexpr (P == WeightPrecision::kFp16) {
    return __half_as_ushort(__float2half_rn(f));
  } else {
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
  }
}

/// Elements col..col+3 of `row` (zero past `dim`). `vec`: row+col is 16-byte (fp32) or
/// 8-byte (16-bit types) aligned and col+3 < dim.
template <WeightPrecision P>
__device__ __forceinline__ float4 load4(const Storage<P>* row, int col, int dim, bool vec) {
  if (vec) {
    if constexpr (P == WeightPrecision::kFp32) {
      return *reinterpret_cast<const float4*>(row + col);
    } else {
      const uint2 raw = *reinterpret_cast<const uint2*>(row + col);  // little endian: low half first
      return make_float4(to_float<P>(static_cast<std::uint16_t>(raw.x & 0xffffu)),
                         to_float<P>(static_cast<std::uint16_t>(raw.x >> 16)),
                         to_float<P>(static_cast<std::uint16_t>(raw.y & 0xffffu)),
                         to_float<P>(static_cast<std::uint16_t>(raw.y >> 16)));
    }
  }
  float v[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) v[k] = col + k < dim ? to_float<P>(row[col + k]) : 0.0f;
  return make_float4(v[0], v[1], v[2], v[3]);
}

/// Stores the elements of `x` that lie before `dim` to row[col..col+3], rounded to nearest even.
template <WeightPrecision P>
__device__ __forceinline__ void store4(Storage<P>* row, int col, int dim, bool vec, float4 x) {
  if (vec) {
    if constexpr (P == WeightPrecision::kFp32) {
      *reinterpret_cast<float4*>(row + col) = x;
    } else {
      uint2 raw;
      raw.x = static_cast<unsigned>(from_float<P>(x.x)) | (static_cast<unsigned>(from_float<P>(x.y)) << 16);
      raw.y = static_cast<unsigned>(from_float<P>(x.z)) | (static_cast<unsigned>(from_float<P>(x.w)) << 16);
      *reinterpret_cast<uint2*>(row + col) = raw;
    }
    return;
  }
  const float v[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if (col + k < dim) row[col + k] = from_float<P>(v[k]);
  }
}

/// fp32 loads of 4 consecutive floats (zero past `dim`), vectorized when `vec`.
__device__ __forceinline__ float4 load4f(const float* p, int col, int dim, bool vec) {
  if (vec) return *reinterpret_cast<const float4*>(p + col);
  float v[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) v[k] = col + k < dim ? p[col + k] : 0.0f;
  return make_float4(v[0], v[1], v[2], v[3]);
}

__device__ __forceinline__ void store4f(float* p, int col, int dim, bool vec, float4 x) {
  if (vec) {
    *reinterpret_cast<float4*>(p + col) = x;
    return;
  }
  const float v[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if (col + k < dim) p[col + k] = v[k];
  }
}

/// a + b * s, rounded after the multiply and after the add (no FMA), as on the CPU.
__device__ __forceinline__ float4 add_scaled(float4 a, float4 b, float s) {
  return make_float4(__fadd_rn(a.x, __fmul_rn(b.x, s)), __fadd_rn(a.y, __fmul_rn(b.y, s)),
                     __fadd_rn(a.z, __fmul_rn(b.z, s)), __fadd_rn(a.w, __fmul_rn(b.w, s)));
}

/// 1/len for mean pooling (0 for an empty bag), 1 for sum.
__device__ __forceinline__ float bag_scale(PoolingMode pooling, std::int64_t len) {
  if (pooling == PoolingMode::kSum) return 1.0f;
  return len > 0 ? __fdiv_rn(1.0f, static_cast<float>(len)) : 0.0f;
}

/// Mask of the G lanes of the calling thread's group inside its warp (G a power of two).
__device__ __forceinline__ unsigned group_mask(int group_size) {
  if (group_size == kWarpSize) return 0xffffffffu;
  const unsigned lane_in_warp = threadIdx.x % kWarpSize;
  return ((1u << group_size) - 1u) << (lane_in_warp & ~static_cast<unsigned>(group_size - 1));
}

struct KernelParams {
  EmbeddingBagDeviceBatch batch;
  int group_size;       // G
  bool weights_aligned;  // weights base pointer is 16-byte aligned
  bool dense_aligned;    // output / grad_output base is 16-byte aligned and total_dim % 4 == 0
};

// ---- forward -----------------------------------------------------------------------------

template <WeightPrecision P>
__global__ void __launch_bounds__(kBlockThreads)
    forward_kernel(KernelParams p, const Storage<P>* __restrict__ weights, float* __restrict__ output) {
  const EmbeddingBagDeviceBatch& batch = p.batch;
  const int G = p.group_size;
  const int lane = static_cast<int>(threadIdx.x) & (G - 1);
  const std::int64_t bag =
      static_cast<std::int64_t>(blockIdx.x) * (kBlockThreads / G) + static_cast<std::int64_t>(threadIdx.x) / G;
  if (bag >= static_cast<std::int64_t>(batch.num_tables) * batch.batch_size) return;
  const int t = static_cast<int>(bag / batch.batch_size);
  const std::int64_t b = bag % batch.batch_size;
  const EmbeddingTableMeta table = batch.tables[t];
  const int dim = table.dim;
  const bool vec = p.weights_aligned && dim % 4 == 0 && table.weight_offset % 4 == 0;

  std::int64_t begin = batch.offsets[bag];
  const std::int64_t end = min(batch.offsets[bag + 1], batch.num_indices);
  begin = max(begin, std::int64_t{0});

  float4 acc[kMaxVecsPerThread];
#pragma unroll
  for (int v = 0; v < kMaxVecsPerThread; ++v) acc[v] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

  const Storage<P>* table_weights = weights + table.weight_offset;
  for (std::int64_t i = begin; i < end; ++i) {
    const std::int64_t idx = batch.indices[i];
    if (idx < 0 || idx >= table.rows) continue;  // invalid (host validation rejects these)
    const Storage<P>* row = table_weights + idx * dim;
#pragma unroll
    for (int v = 0; v < kMaxVecsPerThread; ++v) {
      const int col = 4 * (lane + v * G);
      if (col < dim) acc[v] = add_scaled(acc[v], load4<P>(row, col, dim, vec), 1.0f);
    }
  }

  const float scale = bag_scale(batch.pooling, end - begin);
  float* out = output + b * batch.total_dim + table.output_offset;
  const bool out_vec = p.dense_aligned && dim % 4 == 0 && table.output_offset % 4 == 0;
#pragma unroll
  for (int v = 0; v < kMaxVecsPerThread; ++v) {
    const int col = 4 * (lane + v * G);
    if (col < dim) {
      const float4 a = acc[v];
      store4f(out, col, dim, out_vec,
              make_float4(__fmul_rn(a.x, scale), __fmul_rn(a.y, scale), __fmul_rn(a.z, scale), __fmul_rn(a.w, scale)));
    }
  }
}

// ---- backward ----------------------------------------------------------------------------

/// One thread per index position: key = global row (table row_offset + index; total_rows
/// for an invalid index, sorted last and skipped), value = bag of the position.
__global__ void __launch_bounds__(kBlockThreads)
    make_sort_pairs_kernel(EmbeddingBagDeviceBatch batch, std::uint64_t* __restrict__ keys,
                           std::int32_t* __restrict__ bags) {
  const std::int64_t pos = static_cast<std::int64_t>(blockIdx.x) * kBlockThreads + threadIdx.x;
  if (pos >= batch.num_indices) return;
  // Last bag k with offsets[k] <= pos: the bag that holds pos (empty bags are skipped).
  const std::int64_t num_bags = static_cast<std::int64_t>(batch.num_tables) * batch.batch_size;
  std::int64_t lo = 0;
  std::int64_t hi = num_bags - 1;
  while (lo < hi) {
    const std::int64_t mid = (lo + hi + 1) / 2;
    if (batch.offsets[mid] <= pos) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int t = static_cast<int>(lo / batch.batch_size);
  const EmbeddingTableMeta table = batch.tables[t];
  const std::int64_t idx = batch.indices[pos];
  const bool valid = idx >= 0 && idx < table.rows;
  keys[pos] = static_cast<std::uint64_t>(valid ? table.row_offset + idx : batch.total_rows);
  bags[pos] = static_cast<std::int32_t>(lo);
}

/// One group per sorted position; the group at the first position of a run of equal keys sums
/// the gradient of that row over the run (in position order: the radix sort is stable) and
/// applies the optimizer step once.
template <WeightPrecision P>
__global__ void __launch_bounds__(kBlockThreads)
    update_kernel(KernelParams p, const std::uint64_t* __restrict__ sorted_keys,
                  const std::int32_t* __restrict__ sorted_bags, const float* __restrict__ grad_output,
                  Storage<P>* __restrict__ weights, float* __restrict__ rowwise_state, OptimizerConfig optimizer) {
  const EmbeddingBagDeviceBatch& batch = p.batch;
  const int G = p.group_size;
  const int lane = static_cast<int>(threadIdx.x) & (G - 1);
  const std::int64_t first =
      static_cast<std::int64_t>(blockIdx.x) * (kBlockThreads / G) + static_cast<std::int64_t>(threadIdx.x) / G;
  const std::int64_t n = batch.num_indices;
  if (first >= n) return;
  const std::uint64_t key = sorted_keys[first];
  if (first > 0 && sorted_keys[first - 1] == key) return;       // not the start of a run
  if (key >= static_cast<std::uint64_t>(batch.total_rows)) return;  // invalid indices

  // Table of the row: last t with row_offset <= key.
  int lo = 0;
  int hi = batch.num_tables - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (static_cast<std::uint64_t>(batch.tables[mid].row_offset) <= key) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const EmbeddingTableMeta table = batch.tables[lo];
  const int dim = table.dim;
  const std::int64_t row = static_cast<std::int64_t>(key) - table.row_offset;
  const bool grad_vec = p.dense_aligned && dim % 4 == 0 && table.output_offset % 4 == 0;

  float4 g[kMaxVecsPerThread];
#pragma unroll
  for (int v = 0; v < kMaxVecsPerThread; ++v) g[v] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

  for (std::int64_t j = first; j < n && sorted_keys[j] == key; ++j) {
    const std::int32_t bag = sorted_bags[j];
    const std::int64_t b = bag % batch.batch_size;
    const float scale = bag_scale(batch.pooling, batch.offsets[bag + 1] - batch.offsets[bag]);
    const float* go = grad_output + b * batch.total_dim + table.output_offset;
#pragma unroll
    for (int v = 0; v < kMaxVecsPerThread; ++v) {
      const int col = 4 * (lane + v * G);
      if (col < dim) g[v] = add_scaled(g[v], load4f(go, col, dim, grad_vec), scale);
    }
  }

  float multiplier = optimizer.learning_rate;
  if (optimizer.kind == OptimizerKind::kRowwiseAdagrad) {
    float sum_squares = 0.0f;
#pragma unroll
    for (int v = 0; v < kMaxVecsPerThread; ++v) {  // columns past dim hold 0
      sum_squares = __fadd_rn(sum_squares, __fmul_rn(g[v].x, g[v].x));
      sum_squares = __fadd_rn(sum_squares, __fmul_rn(g[v].y, g[v].y));
      sum_squares = __fadd_rn(sum_squares, __fmul_rn(g[v].z, g[v].z));
      sum_squares = __fadd_rn(sum_squares, __fmul_rn(g[v].w, g[v].w));
    }
    const unsigned mask = group_mask(G);
    for (int delta = G / 2; delta > 0; delta /= 2) {
      sum_squares += __shfl_xor_sync(mask, sum_squares, delta, G);
    }
    // Lane 0 alone reads and writes the state; the other lanes get the new value by shuffle.
    float state = 0.0f;
    if (lane == 0) {
      state = __fadd_rn(rowwise_state[key], __fdiv_rn(sum_squares, static_cast<float>(dim)));
      rowwise_state[key] = state;
    }
    state = __shfl_sync(mask, state, 0, G);
    multiplier = __fdiv_rn(optimizer.learning_rate, __fadd_rn(__fsqrt_rn(state), optimizer.eps));
  }

  Storage<P>* w = weights + table.weight_offset + row * dim;
  const bool w_vec = p.weights_aligned && dim % 4 == 0 && table.weight_offset % 4 == 0;
#pragma unroll
  for (int v = 0; v < kMaxVecsPerThread; ++v) {
    const int col = 4 * (lane + v * G);
    if (col < dim) store4<P>(w, col, dim, w_vec, add_scaled(load4<P>(w, col, dim, w_vec), g[v], -multiplier));
  }
}

// ---- host side -----------------------------------------------------------------------------

/// Smallest power of two >= ceil(max_dim / 4), at most a warp.
int group_size_for(int max_dim) {
  const int lanes_needed = (max_dim + 3) / 4;
  int g = 1;
  while (g < lanes_needed && g < kWarpSize) g *= 2;
  return g;
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

std::size_t align_up(std::size_t n) { return (n + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment; }

/// Number of key bits to sort: enough for 0 .. total_rows (total_rows is the invalid marker).
int key_bits(std::int64_t total_rows) {
  int bits = 1;
  while (bits < 64 && (static_cast<std::uint64_t>(total_rows) >> bits) != 0) ++bits;
  return bits;
}

std::size_t cub_sort_bytes(std::int64_t num_indices, int end_bit) {
  std::size_t bytes = 0;
  PERFCAST_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const std::uint64_t*>(nullptr),
                                                      static_cast<std::uint64_t*>(nullptr),
                                                      static_cast<const std::int32_t*>(nullptr),
                                                      static_cast<std::int32_t*>(nullptr),
                                                      static_cast<int>(num_indices), 0, end_bit));
  return bytes;
}

void check_batch(const EmbeddingBagDeviceBatch& batch) {
  const auto fail = [](const std::string& what) {
    throw std::invalid_argument("embedding-bag kernels: " + what);
  };
  if (batch.tables == nullptr || batch.offsets == nullptr) fail("tables and offsets must be device pointers");
  if (batch.num_tables < 1 || batch.batch_size < 1) fail("need at least one table and batch_size >= 1");
  if (batch.max_dim < 1 || batch.max_dim > kMaxEmbeddingDim) {
    fail("max_dim must be in 1.." + std::to_string(kMaxEmbeddingDim) + ", got " + std::to_string(batch.max_dim));
  }
  if (batch.total_dim < batch.max_dim) fail("total_dim is smaller than max_dim");
  if (static_cast<std::int64_t>(batch.num_tables) * batch.batch_size > INT32_MAX) fail("T*B must fit int32");
  if (batch.num_indices < 0 || batch.num_indices > INT32_MAX) fail("num_indices must be in 0..2^31-1");
  if (batch.num_indices > 0 && batch.indices == nullptr) fail("indices is null");
  if (batch.total_rows < 1) fail("total_rows must be >= 1");
}

KernelParams make_params(const EmbeddingBagDeviceBatch& batch, const void* weights, const float* dense) {
  KernelParams p{};
  p.batch = batch;
  p.group_size = group_size_for(batch.max_dim);
  p.weights_aligned = aligned16(weights);
  p.dense_aligned = aligned16(dense) && batch.total_dim % 4 == 0;
  return p;
}

unsigned grid_for_groups(std::int64_t groups, int group_size) {
  const std::int64_t per_block = kBlockThreads / group_size;
  return static_cast<unsigned>((groups + per_block - 1) / per_block);
}

}  // namespace

void launch_embedding_bag_forward(const EmbeddingBagDeviceBatch& batch, const void* weights, float* output,
                                  void* stream) {
  check_batch(batch);
  if (weights == nullptr || output == nullptr) throw std::invalid_argument("embedding-bag forward: null weights or output");
  const KernelParams p = make_params(batch, weights, output);
  const unsigned grid = grid_for_groups(static_cast<std::int64_t>(batch.num_tables) * batch.batch_size, p.group_size);
  const auto s = static_cast<cudaStream_t>(stream);
  switch (batch.precision) {
    case WeightPrecision::kFp32:
      forward_kernel<WeightPrecision::kFp32>
          <<<grid, kBlockThreads, 0, s>>>(p, static_cast<const float*>(weights), output);
      break;
    case WeightPrecision::kFp16:
      forward_kernel<WeightPrecision::kFp16>
          <<<grid, kBlockThreads, 0, s>>>(p, static_cast<const std::uint16_t*>(weights), output);
      break;
    case WeightPrecision::kBf16:
      forward_kernel<WeightPrecision::kBf16>
          <<<grid, kBlockThreads, 0, s>>>(p, static_cast<const std::uint16_t*>(weights), output);
      break;
  }
  PERFCAST_CUDA_CHECK(cudaGetLastError());
}

std::size_t embedding_bag_backward_workspace_bytes(std::int64_t num_indices) {
  if (num_indices < 0 || num_indices > INT32_MAX) {
    throw std::invalid_argument("embedding-bag backward: num_indices must be in 0..2^31-1");
  }
  const auto n = static_cast<std::size_t>(num_indices);
  // keys in/out, bags in/out, then CUB's scratch (sized for the widest possible key).
  return 2 * align_up(n * sizeof(std::uint64_t)) + 2 * align_up(n * sizeof(std::int32_t)) +
         align_up(num_indices > 0 ? cub_sort_bytes(num_indices, 64) : 0);
}

void launch_embedding_bag_backward_update(const EmbeddingBagDeviceBatch& batch, void* weights, float* rowwise_state,
                                          const float* grad_output, const OptimizerConfig& optimizer,
                                          void* workspace, std::size_t workspace_bytes, void* stream) {
  check_batch(batch);
  if (weights == nullptr || grad_output == nullptr) {
    throw std::invalid_argument("embedding-bag backward: null weights or grad_output");
  }
  if (optimizer.kind == OptimizerKind::kRowwiseAdagrad && rowwise_state == nullptr) {
    throw std::invalid_argument("embedding-bag backward: row-wise Adagrad needs rowwise_state");
  }
  if (batch.num_indices == 0) return;  // nothing touched
  if (workspace == nullptr || reinterpret_cast<std::uintptr_t>(workspace) % kWorkspaceAlignment != 0) {
    throw std::invalid_argument("embedding-bag backward: workspace must be a 256-byte aligned device pointer");
  }
  const auto n = static_cast<std::size_t>(batch.num_indices);
  const int end_bit = key_bits(batch.total_rows);
  std::size_t sort_bytes = cub_sort_bytes(batch.num_indices, end_bit);
  const std::size_t keys_bytes = align_up(n * sizeof(std::uint64_t));
  const std::size_t bags_bytes = align_up(n * sizeof(std::int32_t));
  if (workspace_bytes < 2 * keys_bytes + 2 * bags_bytes + sort_bytes) {
    throw std::invalid_argument("embedding-bag backward: workspace too small (" + std::to_string(workspace_bytes) +
                                " bytes, need " + std::to_string(2 * keys_bytes + 2 * bags_bytes + sort_bytes) + ")");
  }
  auto* base = static_cast<unsigned char*>(workspace);
  auto* keys_in = reinterpret_cast<std::uint64_t*>(base);
  auto* keys_out = reinterpret_cast<std::uint64_t*>(base + keys_bytes);
  auto* bags_in = reinterpret_cast<std::int32_t*>(base + 2 * keys_bytes);
  auto* bags_out = reinterpret_cast<std::int32_t*>(base + 2 * keys_bytes + bags_bytes);
  void* sort_temp = base + 2 * keys_bytes + 2 * bags_bytes;
  sort_bytes = workspace_bytes - (2 * keys_bytes + 2 * bags_bytes);

  const auto s = static_cast<cudaStream_t>(stream);
  const unsigned pair_grid = static_cast<unsigned>((batch.num_indices + kBlockThreads - 1) / kBlockThreads);
  make_sort_pairs_kernel<<<pair_grid, kBlockThreads, 0, s>>>(batch, keys_in, bags_in);
  PERFCAST_CUDA_CHECK(cudaGetLastError());
  PERFCAST_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_temp, sort_bytes, keys_in, keys_out, bags_in, bags_out,
                                                      static_cast<int>(batch.num_indices), 0, end_bit, s));

  const KernelParams p = make_params(batch, weights, grad_output);
  const unsigned grid = grid_for_groups(batch.num_indices, p.group_size);
  switch (batch.precision) {
    case WeightPrecision::kFp32:
      update_kernel<WeightPrecision::kFp32><<<grid, kBlockThreads, 0, s>>>(
          p, keys_out, bags_out, grad_output, static_cast<float*>(weights), rowwise_state, optimizer);
      break;
    case WeightPrecision::kFp16:
      update_kernel<WeightPrecision::kFp16><<<grid, kBlockThreads, 0, s>>>(
          p, keys_out, bags_out, grad_output, static_cast<std::uint16_t*>(weights), rowwise_state, optimizer);
      break;
    case WeightPrecision::kBf16:
      update_kernel<WeightPrecision::kBf16><<<grid, kBlockThreads, 0, s>>>(
          p, keys_out, bags_out, grad_output, static_cast<std::uint16_t*>(weights), rowwise_state, optimizer);
      break;
  }
  PERFCAST_CUDA_CHECK(cudaGetLastError());
}

}  // namespace perfcast::profiler::kernels

#pragma once
/// \file counter_rng.hpp
/// Counter-based random numbers shared by the CPU reference and the CUDA executor, so both
/// draw the same initial weights from (seed, stream, index) without sequential state.
/// C++17 and usable in CUDA device code (nvcc compiles the executor's .cu files as C++17).

#include <cstdint>

#if defined(__CUDACC__)
#define PERFCAST_HOST_DEVICE __host__ __device__
#else
#define PERFCAST_HOST_DEVICE
#endif

namespace perfcast::validation {

/// SplitMix64 finalizer (Steele, Lea, Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014): a bijective 64-bit mix with full avalanche.
PERFCAST_HOST_DEVICE inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// 64 random bits for element `index` of stream `stream` under `seed`.
PERFCAST_HOST_DEVICE inline std::uint64_t counter_bits(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  return splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ index);
}

/// Uniform double in [0, 1) with 53 random bits.
PERFCAST_HOST_DEVICE inline double bits_to_unit(std::uint64_t bits) {
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

/// Uniform float in [lo, hi) for element `index` of stream `stream` (computed in double, then
/// rounded once to float, so host and device give bit-identical values).
PERFCAST_HOST_DEVICE inline float counter_uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t index,
                                                  float lo, float hi) {
  const double u = bits_to_unit(counter_bits(seed, stream, index));
  return static_cast<float>(static_cast<double>(lo) + u * (static_cast<double>(hi) - static_cast<double>(lo)));
}

/// Streams of the initial weights: bottom layer l weights/bias, top layer l weights/bias,
/// embedding table t. Distinct for up to 2^16 layers and tables.
PERFCAST_HOST_DEVICE inline std::uint64_t bottom_weight_stream(std::uint64_t layer) { return 0x10000ull + 2 * layer; }
PERFCAST_HOST_DEVICE inline std::uint64_t bottom_bias_stream(std::uint64_t layer) { return 0x10000ull + 2 * layer + 1; }
PERFCAST_HOST_DEVICE inline std::uint64_t top_weight_stream(std::uint64_t layer) { return 0x20000ull + 2 * layer; }
PERFCAST_HOST_DEVICE inline std::uint64_t top_bias_stream(std::uint64_t layer) { return 0x20000ull + 2 * layer + 1; }
PERFCAST_HOST_DEVICE inline std::uint64_t embedding_stream(std::uint64_t table) { return 0x30000ull + table; }

}  // namespace perfcast::validation

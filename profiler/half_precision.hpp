#pragma once
/// \file half_precision.hpp
/// CPU conversions between fp32 and the 16-bit storage formats (IEEE fp16 and bfloat16),
/// bit-exact with CUDA's __float2half_rn / __float2bfloat16_rn for every non-NaN input: round
/// to nearest, ties to even, subnormals kept, overflow goes to infinity. NaN stays a (quiet) NaN,
/// though its payload bits may differ from CUDA's.

#include <cstdint>

#include "profiler/embedding_bag_types.hpp"

namespace perfcast::profiler {

/// fp32 -> IEEE binary16 bits (1 sign, 5 exponent, 10 mantissa bits), with subnormals.
[[nodiscard]] std::uint16_t float_to_half_bits(float value);
/// IEEE binary16 bits -> fp32 (exact).
[[nodiscard]] float half_bits_to_float(std::uint16_t bits);

/// fp32 -> bfloat16 bits (the upper 16 bits of the rounded fp32 value).
[[nodiscard]] std::uint16_t float_to_bfloat16_bits(float value);
/// bfloat16 bits -> fp32 (exact).
[[nodiscard]] float bfloat16_bits_to_float(std::uint16_t bits);

/// The fp32 value `value` becomes after a store to `precision` and a load back.
[[nodiscard]] float round_to_precision(float value, WeightPrecision precision);

}  // namespace perfcast::profiler

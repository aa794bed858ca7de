#include "profiler/half_precision.hpp"

#include <bit>

namespace perfcast::profiler {

std::uint16_t float_to_half_bits(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // inf or NaN; a NaN keeps its top payload bits and is made quiet
    return static_cast<std::uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? (0x0200u | ((a >> 13) & 0x03ffu)) : 0u));
  }
  if (a >= 0x477ff000u) {  // >= 65520 rounds to infinity
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  }
  if (a <= 0x33000000u) {  // <= 2^-25: rounds to zero (2^-25 is a tie and 0 is even)
    return sign;
  }
  const std::uint32_t exponent = a >> 23;
  const std::uint32_t mantissa = a & 0x007fffffu;
  std::uint32_t q = 0;
  std::uint32_t remainder = 0;
  std::uint32_t halfway = 0;
  if (a < 0x38800000u) {  // below 2^-14: half subnormal, counted in units of 2^-24
    const std::uint32_t m = mantissa | 0x00800000u;
    const std::uint32_t shift = 126u - exponent;  // 14 .. 24
    q = m >> shift;
    remainder = m & ((1u << shift) - 1u);
    halfway = 1u << (shift - 1u);
  } else {
    q = ((exponent - 112u) << 10) | (mantissa >> 13);
    remainder = mantissa & 0x1fffu;
    halfway = 0x1000u;
  }
  if (remainder > halfway || (remainder == halfway && (q & 1u) != 0u)) {
    ++q;  // a carry into the exponent field is the correct next value
  }
  return static_cast<std::uint16_t>(sign | q);
}

float half_bits_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x03ffu;
  if (exponent == 0x1fu) {
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in fp32
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

std::uint16_t float_to_bfloat16_bits(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) {  // NaN: truncate and make quiet
    return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  }
  const std::uint32_t rounding_bias = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>((x + rounding_bias) >> 16);
}

float bfloat16_bits_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

float round_to_precision(float value, WeightPrecision precision) {
  switch (precision) {
    case WeightPrecision::kFp16: return half_bits_to_float(float_to_half_bits(value));
    case WeightPrecision::kBf16: return bfloat16_bits_to_float(float_to_bfloat16_bits(value));
    case WeightPrecision::kFp32: break;
  }
  return value;
}

}  // namespace perfcast::profiler

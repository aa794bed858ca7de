#include <cmath>
#include <cstdint>
#include <limits>

#include <catch2/catch.hpp>

#include "profiler/half_precision.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_profiler_half_precision_test {

using namespace perfcast::profiler;

TEST_CASE("fp16 conversion of exact values and special cases", "[profiler][half]") {
  CHECK(float_to_half_bits(0.0f) == 0x0000);
  CHECK(float_to_half_bits(-0.0f) == 0x8000);
  CHECK(float_to_half_bits(1.0f) == 0x3c00);
  CHECK(float_to_half_bits(-2.0f) == 0xc000);
  CHECK(float_to_half_bits(0.5f) == 0x3800);
  CHECK(float_to_half_bits(65504.0f) == 0x7bff);  // largest finite half
  CHECK(float_to_half_bits(0x1p-14f) == 0x0400);  // smallest normal
  CHECK(float_to_half_bits(0x1p-24f) == 0x0001);  // smallest subnormal
  CHECK(float_to_half_bits(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(float_to_half_bits(-std::numeric_limits<float>::infinity()) == 0xfc00);
  const std::uint16_t nan = float_to_half_bits(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan & 0x7c00) == 0x7c00);
  CHECK((nan & 0x03ff) != 0);

  CHECK(half_bits_to_float(0x3c00) == 1.0f);
  CHECK(half_bits_to_float(0x7bff) == 65504.0f);
  CHECK(half_bits_to_float(0x0001) == 0x1p-24f);
  CHECK(half_bits_to_float(0x8001) == -0x1p-24f);
  CHECK(half_bits_to_float(0x3555) == 0.333251953125f);
  CHECK(std::isinf(half_bits_to_float(0x7c00)));
  CHECK(std::isnan(half_bits_to_float(0x7e00)));
}

TEST_CASE("fp16 rounds to nearest, ties to even", "[profiler][half]") {
  // Spacing of halves in [1, 2) is 2^-10.
  CHECK(float_to_half_bits(1.0f + 0x1p-11f) == 0x3c00);        // tie, 1.0 is even
  CHECK(float_to_half_bits(1.0f + 3 * 0x1p-11f) == 0x3c02);    // tie between 0x3c01 and 0x3c02 -> even
  CHECK(float_to_half_bits(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01);  // just above the tie
  CHECK(float_to_half_bits(1.0f - 0x1p-12f) == 0x3c00);        // tie below 1: 0x3bff is odd
  CHECK(float_to_half_bits(0.1f) == 0x2e66);                   // 0.0999755859375
  CHECK(round_to_precision(0.1f, WeightPrecision::kFp16) == 0.0999755859375f);
  // Overflow: 65519.99 rounds down to 65504, 65520 is a tie that rounds to infinity (even).
  CHECK(float_to_half_bits(65519.0f) == 0x7bff);
  CHECK(float_to_half_bits(65520.0f) == 0x7c00);
  // Subnormals: 2^-25 is a tie between 0 and 2^-24 -> 0; 3*2^-26 rounds up to 2^-24;
  // 3*2^-25 is a tie between 1 and 2 units of 2^-24 -> 2.
  CHECK(float_to_half_bits(0x1p-25f) == 0x0000);
  CHECK(float_to_half_bits(3 * 0x1p-26f) == 0x0001);
  CHECK(float_to_half_bits(3 * 0x1p-25f) == 0x0002);
  CHECK(float_to_half_bits(-3 * 0x1p-25f) == 0x8002);
  // Largest subnormal rounding up into the smallest normal.
  CHECK(float_to_half_bits(0x1p-14f - 0x1p-26f) == 0x0400);
}

TEST_CASE("bf16 conversion rounds to nearest, ties to even", "[profiler][half]") {
  CHECK(float_to_bfloat16_bits(1.0f) == 0x3f80);
  CHECK(float_to_bfloat16_bits(-2.0f) == 0xc000);
  // Spacing of bf16 in [1, 2) is 2^-7.
  CHECK(float_to_bfloat16_bits(1.0f + 0x1p-8f) == 0x3f80);      // tie -> even
  CHECK(float_to_bfloat16_bits(1.0f + 3 * 0x1p-8f) == 0x3f82);  // tie -> even
  CHECK(float_to_bfloat16_bits(1.0f + 0x1p-8f + 0x1p-16f) == 0x3f81);
  CHECK(float_to_bfloat16_bits(0.1f) == 0x3dcd);  // 0.10009765625
  CHECK(round_to_precision(0.1f, WeightPrecision::kBf16) == 0.10009765625f);
  CHECK(float_to_bfloat16_bits(std::numeric_limits<float>::max()) == 0x7f80);  // rounds to infinity
  CHECK(std::isnan(bfloat16_bits_to_float(float_to_bfloat16_bits(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(bfloat16_bits_to_float(0x3f81) == 1.0078125f);
  CHECK(round_to_precision(0.1f, WeightPrecision::kFp32) == 0.1f);
}

}  // namespace perfcast_test_profiler_half_precision_test

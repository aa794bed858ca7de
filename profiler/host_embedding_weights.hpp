#pragma once
/// \file host_embedding_weights.hpp
/// Flat weight buffer of all tables in host memory, stored in fp32, fp16 or bf16.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "profiler/embedding_bag_types.hpp"
#include "profiler/half_precision.hpp"

namespace perfcast::profiler {

/// `size()` weight elements of one storage precision. Values go in and out as fp32; a store
/// rounds to the storage precision (nearest even), a load is exact.
class HostEmbeddingWeights {
 public:
  HostEmbeddingWeights() = default;
  /// `num_elements` zero weights.
  HostEmbeddingWeights(WeightPrecision precision, std::int64_t num_elements);
  /// Rounds every value of `values` to `precision`.
  [[nodiscard]] static HostEmbeddingWeights from_floats(WeightPrecision precision, std::span<const float> values);

  [[nodiscard]] WeightPrecision precision() const { return precision_; }
  [[nodiscard]] std::int64_t size() const { return size_; }

  /// Element i as fp32 (exact). Contract: 0 <= i < size() (not checked).
  [[nodiscard]] float load(std::int64_t i) const {
    const auto k = static_cast<std::size_t>(i);
    switch (precision_) {
      case WeightPrecision::kFp32: return fp32_[k];
      case WeightPrecision::kFp16: return half_bits_to_float(bits16_[k]);
      case WeightPrecision::kBf16: return bfloat16_bits_to_float(bits16_[k]);
    }
    return 0.0f;
  }
  /// Stores `value`, rounded to the storage precision, into element i. Contract: 0 <= i < size().
  void store(std::int64_t i, float value);

  /// All elements as fp32.
  [[nodiscard]] std::vector<float> to_floats() const;

  /// Raw storage: `size() * weight_bytes(precision())` bytes, element i at byte i*weight_bytes.
  [[nodiscard]] const void* data() const;
  [[nodiscard]] void* data();
  [[nodiscard]] std::size_t size_bytes() const;

 private:
  WeightPrecision precision_ = WeightPrecision::kFp32;
  std::int64_t size_ = 0;
  std::vector<float> fp32_;           // used when precision_ == kFp32
  std::vector<std::uint16_t> bits16_;  // used for kFp16 and kBf16
};

}  // namespace perfcast::profiler

#include "profiler/host_embedding_weights.hpp"

#include <stdexcept>
#include <string>

namespace perfcast::profiler {

HostEmbeddingWeights::HostEmbeddingWeights(WeightPrecision precision, std::int64_t num_elements)
    : precision_(precision), size_(num_elements) {
  if (num_elements < 0) {
    throw std::invalid_argument("HostEmbeddingWeights: negative size " + std::to_string(num_elements));
  }
  if (precision == WeightPrecision::kFp32) {
    fp32_.assign(static_cast<std::size_t>(num_elements), 0.0f);
  } else {
    bits16_.assign(static_cast<std::size_t>(num_elements), 0);  // +0.0 in both fp16 and bf16
  }
}

HostEmbeddingWeights HostEmbeddingWeights::from_floats(WeightPrecision precision, std::span<const float> values) {
  HostEmbeddingWeights w(precision, static_cast<std::int64_t>(values.size()));
  for (std::size_t i = 0; i < values.size(); ++i) {
    w.store(static_cast<std::int64_t>(i), values[i]);
  }
  return w;
}

void HostEmbeddingWeights::store(std::int64_t i, float value) {
  const auto k = static_cast<std::size_t>(i);
  switch (precision_) {
    case WeightPrecision::kFp32: fp32_[k] = value; return;
    case WeightPrecision::kFp16: bits16_[k] = float_to_half_bits(value); return;
    case WeightPrecision::kBf16: bits16_[k] = float_to_bfloat16_bits(value); return;
  }
}

std::vector<float> HostEmbeddingWeights::to_floats() const {
  std::vector<float> out(static_cast<std::size_t>(size_));
  for (std::int64_t i = 0; i < size_; ++i) {
    out[static_cast<std::size_t>(i)] = load(i);
  }
  return out;
}

const void* HostEmbeddingWeights::data() const {
  return precision_ == WeightPrecision::kFp32 ? static_cast<const void*>(fp32_.data())
                                              : static_cast<const void*>(bits16_.data());
}

void* HostEmbeddingWeights::data() {
  return precision_ == WeightPrecision::kFp32 ? static_cast<void*>(fp32_.data()) : static_cast<void*>(bits16_.data());
}

std::size_t HostEmbeddingWeights::size_bytes() const {
  return static_cast<std::size_t>(size_) * static_cast<std::size_t>(weight_bytes(precision_));
}

}  // namespace perfcast::profiler

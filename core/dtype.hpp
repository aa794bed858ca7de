#pragma once
/// \file dtype.hpp
/// Numeric types of tensors and of the math units that process them.

#include <optional>
#include <string>
#include <string_view>

namespace perfcast {

/// Storage / math precision. kTf32 is fp32 storage with TF32 tensor-core math.
enum class DType { kFp32, kTf32, kFp16, kBf16, kFp8 };

/// Bytes per element in memory (tf32 is stored as fp32).
[[nodiscard]] constexpr double dtype_bytes(DType t) {
  switch (t) {
    case DType::kFp32:
    case DType::kTf32: return 4.0;
    case DType::kFp16:
    case DType::kBf16: return 2.0;
    case DType::kFp8: return 1.0;
  }
  return 4.0;
}

[[nodiscard]] std::string_view dtype_name(DType t);
[[nodiscard]] std::optional<DType> dtype_from_name(std::string_view name);

}  // namespace perfcast

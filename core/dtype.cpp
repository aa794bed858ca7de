#include "core/dtype.hpp"

namespace perfcast {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kFp32: return "fp32";
    case DType::kTf32: return "tf32";
    case DType::kFp16: return "fp16";
    case DType::kBf16: return "bf16";
    case DType::kFp8: return "fp8";
  }
  return "fp32";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  if (name == "fp32") return DType::kFp32;
  if (name == "tf32") return DType::kTf32;
  if (name == "fp16") return DType::kFp16;
  if (name == "bf16") return DType::kBf16;
  if (name == "fp8") return DType::kFp8;
  return std::nullopt;
}

}  // namespace perfcast

#include "topology/gpu_spec.hpp"

namespace perfcast {

FlopsPerSecond GpuSpec::peak(DType t) const {
  switch (t) {
    case DType::kFp32: return peak_fp32;
    case DType::kTf32: return peak_tf32 > 0 ? peak_tf32 : peak_fp32;
    case DType::kFp16: return peak_fp16;
    case DType::kBf16: return peak_bf16 > 0 ? peak_bf16 : peak_fp16;
    case DType::kFp8: return peak_fp8 > 0 ? peak_fp8 : peak_fp16;
  }
  return peak_fp32;
}

}  // namespace perfcast

#pragma once
/// \file cuda_check.hpp
/// PERFCAST_CUDA_CHECK: turn a failed CUDA runtime call into a perfcast::profiler::CudaError.
/// CUDA-only header: include it only from translation units that are compiled with CUDA
/// (.cu files, or .cpp files inside `#if PERFCAST_HAVE_CUDA`).

#include <cuda_runtime_api.h>

#include "profiler/cuda_error.hpp"

namespace perfcast::profiler::detail {

/// Throws CudaError when `status` is not cudaSuccess. `call` is the checked expression as text.
inline void cuda_check(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) {
    throw CudaError(static_cast<int>(status), call, cudaGetErrorString(status), file, line);
  }
}

}  // namespace perfcast::profiler::detail

/// Evaluates a CUDA runtime call once; throws CudaError (with file:line) when it fails.
#define PERFCAST_CUDA_CHECK(expr) ::perfcast::profiler::detail::cuda_check((expr), #expr, __FILE__, __LINE__)

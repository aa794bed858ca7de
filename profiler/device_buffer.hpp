#pragma once
/// \file device_buffer.hpp
/// One owning device allocation (cudaMalloc / cudaFree), shared by the profiler's
/// benchmarks and the executor. CUDA builds only: includes the CUDA runtime header.

#include <cstddef>
#include <utility>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "profiler/cuda_check.hpp"
#include "profiler/cuda_error.hpp"

namespace perfcast::profiler {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// `bytes` of device memory (none for 0: a null pointer). Throws CudaError naming the
  /// bytes asked for when cudaMalloc fails (out of memory).
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    const cudaError_t e = cudaMalloc(&p_, bytes);
    if (e != cudaSuccess) {
      p_ = nullptr;
      throw CudaError(static_cast<int>(e), fmt::format("cudaMalloc({} bytes)", bytes), cudaGetErrorString(e), __FILE__,
                      __LINE__);
    }
  }
  /// A device copy of `bytes` of host memory.
  DeviceBuffer(const void* host, std::size_t bytes) : DeviceBuffer(bytes) {
    if (bytes > 0) PERFCAST_CUDA_CHECK(cudaMemcpy(p_, host, bytes, cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer() {
    if (p_ != nullptr) (void)cudaFree(p_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <typename T>
  [[nodiscard]] T* as() const {
    return static_cast<T*>(p_);
  }
  [[nodiscard]] void* get() const { return p_; }
  [[nodiscard]] float* f() const { return static_cast<float*>(p_); }
  [[nodiscard]] std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace perfcast::profiler

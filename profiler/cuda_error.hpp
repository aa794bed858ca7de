#pragma once
/// \file cuda_error.hpp
/// Exceptions thrown by the CUDA parts of the profiler. Includes no CUDA header, so it is
/// usable from code that is compiled without CUDA.

#include <stdexcept>
#include <string>

namespace perfcast::profiler {

/// A CUDA runtime call failed. `code()` is the cudaError_t value as an int, `where()` is
/// "file:line" of the failing call (see PERFCAST_CUDA_CHECK in cuda_check.hpp).
class CudaError : public std::runtime_error {
 public:
  CudaError(int code, const std::string& call, const std::string& message, const char* file, int line)
      : std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": CUDA error " +
                           std::to_string(code) + " (" + message + ") in " + call),
        code_(code),
        where_(std::string(file) + ":" + std::to_string(line)) {}

  [[nodiscard]] int code() const noexcept { return code_; }
  [[nodiscard]] const std::string& where() const noexcept { return where_; }

 private:
  int code_;
  std::string where_;
};

/// No usable CUDA device: the build has no CUDA support, no driver is loaded, or the machine
/// has no GPU. Thrown by every function that needs a device; `cuda_device_available()` never throws.
class NoCudaDeviceError : public std::runtime_error {
 public:
  explicit NoCudaDeviceError(const std::string& reason)
      : std::runtime_error("no CUDA device available: " + reason) {}
};

}  // namespace perfcast::profiler

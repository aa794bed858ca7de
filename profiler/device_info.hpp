#pragma once
/// \file device_info.hpp
/// What the CUDA runtime reports about a GPU. Includes no CUDA header; in a build without CUDA
/// the functions exist and report that no device is available.

#include <cstdint>
#include <string>

namespace perfcast::profiler {

/// Properties of one CUDA device, as reported by the runtime.
struct DeviceInfo {
  int index = 0;                         ///< CUDA device ordinal
  std::string name;                      ///< e.g. "NVIDIA H100 80GB HBM3"
  int compute_capability_major = 0;      ///< 9 for Hopper
  int compute_capability_minor = 0;
  int sm_count = 0;                      ///< streaming multiprocessors
  int sm_clock_khz = 0;                  ///< peak SM clock, kHz
  int memory_clock_khz = 0;              ///< peak memory clock, kHz
  int memory_bus_width_bits = 0;         ///< global memory bus width, bits
  std::uint64_t total_memory_bytes = 0;  ///< global memory, bytes
  int l2_cache_bytes = 0;                ///< L2 cache, bytes
  int shared_memory_per_sm_bytes = 0;    ///< shared memory per SM, bytes
  int max_threads_per_sm = 0;
  int driver_version = 0;   ///< highest CUDA version the driver supports, 1000*major + 10*minor
  int runtime_version = 0;  ///< CUDA runtime version, 1000*major + 10*minor

  /// Peak DRAM bandwidth in bytes/s: 2 (double data rate) * memory clock * bus width / 8.
  [[nodiscard]] double peak_memory_bandwidth_bytes_per_s() const {
    return 2.0 * memory_clock_khz * 1e3 * memory_bus_width_bits / 8.0;
  }
};

/// Whether this build contains the CUDA parts (PERFCAST_HAVE_CUDA).
[[nodiscard]] bool cuda_support_built() noexcept;

/// Number of usable CUDA devices; 0 (never an exception) when the build has no CUDA, no
/// driver is loaded, or there is no GPU.
[[nodiscard]] int cuda_device_count() noexcept;

/// cuda_device_count() > 0.
[[nodiscard]] bool cuda_device_available() noexcept;

/// Queries device `device`. Throws NoCudaDeviceError when no device is available,
/// std::out_of_range when `device` is not a valid ordinal, CudaError when a query fails.
[[nodiscard]] DeviceInfo query_device_info(int device = 0);

/// One-line human-readable summary, e.g. "NVIDIA H100 ... (sm_90, 132 SMs, 79.1 GiB, ...)".
[[nodiscard]] std::string describe(const DeviceInfo& info);

}  // namespace perfcast::profiler

#include "profiler/device_info.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "profiler/cuda_error.hpp"

#if PERFCAST_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "profiler/cuda_check.hpp"
#endif

namespace perfcast::profiler {

bool cuda_support_built() noexcept { return PERFCAST_HAVE_CUDA != 0; }

int cuda_device_count() noexcept {
#if PERFCAST_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the (non-sticky) error, e.g. no driver / no device
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

bool cuda_device_available() noexcept { return cuda_device_count() > 0; }

DeviceInfo query_device_info(int device) {
#if PERFCAST_HAVE_CUDA
  const int count = cuda_device_count();
  if (count == 0) {
    throw NoCudaDeviceError("the CUDA runtime reports no device (no GPU or no driver)");
  }
  if (device < 0 || device >= count) {
    throw std::out_of_range(fmt::format("query_device_info: device {} does not exist ({} devices)", device, count));
  }
  cudaDeviceProp prop{};
  PERFCAST_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  DeviceInfo info;
  info.index = device;
  info.name = prop.name;
  info.compute_capability_major = prop.major;
  info.compute_capability_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.memory_bus_width_bits = prop.memoryBusWidth;
  info.total_memory_bytes = prop.totalGlobalMem;
  info.l2_cache_bytes = prop.l2CacheSize;
  info.shared_memory_per_sm_bytes = static_cast<int>(prop.sharedMemPerMultiprocessor);
  info.max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
  // The clock fields left cudaDeviceProp in CUDA 13; the attributes work on every version.
  PERFCAST_CUDA_CHECK(cudaDeviceGetAttribute(&info.sm_clock_khz, cudaDevAttrClockRate, device));
  PERFCAST_CUDA_CHECK(cudaDeviceGetAttribute(&info.memory_clock_khz, cudaDevAttrMemoryClockRate, device));
  PERFCAST_CUDA_CHECK(cudaDriverGetVersion(&info.driver_version));
  PERFCAST_CUDA_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
  return info;
#else
  (void)device;
  throw NoCudaDeviceError("perfcast was built without CUDA (PERFCAST_ENABLE_CUDA=OFF or no nvcc)");
#endif
}

std::string describe(const DeviceInfo& info) {
  return fmt::format(
      "{} (sm_{}{}, {} SMs @ {:.0f} MHz, {:.1f} GiB @ {:.0f} GB/s, L2 {:.0f} MiB, driver {}.{}, runtime {}.{})",
      info.name, info.compute_capability_major, info.compute_capability_minor, info.sm_count,
      info.sm_clock_khz / 1e3, static_cast<double>(info.total_memory_bytes) / (1024.0 * 1024.0 * 1024.0),
      info.peak_memory_bandwidth_bytes_per_s() / 1e9, info.l2_cache_bytes / (1024.0 * 1024.0),
      info.driver_version / 1000, (info.driver_version % 1000) / 10, info.runtime_version / 1000,
      (info.runtime_version % 1000) / 10);
}

}  // namespace perfcast::profiler

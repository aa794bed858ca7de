#include <catch2/catch.hpp>

#include "profiler/cuda_error.hpp"
#include "profiler/device_embedding_bag.hpp"
#include "profiler/device_info.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_profiler_device_info_test {

using namespace perfcast::profiler;

TEST_CASE("device availability is reported without throwing", "[profiler][device]") {
  CHECK(cuda_support_built() == (PERFCAST_HAVE_CUDA != 0));
  const int count = cuda_device_count();
  CHECK(count >= 0);
  CHECK(cuda_device_available() == (count > 0));
  if (!cuda_support_built()) CHECK(count == 0);
}

TEST_CASE("device queries throw NoCudaDeviceError without a device", "[profiler][device]") {
  if (cuda_device_available()) {
    WARN("skipped: a CUDA device is present");
    return;
  }
  CHECK_THROWS_AS(query_device_info(0), NoCudaDeviceError);
  const std::vector<TableShape> shapes = {{2, 4}};
  const auto layout = make_embedding_bag_layout(shapes, 1);
  const HostEmbeddingWeights weights(WeightPrecision::kFp32, layout.total_weight_elements);
  CHECK_THROWS_AS(DeviceEmbeddingBag(layout, weights), NoCudaDeviceError);
}

TEST_CASE("device info of a real GPU is plausible", "[profiler][device][gpu]") {
  if (!cuda_device_available()) {
    WARN("skipped: no CUDA device" << (cuda_support_built() ? "" : " (built without CUDA)"));
    return;
  }
  const DeviceInfo info = query_device_info(0);
  INFO(describe(info));
  CHECK_FALSE(info.name.empty());
  CHECK(info.compute_capability_major >= 5);
  CHECK(info.sm_count > 0);
  CHECK(info.sm_clock_khz > 0);
  CHECK(info.memory_clock_khz > 0);
  CHECK(info.memory_bus_width_bits > 0);
  CHECK(info.total_memory_bytes > (1ull << 30));
  CHECK(info.l2_cache_bytes > 0);
  CHECK(info.runtime_version >= 12000);
  CHECK(info.driver_version > 0);
  CHECK(info.peak_memory_bandwidth_bytes_per_s() > 1e11);
  CHECK_THROWS_AS(query_device_info(cuda_device_count()), std::out_of_range);
  WARN("device 0: " << describe(info));
}

TEST_CASE("peak bandwidth and summary of a hand-made DeviceInfo", "[profiler][device]") {
  DeviceInfo info;
  info.name = "NVIDIA H100 80GB HBM3";
  info.compute_capability_major = 9;
  info.compute_capability_minor = 0;
  info.sm_count = 132;
  info.sm_clock_khz = 1980000;
  info.memory_clock_khz = 2619000;  // HBM3, double data rate
  info.memory_bus_width_bits = 5120;
  info.total_memory_bytes = 80ull << 30;
  info.l2_cache_bytes = 50 << 20;
  info.driver_version = 13000;
  info.runtime_version = 12080;
  // 2 * 2.619e9 /s * 640 bytes = 3.352e12 bytes/s.
  CHECK(info.peak_memory_bandwidth_bytes_per_s() == Approx(2.0 * 2.619e9 * 640.0));
  CHECK(describe(info) ==
        "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs @ 1980 MHz, 80.0 GiB @ 3352 GB/s, L2 50 MiB, driver 13.0, "
        "runtime 12.8)");
}

}  // namespace perfcast_test_profiler_device_info_test

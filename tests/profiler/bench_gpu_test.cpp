// Microbenchmarks and the CUPTI tracer on a real GPU ([gpu]: skipped without a device), and the
// refusal without one.
#include <catch2/catch.hpp>

#include "profiler/bench_runner.hpp"
#include "profiler/cuda_error.hpp"
#include "profiler/cupti_tracer.hpp"
#include "profiler/device_info.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_profiler_bench_gpu_test {

using namespace perfcast;
using namespace perfcast::profiler;

namespace {

bool skip_without_gpu() {
  if (cuda_device_available()) return false;
  WARN("skipped: no CUDA device" << (cuda_support_built() ? "" : " (built without CUDA)"));
  return true;
}

}  // namespace

TEST_CASE("without a device the runner and tracer refuse with typed errors", "[profiler][bench]") {
  if (cuda_device_available()) return;
  CHECK_THROWS_AS(BenchRunner(0), NoCudaDeviceError);
  CHECK_THROWS_AS(run_sweeps({}, {}, [](const Measurement&) {}), NoCudaDeviceError);
  if (!CuptiTracer::built()) CHECK_THROWS_AS(CuptiTracer(), TracerUnavailable);
}

TEST_CASE("a 1024^3 GEMM runs within 0.3-1.2x of its roofline", "[profiler][bench][gpu]") {
  if (skip_without_gpu()) return;
  BenchRunner runner(0);
  INFO("timer " << runner.timer() << " " << runner.cupti_error());
  // fp16 tensor-core peak of an H100 SXM: 989.4 TFLOP/s dense (NVIDIA H100 datasheet); H200 the
  // same. The roofline is max(flops / peak, bytes / HBM bandwidth).
  const DeviceInfo info = query_device_info(0);
  const double peak_flops = info.name.find("H100") != std::string::npos || info.name.find("H200") != std::string::npos
                                ? 989.4e12 : 0;
  if (peak_flops == 0) {
    WARN("skipped: roofline constants only for H100/H200, got " << info.name);
    return;
  }
  BenchCase c;
  c.kernel = GemmDesc{1024, 1024, 1024, 1, DType::kFp16, false};
  SweepSettings s;
  s.warmup = 10;
  s.repetitions = 50;
  const Measurement m = runner.measure(c, s);
  const double flops = 2.0 * 1024 * 1024 * 1024;
  const double bytes = 3.0 * 1024 * 1024 * 2;
  const double roofline = std::max(flops / peak_flops, bytes / info.peak_memory_bandwidth_bytes_per_s());
  WARN("1024^3 fp16 GEMM: " << m.timing.median * 1e6 << " us (" << m.timing.timer << "), roofline " << roofline * 1e6
                            << " us, kernel " << m.kernel_name);
  // Measured time must not beat the roofline by much (timer sanity) nor be far off it. A small
  // GEMM reaches well under peak, so the bound is loose: roofline / measured in [0.3, 1.2].
  CHECK(roofline / m.timing.median >= 0.3);
  CHECK(roofline / m.timing.median <= 1.2);
  CHECK(m.timing.repetitions == 50);
  CHECK(m.timing.cv < 0.2);
}

TEST_CASE("the CUPTI tracer correlates memcpys and memsets with their runtime calls", "[profiler][cupti][gpu]") {
  if (skip_without_gpu()) return;
  BenchRunner runner(0);
  if (runner.timer() != "cupti") {
    WARN("CUPTI unavailable: " << runner.cupti_error());
    return;
  }
  BenchCase c;
  c.kernel = MemcpyDesc{64.0 * (1 << 20), CopyKind::kDeviceToDevice};
  SweepSettings s;
  s.repetitions = 10;
  const Measurement m = runner.measure(c, s);
  CHECK(m.timing.timer == "cupti");
  CHECK(m.timing.repetitions == 10);
  // 128 MiB moved (read + write) at <= 4.8 TB/s (H200 HBM3e) takes >= 28 us.
  CHECK(m.timing.median > 20e-6);
  CHECK(m.timing.median < 5e-3);
}

TEST_CASE("each benchmark family measures plausible times", "[profiler][bench][gpu]") {
  if (skip_without_gpu()) return;
  BenchRunner runner(0);
  SweepSettings s;
  s.warmup = 2;
  s.repetitions = 5;
  std::vector<BenchCase> cases(6);
  cases[0].kernel = GemmDesc{512, 264, 1032, 4, DType::kBf16, false};
  cases[0].trans_a = true;
  cases[1].kernel = GemmDesc{256, 512, 128, 1, DType::kTf32, false};
  cases[1].trans_b = true;
  cases[2].kernel = ElementwiseDesc{"bce", 1 << 22, 7, 12};
  cases[3].kernel = ElementwiseDesc{"bias_grad", 1 << 20, 1, 4};
  cases[3].bias_cols = 1024;
  cases[4].kernel = MemcpyDesc{1 << 20, CopyKind::kHostToDevice};
  EmbeddingDesc e;
  e.batch = 1024;
  e.tables = {EmbeddingTableDesc{100000, 64, 20, IndexDistribution::zipf(1.05)},
              EmbeddingTableDesc{5000, 128, 3, IndexDistribution::hot_set(0.01, 0.9)}};
  e.pass = EmbeddingPass::kBackward;
  cases[5].kernel = e;
  for (const auto& c : cases) {
    const Measurement m = runner.measure(c, s);
    INFO(case_label(c) << ": " << m.timing.median * 1e6 << " us");
    CHECK(m.timing.median > 1e-7);
    CHECK(m.timing.median < 0.1);
    CHECK(m.device.sm_count > 0);
  }
}

}  // namespace perfcast_test_profiler_bench_gpu_test

#if PERFCAST_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "profiler/bench_gemm.hpp"
#endif

namespace perfcast_test_profiler_bench_gpu_test {
#if PERFCAST_HAVE_CUDA


TEST_CASE("cuBLASLt GEMMs match an fp64 reference for every dtype and transpose", "[profiler][bench][gpu]") {
  if (skip_without_gpu()) return;
  bench::CublasLt lt;
  for (DType t : {DType::kFp32, DType::kTf32, DType::kBf16, DType::kFp16}) {
    for (int tr = 0; tr < 4; ++tr) {
      // Odd sizes catch swapped leading dimensions.
      const GemmDesc g{136, 72, 264, 3, t, false};
      bench::GemmCase gc(lt, g, (tr & 1) != 0, (tr & 2) != 0, nullptr);
      gc.launch(nullptr);
      const double err = gc.check_sampled(nullptr);
      INFO(kernel_label(KernelDesc{g}) << " transposes " << tr << ": max rel error " << err);
      // The error relative to sum |a_p b_p| (check_sampled). fp32: K x 2^-24 = 1.6e-5 at most.
      // tf32 rounds both inputs to 10 mantissa bits: each product off by at most 2 x 2^-10
      // (truncation), 2e-3 in all; the bound is twice that. 16-bit inputs are exact, the
      // 16-bit output rounds by 2^-8 (bf16) at most. On an H200 (cuBLAS 13.1) the former
      // per-element check (error / |result|) read 0.6-2.3% for tf32: cancellation, not error.
      CHECK(err < (t == DType::kFp32 ? 1e-4 : t == DType::kTf32 ? 4e-3 : 2e-2));
    }
  }
}
#endif

}  // namespace perfcast_test_profiler_bench_gpu_test

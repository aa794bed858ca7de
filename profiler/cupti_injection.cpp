// libperfcast_inject.so: a CUPTI injection library. Loaded by the CUDA driver into any CUDA
// program through the environment:
//
//   CUDA_INJECTION64_PATH=/path/to/libperfcast_inject.so PERFCAST_TRACE_OUT=trace.jsonl python train.py
//
// it records every kernel, memcpy and memset (CUPTI activity records, correlated with the
// launching runtime call) and, when the process exits, writes perfcast measurement lines
// (predictors/measurement.hpp, schema "perfcast.measurement" 1.0) to PERFCAST_TRACE_OUT
// (default perfcast_trace.jsonl in the working directory). Kernels are described as measured
// kernels: {"kernel": {"family": "measured", "name": "<demangled name>"}, "kernel_name": same,
// "timing": {"timer": "cupti", ...}}; memcpys are named "memcpy h2d" / "memcpy d2h" / "memcpy
// d2d" / "memcpy other", memsets "memset".
//
// Environment:
//   PERFCAST_TRACE_OUT   output file (replaced at exit)
//   PERFCAST_TRACE_MODE  "summary" (default): one line per op name, timing over all its runs;
//                        "launches": one line per op (repetitions 1), in GPU start order
//   PERFCAST_TRACE_QUIET set to anything: no summary on standard error
//
// The host launch cost per runtime function, the record counts and the dropped-record count go
// to standard error at exit.

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>

#include <cuda.h>

#include "perfcast/build_info.hpp"
#include "profiler/activity_records.hpp"
#include "profiler/cupti_tracer.hpp"
#include "profiler/trace_measurements.hpp"

namespace {

using namespace perfcast;
using namespace perfcast::profiler;

std::unique_ptr<CuptiTracer>& tracer() {
  static std::unique_ptr<CuptiTracer> t;
  return t;
}
std::once_flag g_once;

/// Device 0 as the driver reports it; fields stay empty when the driver cannot answer (the
/// process may be tearing CUDA down already).
DeviceFingerprint fingerprint() {
  DeviceFingerprint f;
  CUdevice dev = 0;
  if (cuDeviceGet(&dev, 0) != CUDA_SUCCESS) return f;
  char name[256] = {};
  if (cuDeviceGetName(name, sizeof name, dev) == CUDA_SUCCESS) f.name = name;
  int v = 0;
  if (cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) == CUDA_SUCCESS) f.sm_count = v;
  if (cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev) == CUDA_SUCCESS) f.sm_clock = v * 1e3;  // kHz
  if (cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, dev) == CUDA_SUCCESS) f.memory_clock = v * 1e3;
  if (cuDriverGetVersion(&v) == CUDA_SUCCESS) f.driver = std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  return f;
}

void write_trace() {
  auto& t = tracer();
  if (!t) return;
  const bool quiet = std::getenv("PERFCAST_TRACE_QUIET") != nullptr;
  try {
    cuCtxSynchronize();  // best effort: finish running work so its records exist
    ActivityBatch batch = t->take();
    t.reset();
    const auto launches = launch_cost_stats(batch.api);
    const auto result = correlate(batch);
    const char* path_env = std::getenv("PERFCAST_TRACE_OUT");
    const std::string path = path_env && *path_env ? path_env : "perfcast_trace.jsonl";
    const char* mode_env = std::getenv("PERFCAST_TRACE_MODE");
    const std::string mode = mode_env ? mode_env : "summary";
    const DeviceFingerprint dev = fingerprint();
    const std::string date = utc_timestamp();
    std::ofstream out(path, std::ios::trunc);
    std::size_t lines = 0;
    if (mode == "launches") {
      for (const auto& op : result.ops) {
        Measurement m;
        m.timing = timing_stats({static_cast<double>(op.duration_ns()) * 1e-9}, "cupti");
        m.kernel = MeasuredKernelDesc{op.gpu.name, m.timing.median};
        m.kernel_name = op.gpu.name;
        m.device = dev;
        m.date = date;
        m.commit = build_info::kGitCommit;
        out << measurement_to_jsonl(m);
        ++lines;
      }
    } else {
      for (const auto& m : measurements_by_name(result, "cupti", dev, date, build_info::kGitCommit)) {
        out << measurement_to_jsonl(m);
        ++lines;
      }
    }
    out.close();
    if (!quiet) {
      std::fprintf(stderr,
                   "perfcast_inject: %zu GPU ops (%zu without a runtime record, %zu invalid), %llu records dropped; "
                   "wrote %zu lines to %s%s\n",
                   result.ops.size(), result.unmatched_gpu, result.invalid_records,
                   static_cast<unsigned long long>(result.dropped_records), lines, path.c_str(),
                   out ? "" : " (WRITE FAILED)");
      for (const auto& l : launches) {
        std::fprintf(stderr, "perfcast_inject:   %-28s %8zu calls, host median %.2f us, p90 %.2f us\n",
                     l.function.c_str(), l.calls, l.median_ns * 1e-3, l.p90_ns * 1e-3);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "perfcast_inject: writing the trace failed: %s\n", e.what());
  }
}

}  // namespace

/// Entry point the CUDA driver calls once after loading the library named by
/// CUDA_INJECTION64_PATH. Returns 1 (the driver ignores the value).
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  std::call_once(g_once, [] {
    try {
      TracerOptions options;
      options.external_correlation = false;  // nothing pushes external ids in a foreign program
      tracer() = std::make_unique<CuptiTracer>(options);
      std::atexit(write_trace);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "perfcast_inject: not tracing: %s\n", e.what());
    }
  });
  return 1;
}

#pragma once
/// \file measurement.hpp
/// Measurement files (JSON lines, one measured kernel per line), written by `perfcast
/// profile` and `run`, read by `calibrate`. Each line:
///   {"schema": "perfcast.measurement", "schema_version": "1.0",
///    "kernel": {"family": "gemm", "m": 4096, "n": 4096, "k": 4096, "batch": 1, "dtype": "bf16", "bias_epilogue": false},
///    "kernel_name": "sm90_xmma_gemm_...",            (optional: the symbol that ran)
///    "timing": {"timer": "cupti", "repetitions": 50, "median": "1.234ms", "mean": ..., "p10": ..., "p90": ..., "stddev": ..., "cv": 0.01},
///    "device": {"name": "NVIDIA H100 80GB HBM3", "sm_count": 132, "sm_clock": "1.98GHz", "memory_clock": "2.619GHz",
///               "driver": "580.65", "cuda_runtime": "13.0", "cublas": "13.0.0"},
///    "date": "2026-11-22T03:00:00Z", "commit": "abc123",
///    "source": "trace.json.gz rank 3 step 1009"}   (optional: where a measurement taken from
///                                                   someone else's run came from)
/// Timers: "cupti", "cuda_events" (our microbenchmarks) and "kineto" (a kernel's duration in
/// a PyTorch profiler trace, repetitions 1: model/traces/trace_measurements.hpp).
/// Units as strings, as in every user-facing file.

#include <filesystem>
#include <string>
#include <vector>

#include "predictors/kernel_desc.hpp"
#include "core/json_reader.hpp"

namespace perfcast {

struct DeviceFingerprint {
  std::string name;
  int sm_count = 0;
  Hertz sm_clock = 0;
  Hertz memory_clock = 0;
  std::string driver;        ///< e.g. "580.65"
  std::string cuda_runtime;  ///< e.g. "13.0"
  std::string cublas;        ///< e.g. "13.0.0" ("" when not used)
};

struct TimingStats {
  std::string timer;  ///< "cupti" (kernel activity records), "cuda_events" (fallback) or "kineto" (a profiler trace)
  int repetitions = 0;
  Seconds median = 0, mean = 0, p10 = 0, p90 = 0, stddev = 0;
  double cv = 0;      ///< stddev / mean
};

struct Measurement {
  KernelDesc kernel;
  std::string kernel_name;
  TimingStats timing;
  DeviceFingerprint device;
  std::string date;
  std::string commit;
  std::string source;  ///< "" for our own measurements; else the trace file, rank and step
};

/// Robust statistics of repeated timings (median, p10, p90, mean, stddev, cv). Throws
/// std::invalid_argument on an empty sample.
[[nodiscard]] TimingStats timing_stats(std::vector<Seconds> samples, std::string timer);

/// Kernel descriptors as JSON objects with a "family" key (gemm, elementwise, memcpy,
/// embedding_forward, embedding_backward). Measured-only descriptors are not written.
[[nodiscard]] nlohmann::json kernel_to_json(const KernelDesc& k);
[[nodiscard]] KernelDesc kernel_from_json(const JsonObject& o);

[[nodiscard]] std::string measurement_to_jsonl(const Measurement& m);  ///< one line, newline-terminated
/// Reads a JSON-lines file; errors name the file and "line N" plus the JSON path.
[[nodiscard]] std::vector<Measurement> read_measurements(const std::filesystem::path& path);

}  // namespace perfcast

#pragma once
/// \file executor_trace.hpp
/// The executor's GPU trace as a Chrome trace (chrome://tracing, https://ui.perfetto.dev):
/// one process per GPU ("GPU <device>"), one thread per CUDA stream, one complete ("X")
/// event per kernel, memcpy and memset. CPU-only.

#include <nlohmann/json.hpp>

#include "profiler/activity_records.hpp"

namespace perfcast::validation {

/// Events in GPU start order; "ts" and "dur" in microseconds, ts relative to the earliest
/// op's start (0 for the first). Args: "kind", "correlation_id", "bytes" for copies and sets.
[[nodiscard]] nlohmann::json gpu_ops_chrome_trace(const profiler::CorrelationResult& r);

}  // namespace perfcast::validation

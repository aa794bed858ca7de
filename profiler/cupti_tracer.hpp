#pragma once
/// \file cupti_tracer.hpp
/// CUPTI Activity API tracer: GPU records of kernels (CONCURRENT_KERNEL), memcpys and memsets,
/// each joined to the runtime call that launched it through its correlation id, and
/// runtime-API callbacks that time the host side of every call (launch cost). Includes no CUDA
/// or CUPTI header; the records come out as plain structs (activity_records.hpp).
///
/// CUPTI keeps one set of activity buffer callbacks and one callback subscriber per process, so
/// at most one CuptiTracer exists at a time (a second throws TracerUnavailable).
///
/// Buffers: CUPTI asks for a buffer when it needs one (buffer-requested callback: an aligned
/// buffer of `buffer_bytes` is handed out) and returns it full or at a flush (buffer-completed
/// callback, on a CUPTI thread: the records are copied into the sink and the buffer freed).
/// Records CUPTI could not store are counted (cuptiActivityGetNumDroppedRecords) into
/// ActivityBatch::dropped_records.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "profiler/activity_records.hpp"

namespace perfcast::profiler {

/// CUPTI could not be started: a build without CUDA/CUPTI, no device, another profiler
/// (Nsight, a second subscriber) holds CUPTI, or a CUPTI call failed. Callers fall back to CUDA
/// events (and report timer "cuda_events").
class TracerUnavailable : public std::runtime_error {
 public:
  explicit TracerUnavailable(const std::string& why) : std::runtime_error("CUPTI tracer unavailable: " + why) {}
};

struct TracerOptions {
  bool kernels = true;          ///< CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
  bool memcpy = true;           ///< CUPTI_ACTIVITY_KIND_MEMCPY
  bool memset = true;           ///< CUPTI_ACTIVITY_KIND_MEMSET
  bool runtime_callbacks = true;  ///< time every runtime API call on the host (callback API);
                                  ///< when subscribing fails, RUNTIME activity records are used
  /// CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION (push_external_id). CUPTI emits these only
  /// before API activity records, so this also enables RUNTIME and DRIVER activity (more
  /// overhead per call; the injection library turns it off).
  bool external_correlation = true;
  std::size_t buffer_bytes = 8u << 20;  ///< bytes per activity buffer (CUPTI's samples use 8 MiB)
};

class CuptiTracer {
 public:
  /// Enables the activity kinds and callbacks. Throws TracerUnavailable on any failure (after
  /// undoing what was enabled).
  explicit CuptiTracer(TracerOptions options = {});
  /// Flushes, disables everything and unsubscribes. Never throws.
  ~CuptiTracer();
  CuptiTracer(const CuptiTracer&) = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  /// Forces CUPTI to hand over every buffer, including partly filled ones of running work
  /// (cuptiActivityFlushAll with the forced flag); synchronize the device first to get the
  /// records of all launched work.
  void flush();
  /// flush() and move everything collected so far out.
  [[nodiscard]] ActivityBatch take();

  /// Tags the runtime calls made by this thread until pop_external_id() with `id`
  /// (ExternalCorrelation records).
  void push_external_id(std::uint64_t id);
  void pop_external_id();

  /// "cupti".
  [[nodiscard]] static const char* timer_name() { return "cupti"; }
  /// Whether this build contains the CUPTI tracer (PERFCAST_HAVE_CUDA).
  [[nodiscard]] static bool built() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace perfcast::profiler

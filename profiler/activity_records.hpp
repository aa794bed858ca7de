#pragma once
/// \file activity_records.hpp
/// Plain-data copies of CUPTI activity and runtime-API records and the CPU-only logic that
/// processes them: correlating GPU work (kernels, memcpys, memsets) with the runtime call that
/// launched it, per-operation durations, host launch cost statistics and grouping into
/// benchmark repetitions. Includes no CUDA or CUPTI header: the tracer (cupti_tracer.cpp)
/// copies CUPTI's records into these structs, and the unit tests build them by hand.
///
/// Times are nanoseconds on CUPTI's clock (cuptiGetTimestamp: the same clock for GPU and host
/// records); durations handed to perfcast are converted to seconds.

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace perfcast::profiler {

/// What a GPU activity record describes.
enum class GpuOpKind { kKernel, kMemcpy, kMemset };

/// Direction of a memcpy record (CUPTI_ACTIVITY_MEMCPY_KIND_*, reduced to what perfcast models).
enum class MemcpyDirection { kHostToDevice, kDeviceToHost, kDeviceToDevice, kOther };

/// One GPU-side activity record (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, _MEMCPY or _MEMSET).
struct GpuActivity {
  GpuOpKind kind = GpuOpKind::kKernel;
  std::uint32_t correlation_id = 0;  ///< CUPTI correlation id; joins the launching runtime call (0: none)
  std::string name;                  ///< demangled-or-mangled kernel name; "memcpy HtoD", "memset" otherwise
  std::uint64_t start_ns = 0;        ///< GPU start, ns
  std::uint64_t end_ns = 0;          ///< GPU end, ns (>= start_ns for a valid record)
  std::uint32_t device = 0;
  std::uint32_t stream = 0;          ///< CUPTI stream id
  std::uint64_t bytes = 0;           ///< memcpy / memset only: bytes moved or set
  MemcpyDirection direction = MemcpyDirection::kOther;  ///< memcpy only
  std::int32_t grid[3] = {0, 0, 0};   ///< kernel only
  std::int32_t block[3] = {0, 0, 0};  ///< kernel only
};

/// One host-side runtime (or driver) API call, from a CUPTI callback (enter/exit timestamps)
/// or a CUPTI_ACTIVITY_KIND_RUNTIME record.
struct ApiCall {
  std::uint32_t correlation_id = 0;
  std::string function;        ///< e.g. "cudaLaunchKernel" (may be empty if only the cbid is known)
  std::uint32_t cbid = 0;      ///< CUPTI callback id of the function
  std::uint64_t start_ns = 0;  ///< host enter, ns
  std::uint64_t end_ns = 0;    ///< host exit, ns
  std::uint32_t thread_id = 0;
};

/// CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: the runtime call with `correlation_id` was made
/// while `external_id` was pushed (cuptiActivityPushExternalCorrelationId). The benchmarks
/// push the repetition number, so each repetition's GPU work can be found.
struct ExternalCorrelation {
  std::uint32_t correlation_id = 0;
  std::uint64_t external_id = 0;
};

/// Everything one tracing session produced, in arrival order (CUPTI delivers buffers per
/// context and stream, so records are not sorted by time).
struct ActivityBatch {
  std::vector<GpuActivity> gpu;
  std::vector<ApiCall> api;
  std::vector<ExternalCorrelation> external;
  std::uint64_t dropped_records = 0;  ///< records CUPTI reported as dropped (cuptiActivityGetNumDroppedRecords)
  std::uint64_t invalid_records = 0;  ///< records discarded while processing (end < start, zero timestamps)

  void append(ActivityBatch&& other);
};

/// A GPU operation joined with the runtime call that launched it.
struct CorrelatedOp {
  GpuActivity gpu;
  std::optional<ApiCall> api;  ///< empty when the runtime record is missing (dropped, or not traced)
  std::optional<std::uint64_t> external_id;

  [[nodiscard]] std::uint64_t duration_ns() const { return gpu.end_ns - gpu.start_ns; }
  /// Host time of the launching call (enter to exit), ns; 0 without a runtime record.
  [[nodiscard]] std::uint64_t launch_ns() const { return api ? api->end_ns - api->start_ns : 0; }
  /// GPU start minus host enter of the launching call, ns (queueing + launch latency);
  /// negative values (clock skew) are clamped to 0.
  [[nodiscard]] std::uint64_t launch_to_start_ns() const;
};

/// Result of correlate(): ops sorted by GPU start time (ties by correlation id), plus what could
/// not be joined.
struct CorrelationResult {
  std::vector<CorrelatedOp> ops;
  std::size_t unmatched_gpu = 0;      ///< GPU records whose runtime call was not found
  std::size_t api_without_gpu = 0;    ///< launch-type runtime calls with no GPU record (dropped?)
  std::size_t invalid_records = 0;    ///< GPU records skipped: end < start or start == 0
  std::uint64_t dropped_records = 0;  ///< copied from the batch
};

/// Drops CUPTI's API version suffix: "cudaLaunchKernel_v7000" -> "cudaLaunchKernel" (only a
/// trailing "_v" followed by digits).
[[nodiscard]] std::string strip_api_version(std::string function);

/// Whether a runtime/driver function launches GPU work (kernel launches, memcpy and memset
/// variants, cuBLAS-style cuLaunchKernel...). Matched on the function name prefix.
[[nodiscard]] bool is_launch_function(const std::string& function);

/// Joins every valid GPU record with the runtime call of the same correlation id (and the
/// external id pushed around it). Records may arrive in any order; a correlation id of 0 or one
/// with no runtime record leaves `api` empty. Duplicate runtime records for one id (callback
/// and activity both enabled) keep the first.
[[nodiscard]] CorrelationResult correlate(const ActivityBatch& batch);

/// Host-side launch cost of the launch-type runtime calls, ns, per function name.
struct LaunchCostStats {
  std::string function;
  std::size_t calls = 0;
  double median_ns = 0, mean_ns = 0, p90_ns = 0, max_ns = 0;
};

/// Statistics of `end - start` of every launch-type call in `api` (is_launch_function), grouped
/// by function name, sorted by function name. Calls with end < start are ignored.
[[nodiscard]] std::vector<LaunchCostStats> launch_cost_stats(const std::vector<ApiCall>& api);

/// Durations of the GPU ops of one name, ns.
struct NamedDurations {
  std::string name;
  GpuOpKind kind = GpuOpKind::kKernel;
  std::vector<std::uint64_t> durations_ns;  ///< in GPU start order
  std::vector<std::uint64_t> launch_ns;     ///< host launch cost of the calls that have a runtime record
};

/// Groups the ops by name (kernels, memcpys and memsets separately), sorted by total GPU time,
/// longest first.
[[nodiscard]] std::vector<NamedDurations> durations_by_name(const CorrelationResult& r);

/// GPU time of one benchmark repetition: the ops that carry external id `id`.
struct RepetitionTime {
  std::uint64_t external_id = 0;
  std::uint64_t span_ns = 0;    ///< last end - first start of the repetition's ops (includes gaps)
  std::uint64_t busy_ns = 0;    ///< sum of the ops' durations
  std::size_t op_count = 0;
  std::string longest_kernel;   ///< name of the longest kernel of the repetition ("" if none)
};

/// One entry per external id in [first_id, first_id + count) that has at least one op of a kind
/// in `kinds`; ops of other kinds (e.g. the L2-flush memset) are ignored. Ids with no op are
/// missing from the result (the caller compares the size with `count`).
[[nodiscard]] std::vector<RepetitionTime> repetition_times(const CorrelationResult& r, std::uint64_t first_id,
                                                           std::uint64_t count,
                                                           const std::vector<GpuOpKind>& kinds = {GpuOpKind::kKernel});

[[nodiscard]] const char* op_kind_name(GpuOpKind k);
[[nodiscard]] const char* direction_name(MemcpyDirection d);

/// Thread-safe sink the CUPTI callbacks write into (buffer-completed callbacks run on a CUPTI
/// worker thread; API callbacks on the application's threads).
class ActivitySink {
 public:
  void add_gpu(GpuActivity a);
  void add_api(ApiCall c);
  void add_external(ExternalCorrelation e);
  void add_dropped(std::uint64_t n);
  /// Moves everything collected so far out, leaving the sink empty.
  [[nodiscard]] ActivityBatch take();
  [[nodiscard]] std::size_t gpu_count() const;

 private:
  mutable std::mutex mu_;
  ActivityBatch batch_;
};

}  // namespace perfcast::profiler

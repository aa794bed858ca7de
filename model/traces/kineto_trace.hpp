#pragma once
/// \file kineto_trace.hpp
/// A PyTorch profiler (Kineto) Chrome trace of one rank, read into plain structs: the
/// iterations (`ProfilerStep#N`), host CPU ops with their input shapes, CUDA runtime calls,
/// GPU activities (kernels, memcpys, memsets) linked to the runtime call that launched
/// them, NCCL collectives, device properties and distributed info.
///
/// Format facts (checked on the traces in data, see its README): events are
/// `"ph":"X"` with `ts`/`dur` in microseconds; kernels carry `args.stream`,
/// `args.correlation` and `args.device`; a kernel's correlation equals that of the
/// `cuda_runtime` call that launched it; the innermost `cpu_op` on the launching thread
/// that encloses the call holds `args["Input Dims"]` and `args["Input type"]`.
///
/// Times inside are seconds relative to `KinetoTrace::origin_us` (the earliest event),
/// which keeps microsecond resolution that absolute epoch microseconds in a double would
/// not have after the conversion to seconds.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "topology/collective.hpp"
#include "core/units.hpp"

namespace perfcast {

enum class GpuActivityKind { kKernel, kMemcpy, kMemset };

/// What a trace says about the collective an NCCL kernel runs.
struct TraceCollective {
  std::string name;          ///< "all_reduce", "all_to_all", ... (from the kernel args or the nccl:* annotation)
  /// From the kernel args, the annotation or the kernel name (SendRecv: all-to-all);
  /// kAllReduce when none of them says.
  CollectiveKind kind = CollectiveKind::kAllReduce;
  Bytes bytes = 0;           ///< message size (input elements x element size); 0 when unknown
  std::string dtype;         ///< element type as the trace writes it; empty when unknown
  int group_size = 0;        ///< ranks in the communicator; 0 when the trace does not say
  bool from_kernel_args = false;  ///< newer traces describe the collective on the kernel itself
};

/// A kernel, memcpy or memset on the GPU.
struct GpuActivity {
  GpuActivityKind kind = GpuActivityKind::kKernel;
  std::string name;
  int device = 0;
  std::int64_t stream = 0;
  std::int64_t correlation = -1;  ///< links to RuntimeCall::correlation; -1 when absent
  Seconds start = 0;              ///< relative to the trace origin
  Seconds duration = 0;
  Bytes bytes = 0;                ///< memcpy/memset size; 0 for kernels
  int launch = -1;                ///< index into KinetoTrace::runtime of the launching call; -1 if none
  std::optional<TraceCollective> collective;  ///< set for NCCL kernels
  [[nodiscard]] Seconds end() const { return start + duration; }
  [[nodiscard]] bool is_nccl() const { return collective.has_value(); }
};

/// A CPU op (`cpu_op`) or a `user_annotation` range (record_function, ProfilerStep#N).
struct CpuOp {
  std::string name;
  bool annotation = false;        ///< true: user_annotation; false: cpu_op
  std::int64_t tid = 0;
  Seconds start = 0;
  Seconds duration = 0;
  int parent = -1;                ///< enclosing CpuOp on the same thread; -1 at top level
  std::vector<std::vector<std::int64_t>> input_dims;  ///< args["Input Dims"]
  std::vector<std::string> input_types;               ///< args["Input type"]
  /// args["Record function id"] (newer traces): the execution trace node's rf_id; -1 if absent.
  std::int64_t record_function_id = -1;
  [[nodiscard]] Seconds end() const { return start + duration; }
};

/// A CUDA runtime (or driver) API call on a host thread.
struct RuntimeCall {
  std::string name;               ///< "cudaLaunchKernel", "cudaStreamSynchronize", ...
  std::int64_t tid = 0;
  Seconds start = 0;
  Seconds duration = 0;
  std::int64_t correlation = -1;
  std::vector<int> activities;    ///< GpuActivity indices it launched (several for graph launches)
  int op = -1;                    ///< innermost enclosing CpuOp (cpu_op or annotation); -1 if none
  [[nodiscard]] Seconds end() const { return start + duration; }
};

/// One `ProfilerStep#N` range.
struct TraceStep {
  std::int64_t number = 0;
  Seconds start = 0;
  Seconds duration = 0;           ///< the annotation's CPU span
  [[nodiscard]] Seconds end() const { return start + duration; }
};

struct TraceDevice {
  int id = 0;
  std::string name;               ///< e.g. "Tesla V100-SXM2-32GB"
  Bytes memory = 0;
  int sms = 0;
  int compute_major = 0, compute_minor = 0;
};

struct KinetoTrace {
  std::string file;               ///< path, or "ARCHIVE:MEMBER"
  double origin_us = 0;           ///< absolute `ts` (microseconds) of time 0
  std::optional<int> rank;        ///< distributedInfo.rank
  std::optional<int> world_size;  ///< distributedInfo.world_size
  std::string backend;            ///< distributedInfo.backend, e.g. "nccl"
  std::int64_t pid = -1;          ///< process id of the first cpu_op (pairs an execution trace's "pid"); -1 if none
  std::vector<TraceDevice> devices;
  int device = -1;                ///< the GPU this rank used (most GPU activities); -1: none
  /// By start time. A trace without `ProfilerStep#N` gets one step numbered -1 that spans
  /// every event (`steps_synthesized`).
  std::vector<TraceStep> steps;
  bool steps_synthesized = false;
  std::vector<CpuOp> ops;         ///< per thread, parents before children
  std::vector<RuntimeCall> runtime;  ///< by start time (all threads merged)
  std::vector<GpuActivity> gpu;      ///< by start time, only `device`'s activities

  /// Step whose window holds host time `t`: [start of step k, start of step k+1), the
  /// last step up to its end. -1 outside every window.
  [[nodiscard]] int step_at(Seconds t) const;
  /// Step a GPU activity belongs to: that of its launch call, else that of its start.
  [[nodiscard]] int step_of_activity(int activity) const;
  /// Wall time of step k: start-to-start when step k+1 exists, else the step's own span.
  [[nodiscard]] Seconds step_wall(int k) const;
  /// True when step_wall(k) is a start-to-start period (not the last step's span).
  [[nodiscard]] bool step_wall_is_period(int k) const { return k + 1 < static_cast<int>(steps.size()); }

  /// Name of `device` from deviceProperties, or "unknown GPU".
  [[nodiscard]] std::string device_name() const;
  /// Outermost enclosing cpu_op (skipping annotations) of a runtime call; -1 if none.
  [[nodiscard]] int top_level_cpu_op(int call) const;
  /// Innermost enclosing cpu_op (skipping annotations) of a runtime call; -1 if none.
  [[nodiscard]] int innermost_cpu_op(int call) const;
};

/// Parses the text of one trace. `name` is used in error messages. Throws ConfigError
/// (file, JSON pointer, message) for invalid JSON or a document that is not a Kineto trace.
[[nodiscard]] KinetoTrace parse_kineto_trace(const std::string& text, const std::string& name);

/// Reads and parses traces (plain, gzip or tar archives, see trace_input.hpp), one per rank.
[[nodiscard]] std::vector<KinetoTrace> load_kineto_traces(const std::vector<std::string>& paths);

/// Bytes of one element of a Kineto "Input type" string ("float", "c10::Half", "long int",
/// ...); 0 when unknown.
[[nodiscard]] int trace_dtype_bytes(std::string_view type);

/// Collective kind of an NCCL kernel name ("ncclKernel_AllReduce_RING_LL_Sum_float(...)",
/// "ncclDevKernel_SendRecv(...)") or of a collective name ("all_reduce", "allreduce",
/// "all_to_all"); nullopt when neither.
[[nodiscard]] std::optional<CollectiveKind> trace_collective_kind(std::string_view name);

/// True for NCCL kernel names (`ncclKernel_*`, `ncclDevKernel_*`).
[[nodiscard]] bool is_nccl_kernel_name(std::string_view name);

}  // namespace perfcast

#pragma once
/// \file trace_workload.hpp
/// Workloads imported from profiler traces (`perfcast import`): schema
/// "perfcast.workload", model "trace". The file holds the traced iteration as
/// `predict` simulates it: per rank the ops in host order, each on a stream with its data
/// dependencies and measured host time, carrying either kernel descriptors (predicted
/// on the target system) or measured durations (kernels no predictor knows), or one
/// collective (predicted by the collective model from its size and communicator size;
/// measured when the trace gave no size).
///
/// ```json
/// {"schema": "perfcast.workload", "schema_version": "1.0", "model": "trace",
///  "name": "...", "batch": 2048,                       // samples in the window; 0: unknown
///  "source": {...},                                    // free-form: traces, GPU, steps, counts
///  "measured_iteration": ["14.455ms", ...],            // per rank, for comparison
///  "collectives": [{"kind": "all_reduce", "bytes": "1576964B", "group_size": 8,
///                   "measured": "59us"}],
///  "ranks": [{"rank": 0, "ops": [
///     {"name": "aten::addmm", "phase": "forward", "stream": "compute", "host_time": "12.000us",
///      "deps": [3], "host_waits": false,
///      "kernels": [{"family": "gemm", "m": 16, "n": 256, "k": 13, "batch": 1, "dtype": "fp32",
///                   "bias_epilogue": false}]},
///     {"name": "nccl:all_reduce", ..., "collective": 0}]}]}
/// ```
/// A kernel is any descriptor of predictors/measurement.hpp's kernel_to_json, or
/// {"family": "measured", "name": "...", "duration": "3.000us"}.
///
/// The graph has one group of all traced ranks; a collective's time is estimated for its
/// `group_size` (the communicator of the traced job, which may be larger than the traced
/// ranks: one rank of an 8-rank job) on the target system. Host times are the trace's
/// (they include launch calls, so `predict` adds no launch overhead for this model).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/graph/execution_graph.hpp"
#include "model/traces/kineto_trace.hpp"
#include "core/json_reader.hpp"

namespace perfcast {

struct ExecutionTrace;

struct TraceWorkload {
  std::string name;
  std::string file;
  std::int64_t batch = 0;                 ///< samples in the imported window (all ranks, all steps); 0: unknown
  ExecutionGraph graph;
  std::vector<std::vector<Seconds>> host_time;         ///< [rank][op], s
  std::vector<int> rank_ids;                           ///< per graph rank: the traced rank number
  std::vector<int> group_size;                         ///< per collective: communicator size
  std::vector<std::optional<Seconds>> collective_measured;  ///< per collective
  std::vector<Seconds> measured_iteration;             ///< per rank, s (0: unknown)
  std::string traced_gpu;                              ///< the traced device's name ("source"."gpu"); "" unknown
};

/// What `perfcast import` recognized, over all ranks.
struct ImportStats {
  int ops = 0;                  ///< graph ops that run on the GPU (kernels, copies, collectives)
  int recognized = 0;           ///< ops with a descriptor or a sized collective
  int unrecognized = 0;         ///< ops that keep their measured duration
  Seconds recognized_time = 0;  ///< measured GPU time of the recognized ops
  Seconds unrecognized_time = 0;
  /// Unrecognized kernels grouped by the reason, most time first: (reason, count, time).
  struct Reason {
    std::string reason;
    int count = 0;
    Seconds time = 0;
  };
  std::vector<Reason> reasons;
  std::vector<int> et_linked;   ///< per rank: ET nodes linked to Kineto ops (empty: no ET)
};

/// Builds the workload from one trace per rank (and optionally their execution traces,
/// one per trace in the same order, already linked). The steps common to all traces
/// are imported. Throws ConfigError as build_replay_graph does.
[[nodiscard]] TraceWorkload import_trace_workload(const std::vector<KinetoTrace>& traces,
                                                  const std::vector<const ExecutionTrace*>& ets, const std::string& name,
                                                  ImportStats& stats);

/// The workload as a JSON document (see file comment); `source` is written verbatim.
[[nodiscard]] std::string trace_workload_to_json(const TraceWorkload& w, const nlohmann::json& source);

/// Reads a "trace" workload. Throws ConfigError naming file, JSON pointer and expectation.
[[nodiscard]] TraceWorkload parse_trace_workload(const JsonDocument& doc);

}  // namespace perfcast

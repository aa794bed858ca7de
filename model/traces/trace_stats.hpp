#pragma once
/// \file trace_stats.hpp
/// Measured views of Kineto traces (`perfcast trace-stats`): per iteration the wall time,
/// GPU busy time, time in NCCL kernels and exposed communication; the kernels that take
/// the most time; and, for several ranks, the clock alignment between them.
///
/// Definitions (all per step, over the GPU activities the step launched, see
/// KinetoTrace::step_of_activity):
///  - wall: start-to-start of consecutive `ProfilerStep#N`; the last step's own span;
///  - gpu_busy: length of the union of all kernel, memcpy and memset intervals (the sum
///    of durations double-counts concurrent streams);
///  - compute_busy: union of the non-NCCL kernels;
///  - nccl_busy: union of the NCCL kernels (includes waiting for the slowest peer);
///  - exposed_communication: NCCL time during which no compute kernel runs.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/intervals.hpp"
#include "model/traces/kineto_trace.hpp"

namespace perfcast {

struct StepStats {
  std::int64_t step = 0;           ///< N of ProfilerStep#N (-1: the whole trace)
  Seconds start = 0;               ///< relative to the trace origin
  Seconds wall = 0;                ///< see file comment
  bool wall_is_period = false;     ///< start-to-start (true) or the step's own span
  Seconds gpu_busy = 0;
  Seconds compute_busy = 0;
  Seconds nccl_busy = 0;
  Seconds exposed_communication = 0;
  Seconds memcpy_busy = 0;         ///< union of memcpy and memset intervals
  Seconds kernel_sum = 0;          ///< sum of kernel durations (not a busy time)
  int kernels = 0;                 ///< kernels, NCCL ones included
  int nccl_kernels = 0;
  int memcpys = 0;                 ///< memcpys and memsets
};

/// Kernels (and memcpys) grouped by name over all steps.
struct KernelSummary {
  std::string name;
  int count = 0;
  Seconds total = 0;
  bool nccl = false;
};

/// NCCL collectives grouped by name ("all_reduce", "all_to_all", ...) over all steps.
struct CollectiveSummary {
  std::string name;
  int count = 0;
  Seconds total = 0;   ///< sum of NCCL kernel durations
  Bytes bytes = 0;     ///< sum of message sizes where the trace states them
};

struct TraceStats {
  std::string file;
  std::optional<int> rank, world_size;
  std::string gpu;                 ///< device name
  int device = -1;
  std::vector<StepStats> steps;
  std::vector<KernelSummary> kernels;          ///< longest total first (all of them)
  std::vector<CollectiveSummary> collectives;  ///< longest total first
  Seconds clock_offset = 0;        ///< this rank's clock minus the first trace's (see RankAlignment)
  int aligned_collectives = 0;     ///< NCCL kernels matched with the first trace to align clocks
};

/// How to compare times of several ranks: a time t of trace r (relative to its origin)
/// is `t + shift[r]` on the common clock (trace 0's, relative to its origin).
///
/// Per-rank clocks may differ, so ranks are aligned on collective ends (an NCCL
/// collective ends at about the same instant on every rank): `clock_offset[r]` is the
/// median over matched NCCL kernels of (end on rank r) - (end on trace 0), both in
/// absolute trace time. Kernels are matched by (step number, position among the step's
/// NCCL kernels). With no matched kernel the offset is 0 (a shared clock is assumed).
struct RankAlignment {
  std::vector<Seconds> shift;
  std::vector<Seconds> clock_offset;
  std::vector<int> matched;        ///< matched NCCL kernels per trace
};

[[nodiscard]] RankAlignment align_ranks(const std::vector<KinetoTrace>& traces);

/// Statistics of every trace (one per rank); clock offsets when there are several.
[[nodiscard]] std::vector<TraceStats> compute_trace_stats(const std::vector<KinetoTrace>& traces);


}  // namespace perfcast

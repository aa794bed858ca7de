#pragma once
/// \file executor_common.hpp
/// Internal: pieces shared by the executor's run paths (executor_cuda.cpp: one GPU, and one
/// node with a thread per GPU; executor_mpi.cpp: one process per GPU under an MPI launcher).
/// CUDA builds only.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/graph/sharding_plan.hpp"
#include "model/graph/workload_spec.hpp"
#include "profiler/cupti_tracer.hpp"
#include "validation/device_dlrm.hpp"
#include "validation/executor.hpp"

namespace perfcast::validation::executor_detail {

/// Writes the CUPTI records of the timed iterations as measurement JSON lines and as a
/// Chrome trace, as the options ask.
void write_trace(profiler::CuptiTracer& tracer, const RunResult& result, const ExecutorOptions& options);

/// A started tracer when the options ask for a trace, else nullptr (throws TracerUnavailable).
[[nodiscard]] std::unique_ptr<profiler::CuptiTracer> start_tracer(const ExecutorOptions& options);

/// Fills the median, p10, p90 and timer note from per-iteration host and event times.
void summarize(RunResult& result, const std::vector<double>& host_s, const std::vector<double>& event_s);

/// cuBLASLt's version as "major.minor.patch".
[[nodiscard]] std::string cublas_version_string();

/// The executor options a workload asks for on CUDA ordinal `device`: tf32 or fp32 GEMMs, or
/// fp16/bf16 mixed precision (DlrmSpec::mlp_dtype), embeddings drawn with `seed`.
[[nodiscard]] DeviceDlrmOptions device_options(const DlrmSpec& workload, int device, std::uint64_t seed);

/// One process per GPU (executor_mpi.cpp). Without MPI in the build: throws
/// NoCudaDeviceError saying so.
[[nodiscard]] RunResult run_dlrm_mpi(const DlrmSpec& workload, const ShardingPlan& plan, const ExecutorOptions& options);

}  // namespace perfcast::validation::executor_detail

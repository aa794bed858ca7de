#pragma once
/// \file executor.hpp
/// The reference executor's interface: trains the DLRM a workload file describes
/// on real GPUs (CUDA, cuBLASLt, the embedding-bag kernels of profiler/, NCCL) and measures
/// its iteration time. Includes no CUDA header: `validate` and the CLI use it in every
/// build; in a build without CUDA, or on a machine without a GPU, run_dlrm throws
/// NoCudaDeviceError (profiler/cuda_error.hpp) with a message that says which.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "model/graph/sharding_plan.hpp"
#include "model/graph/workload_spec.hpp"
#include "profiler/device_info.hpp"
#include "topology/system_spec.hpp"

namespace perfcast::validation {

struct ExecutorOptions {
  int warmup = 5;           ///< iterations run and discarded before timing
  int iterations = 20;      ///< timed iterations (>= 1)
  std::uint64_t seed = 1;   ///< weights and index batches are drawn from this seed
  /// GPUs to use; 0 = the plan's world size (the system's GPU count). Must not exceed the
  /// visible devices (NoCudaDeviceError otherwise, naming both counts).
  int devices = 0;
  /// Distinct pre-generated batches cycled through (host memory, copied to the GPU every
  /// iteration as real training does).
  int batches = 4;
  /// When set: CUPTI kernel trace of the timed iterations written as measurement JSON lines
  /// (predictors/measurement.hpp) and as a Chrome trace (one process per GPU).
  std::optional<std::filesystem::path> measurements_out;
  std::optional<std::filesystem::path> chrome_trace_out;
  /// One process per GPU, launched by an MPI launcher (`mpirun -np N perfcast run --mpi ...`),
  /// several nodes possible: world = the MPI size, rank = the MPI rank, GPU = the rank within
  /// its node (MPI_COMM_TYPE_SHARED); NCCL bootstrapped from rank 0's unique id over MPI
  /// (nccl_comm.hpp). Every iteration starts at an MPI_Barrier; its time is the slowest rank's.
  /// Only rank 0 writes the trace. Needs a build with MPI (PERFCAST_HAVE_MPI).
  bool mpi = false;
};

/// What one executor run measured. Times in seconds, wall clock of whole iterations
/// (host launch of the first kernel to the loss reaching the host), all ranks together.
struct RunResult {
  std::vector<double> iteration_s;  ///< every timed iteration, in order
  double median_s = 0, p10_s = 0, p90_s = 0;
  int world = 1;                    ///< GPUs used
  std::string timer;                ///< "cuda_events+host_clock" or what was used
  std::vector<profiler::DeviceInfo> devices;
  std::string nccl_version;         ///< "" for one GPU
  std::string cublas_version;
  double first_loss = 0, last_loss = 0;  ///< BCE loss of the first and last iteration
  int process_rank = 0;             ///< this process's MPI rank (options.mpi); 0 reports
};

/// Whether this build and machine can run the executor; when not, `why` says which part
/// is missing ("this build has no CUDA", "no CUDA device visible").
[[nodiscard]] bool executor_available(std::string* why = nullptr);

/// Trains `workload` under `plan` on `system`'s first `options.devices` GPUs. Throws
/// NoCudaDeviceError (no CUDA build / no device / too few devices), ConfigError for
/// workloads it cannot run (e.g. a sharding type it does not implement), CudaError on
/// CUDA, cuBLASLt or NCCL failures (out of memory names the bytes asked for).
[[nodiscard]] RunResult run_dlrm(const SystemSpec& system, const DlrmSpec& workload, const ShardingPlan& plan,
                                 const ExecutorOptions& options);

}  // namespace perfcast::validation

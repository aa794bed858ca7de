// The executor with one process per GPU under an MPI launcher (ExecutorOptions::mpi; several
// nodes possible). Compiled only when the build found NCCL and an MPI (PERFCAST_HAVE_MPI);
// otherwise run_dlrm_mpi says what is missing. See docs/gpu-calibration.md.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "profiler/cuda_error.hpp"
#include "profiler/device_info.hpp"
#include "validation/executor_common.hpp"

#if PERFCAST_HAVE_MPI
#include <mpi.h>

#include "validation/batch_generator.hpp"
#include "validation/device_dlrm.hpp"
#include "validation/multi_gpu_layout.hpp"
#include "validation/nccl_comm.hpp"
#endif

namespace perfcast::validation::executor_detail {

#if PERFCAST_HAVE_MPI
namespace {

void mpi_check(int status, const char* call) {
  if (status != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(status, text, &len);
    throw std::runtime_error(fmt::format("{} failed: {}", call, std::string(text, static_cast<std::size_t>(len))));
  }
}

/// MPI_Init when nobody did (MPI_Finalize at exit: a static guard's destructor).
void ensure_mpi() {
  int initialized = 0;
  mpi_check(MPI_Initialized(&initialized), "MPI_Initialized");
  if (initialized) return;
  mpi_check(MPI_Init(nullptr, nullptr), "MPI_Init");
  struct Finalize {
    ~Finalize() {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    }
  };
  static const Finalize finalize;
}

/// A rank that fails after the ranks could diverge (see run_dlrm_mpi): says so on stderr,
/// aborts its NCCL communicator (its own pending NCCL kernels exit; NcclComm::abort) and ends
/// the whole job with MPI_Abort(MPI_COMM_WORLD, 1): the other processes may be waiting for this
/// one inside an NCCL kernel or an MPI call, neither of which has a timeout, and only
/// MPI_Abort reaches them. Never returns (std::abort() should MPI_Abort ever return).
[[noreturn]] void abort_job(int rank, int world, const char* what, NcclComm* comm) noexcept {
  std::fprintf(stderr,
               "error: perfcast run --mpi: rank %d of %d failed: %s\n"
               "error: perfcast run --mpi: calling MPI_Abort(MPI_COMM_WORLD, 1): the other ranks may wait "
               "for this one in NCCL or MPI\n",
               rank, world, what);
  std::fflush(stderr);
  if (comm) comm->abort();
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

}  // namespace

/// Failures: errors found identically on every rank before anything is exchanged (ConfigError
/// of the layout or the workload) are thrown as usual (CLI exit 2). From there on the ranks can
/// diverge (a node with fewer GPUs, a CUDA, cuBLASLt or NCCL error, a tracer that cannot start
/// on rank 0, ...), and a rank that simply threw would leave the others waiting in
/// MPI_Bcast, ncclCommInitRank, an NCCL kernel or an MPI_Allreduce forever: such a rank prints
/// its error to stderr and ends the job with MPI_Abort (abort_job; exit status 1 for the
/// launcher), unless it is alone (world 1), where it throws as usual. The communicator and the
/// DeviceDlrm live outside the guarded block so that nothing frees device memory (which would
/// wait for the stuck NCCL kernels) before MPI_Abort.
RunResult run_dlrm_mpi(const DlrmSpec& workload, const ShardingPlan& plan, const ExecutorOptions& options) {
  ensure_mpi();
  int world = 1, rank = 0;
  mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &world), "MPI_Comm_size");
  mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  // Identical on every rank (same files, same world): thrown before any exchange.
  const MultiGpuLayout layout = multi_gpu_layout(workload, plan, world);  // ConfigError: plan vs world
  const DlrmConfig global_cfg = dlrm_config_from_spec(workload, workload.batch_size);
  const DlrmConfig local_cfg = dlrm_config_from_spec(workload, layout.local_batch);
  const auto traffic = table_traffic(workload);
  RunResult result;
  result.world = world;
  result.process_rank = rank;

  std::unique_ptr<NcclComm> comm;
  DeviceDlrmShard shard;
  std::unique_ptr<DeviceDlrm> dev;
  std::unique_ptr<profiler::CuptiTracer> tracer;
  std::vector<double> host_s, event_s;
  try {
    int local_rank = 0;
    MPI_Comm node = MPI_COMM_NULL;
    mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type");
    mpi_check(MPI_Comm_rank(node, &local_rank), "MPI_Comm_rank(node)");
    MPI_Comm_free(&node);
    const int visible = profiler::cuda_device_count();
    if (local_rank >= visible) {
      throw profiler::NoCudaDeviceError(
          fmt::format("MPI rank {} is process {} on its node, which has {} GPUs visible", rank, local_rank, visible));
    }
    result.devices.push_back(profiler::query_device_info(local_rank));
    result.cublas_version = cublas_version_string();
    result.nccl_version = nccl_version();

    // Every process draws the same global batches from the seed and keeps its share.
    std::vector<RankInput> inputs;
    for (int i = 0; i < options.batches; ++i) {
      const DlrmBatch global = generate_dlrm_batch(global_cfg, traffic, options.seed, static_cast<std::uint64_t>(i));
      RankInput in = split_batch(layout, workload, global, rank);
      grow_index_capacity(shard.max_indices, in);
      inputs.push_back(std::move(in));
    }
    const NcclUniqueId id = mpi_broadcast_unique_id();
    comm = std::make_unique<NcclComm>(world, rank, id, local_rank);
    shard.layout = &layout;
    shard.rank = rank;
    shard.comm = comm.get();
    const DeviceDlrmOptions dopt = device_options(workload, local_rank, options.seed);
    const DlrmModel model = init_dlrm_model(local_cfg, options.seed, /*draw_embeddings=*/false);
    dev = std::make_unique<DeviceDlrm>(model, dopt, shard);
    std::vector<int> ids;
    for (const auto& in : inputs) ids.push_back(dev->add_batch(in));
    inputs.clear();

    const int total = options.warmup + options.iterations;
    for (int it = 0; it < total; ++it) {
      if (it == options.warmup && rank == 0) tracer = start_tracer(options);
      mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
      const auto t0 = std::chrono::steady_clock::now();
      StepTiming t;
      const float loss = dev->step(ids[static_cast<std::size_t>(it) % ids.size()], &t);
      const double mine[2] = {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), t.event_s};
      comm->check_async_error();  // atomic loads in NCCL, after the timed step
      double slowest[2] = {0, 0};
      mpi_check(MPI_Allreduce(mine, slowest, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
      double loss_sum = 0;
      const double my_loss = loss;
      mpi_check(MPI_Allreduce(&my_loss, &loss_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
      const double mean_loss = loss_sum / world;  // equal local batches: the global mean loss
      if (it == 0) result.first_loss = mean_loss;
      result.last_loss = mean_loss;
      if (it >= options.warmup) {
        host_s.push_back(slowest[0]);
        event_s.push_back(slowest[1]);
      }
    }
  } catch (const std::exception& e) {
    if (world == 1) throw;  // nobody waits for this rank
    abort_job(rank, world, e.what(), comm.get());
  } catch (...) {
    if (world == 1) throw;
    abort_job(rank, world, "unknown exception", comm.get());
  }
  // Past the last exchange: a failure here (writing the trace) ends only this rank.
  summarize(result, host_s, event_s);
  if (tracer) write_trace(*tracer, result, options);
  return result;
}

#else

RunResult run_dlrm_mpi(const DlrmSpec& /*workload*/, const ShardingPlan& /*plan*/, const ExecutorOptions& /*options*/) {
  throw profiler::NoCudaDeviceError(
      "this build has no MPI (or no NCCL): --mpi needs CMake to find both (see docs/gpu-calibration.md)");
}

#endif

}  // namespace perfcast::validation::executor_detail

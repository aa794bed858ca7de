#pragma once
/// \file nccl_comm.hpp
/// A thin RAII wrapper of one NCCL communicator (one rank on one GPU) and the collectives
/// the multi-GPU executor needs: the all-to-allv of pooled embeddings as grouped
/// ncclSend/ncclRecv with per-peer element counts, reduce-scatter and all-gather (row-wise
/// partial sums), in-place all-reduce (DDP buckets, data-parallel tables). fp32 only.
/// Includes no NCCL or CUDA header (streams are cudaStream_t passed as void*); defined only
/// in CUDA builds that found NCCL (PERFCAST_HAVE_NCCL). Every NCCL failure throws
/// profiler::CudaError with NCCL's error string (ncclGetErrorString / ncclGetLastError).
///
/// Bootstrap: one node, one process, one thread per GPU: either NcclComm::init_all from one
/// thread (ncclCommInitAll), or NcclUniqueId::create() once and NcclComm(world, rank, id,
/// device) from each rank's thread at the same time (ncclCommInitRank blocks until every
/// rank joined). Several nodes: one process per GPU, the unique id of rank 0 broadcast over
/// MPI (mpi_broadcast_unique_id, only when PERFCAST_HAVE_MPI; see docs/gpu-calibration.md).
///
/// Failures: NCCL has no timeout, so a rank that stops calling collectives leaves its peers
/// waiting in their NCCL kernels (and their host threads in cudaStreamSynchronize) forever.
/// abort() (ncclCommAbort) ends that: see its comment, and RankFailure / run_in_lockstep
/// (rank_failure.hpp) for how the multi-GPU executor uses it.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace perfcast::validation {

/// ncclUniqueId as bytes (NCCL_UNIQUE_ID_BYTES = 128), copyable between threads/processes.
struct NcclUniqueId {
  std::array<char, 128> bytes{};
  /// ncclGetUniqueId (call once, on rank 0).
  [[nodiscard]] static NcclUniqueId create();
};

/// NCCL's version as "major.minor.patch" (ncclGetVersion).
[[nodiscard]] std::string nccl_version();

class NcclComm {
 public:
  /// ncclCommInitRank on `device` (made current first): blocks until all `world` ranks joined.
  NcclComm(int world, int rank, const NcclUniqueId& id, int device);
  /// ncclCommInitAll over `devices` (rank i on devices[i]), from one thread.
  [[nodiscard]] static std::vector<std::unique_ptr<NcclComm>> init_all(const std::vector<int>& devices);
  /// ncclCommDestroy (after the caller synchronized its streams); nothing once abort() ran.
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  /// ncclCommAbort, once (an atomic flag: thread-safe and idempotent; later calls return at
  /// once, the destructor no longer calls ncclCommDestroy). Meant to be called from another
  /// thread than the one using the communicator, while that one may be blocked on its stream.
  /// What it guarantees: nccl.h documents ncclCommAbort as "frees resources associated with
  /// communicator object and aborts any operations that might still be running on the
  /// device"; NCCL's src/init.cc does it by setting the communicator's abort flags, which its
  /// device kernels and its proxy/bootstrap threads poll, before freeing. So pending NCCL
  /// kernels of THIS rank exit without completing (their output buffers hold garbage), its
  /// streams drain and a host thread in cudaStreamSynchronize returns; a host thread blocked
  /// inside NCCL's connection setup returns an error. Kernels of other ranks poll their own
  /// communicator's flag: every rank's communicator must be aborted (within a node NCCL >= 2.19
  /// expects that anyway, NVIDIA/nccl#863). Aborting from another thread while the owner may be
  /// inside NCCL is how PyTorch's NCCL watchdog uses it; concurrent aborts work reliably from
  /// NCCL 2.19.1 (NVIDIA/nccl#992). Within one process NCCL frees the communicators created
  /// together (ncclCommInitAll) only when the last of them is destroyed or aborted (commReclaim
  /// in src/init.cc), which lets the executor abort the other ranks' communicators while their
  /// threads still hold them (executor_cuda.cpp). After abort() every collective of this object
  /// throws std::runtime_error instead of calling NCCL; one that passed that check just before
  /// the abort reaches NCCL on the aborted, not yet freed communicator and fails or exits at
  /// once. The current CUDA device is switched to device() for the call and restored.
  /// noexcept: a failing ncclCommAbort is ignored (the caller is already reporting the error
  /// that made it abort).
  void abort() noexcept;
  /// True once abort() was called (from any thread).
  [[nodiscard]] bool aborted() const noexcept { return aborted_.load(std::memory_order_acquire); }
  /// ncclCommGetAsyncError: throws profiler::CudaError when NCCL recorded an asynchronous
  /// error on this communicator (a failed network or proxy operation; the collective that hit
  /// it may have left garbage or be stuck). No device synchronization: atomic loads in NCCL.
  void check_async_error() const;

  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] int world() const { return world_; }
  [[nodiscard]] int device() const { return device_; }

  /// All-to-allv in one ncclGroupStart/End: to every peer p (self included), send
  /// send_counts[p] floats from send + send_displs[p]; from every peer receive recv_counts[p]
  /// floats into recv + recv_displs[p]. Zero counts post nothing. Counts and displacements
  /// in elements, vectors of size world() (std::invalid_argument otherwise).
  void all_to_all_v(const float* send, const std::vector<std::int64_t>& send_counts,
                    const std::vector<std::int64_t>& send_displs, float* recv,
                    const std::vector<std::int64_t>& recv_counts, const std::vector<std::int64_t>& recv_displs,
                    void* stream) const;
  /// Sum-reduce-scatter: send holds world() x recv_count floats; rank r receives the sum of
  /// everyone's block r.
  void reduce_scatter(const float* send, float* recv, std::int64_t recv_count, void* stream) const;
  /// All-gather: recv holds world() x send_count floats, block r from rank r.
  void all_gather(const float* send, float* recv, std::int64_t send_count, void* stream) const;
  /// In-place sum all-reduce of `count` floats.
  void all_reduce(float* buffer, std::int64_t count, void* stream) const;
  /// In-place mean all-reduce (ncclAvg): DDP's averaged gradient buckets.
  void all_reduce_mean(float* buffer, std::int64_t count, void* stream) const;

 private:
  NcclComm() = default;
  /// Throws std::runtime_error when aborted (collectives on an aborted communicator).
  void require_live(const char* what) const;
  void* comm_ = nullptr;  // ncclComm_t; never changed after construction (read by abort())
  int world_ = 1, rank_ = 0, device_ = 0;
  std::atomic<bool> aborted_{false};
};

#if PERFCAST_HAVE_MPI
/// Multi-node bootstrap (MPI must be initialized): rank 0 of MPI_COMM_WORLD creates the id
/// and MPI_Bcast sends it to every process; each process then builds
/// NcclComm(mpi_size, mpi_rank, id, local_device).
[[nodiscard]] NcclUniqueId mpi_broadcast_unique_id();
#endif

}  // namespace perfcast::validation

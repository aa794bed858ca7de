#include "validation/nccl_comm.hpp"

#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include "profiler/cuda_check.hpp"

static_assert(sizeof(ncclUniqueId) == sizeof(perfcast::validation::NcclUniqueId::bytes),
              "NcclUniqueId must hold NCCL_UNIQUE_ID_BYTES");

namespace perfcast::validation {
namespace {

void nccl_check(ncclResult_t r, const char* call, ncclComm_t comm, const char* file, int line) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  std::string msg = ncclGetErrorString(r);
  if (const char* last = ncclGetLastError(comm); last && *last) msg += std::string(": ") + last;
  throw profiler::CudaError(static_cast<int>(r), std::string("NCCL ") + call, msg, file, line);
}
#define PERFCAST_NCCL_CHECK(call, comm) nccl_check((call), #call, (comm), __FILE__, __LINE__)

ncclComm_t as_comm(void* p) { return static_cast<ncclComm_t>(p); }
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
std::size_t count(std::int64_t n) {
  if (n < 0) throw std::invalid_argument("NcclComm: negative element count");
  return static_cast<std::size_t>(n);
}

}  // namespace

NcclUniqueId NcclUniqueId::create() {
  ncclUniqueId id;
  PERFCAST_NCCL_CHECK(ncclGetUniqueId(&id), nullptr);
  NcclUniqueId out;
  std::memcpy(out.bytes.data(), &id, sizeof(id));
  return out;
}

std::string nccl_version() {
  int v = 0;
  PERFCAST_NCCL_CHECK(ncclGetVersion(&v), nullptr);
  // NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z since 2.9 (nccl.h).
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

NcclComm::NcclComm(int world, int rank, const NcclUniqueId& id, int device)
    : world_(world), rank_(rank), device_(device) {
  if (world < 1 || rank < 0 || rank >= world) {
    throw std::invalid_argument(fmt::format("NcclComm: rank {} of world {}", rank, world));
  }
  PERFCAST_CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId nid;
  std::memcpy(&nid, id.bytes.data(), sizeof(nid));
  ncclComm_t c = nullptr;
  PERFCAST_NCCL_CHECK(ncclCommInitRank(&c, world, nid, rank), nullptr);
  comm_ = c;
}

std::vector<std::unique_ptr<NcclComm>> NcclComm::init_all(const std::vector<int>& devices) {
  if (devices.empty()) throw std::invalid_argument("NcclComm::init_all: no devices");
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  PERFCAST_NCCL_CHECK(ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()), nullptr);
  std::vector<std::unique_ptr<NcclComm>> out;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    auto c = std::unique_ptr<NcclComm>(new NcclComm());
    c->comm_ = comms[i];
    c->world_ = static_cast<int>(devices.size());
    c->rank_ = static_cast<int>(i);
    c->device_ = devices[i];
    out.push_back(std::move(c));
  }
  return out;
}

NcclComm::~NcclComm() {
  if (comm_ && !aborted()) {
    cudaSetDevice(device_);
    ncclCommDestroy(as_comm(comm_));
  }
}

void NcclComm::abort() noexcept {
  // exchange: one caller aborts, however many threads ask at once.
  if (aborted_.exchange(true, std::memory_order_acq_rel) || !comm_) return;
  int previous = -1;
  const bool restore = cudaGetDevice(&previous) == cudaSuccess;
  // NCCL sets the device itself where it needs one; being on device_ keeps whatever the call
  // allocates or synchronizes on the communicator's GPU. Errors are ignored (see the header):
  // after a sticky CUDA error on this device cudaSetDevice may fail and the abort still runs.
  (void)cudaSetDevice(device_);
  (void)ncclCommAbort(as_comm(comm_));
  if (restore) (void)cudaSetDevice(previous);
}

void NcclComm::check_async_error() const {
  require_live("check_async_error");
  ncclResult_t async = ncclSuccess;
  PERFCAST_NCCL_CHECK(ncclCommGetAsyncError(as_comm(comm_), &async), as_comm(comm_));
  // ncclInProgress: a non-blocking operation still running, not an error (nccl.h).
  if (async != ncclSuccess && async != ncclInProgress) {
    nccl_check(async, "ncclCommGetAsyncError (asynchronous error)", as_comm(comm_), __FILE__, __LINE__);
  }
}

void NcclComm::require_live(const char* what) const {
  if (aborted()) {
    throw std::runtime_error(
        fmt::format("NcclComm::{}: the communicator of rank {} was aborted (another rank failed)", what, rank_));
  }
}

void NcclComm::all_to_all_v(const float* send, const std::vector<std::int64_t>& send_counts,
                            const std::vector<std::int64_t>& send_displs, float* recv,
                            const std::vector<std::int64_t>& recv_counts, const std::vector<std::int64_t>& recv_displs,
                            void* stream) const {
  require_live("all_to_all_v");
  const auto n = static_cast<std::size_t>(world_);
  if (send_counts.size() != n || send_displs.size() != n || recv_counts.size() != n || recv_displs.size() != n) {
    throw std::invalid_argument(fmt::format("NcclComm::all_to_all_v: counts and displacements need {} entries", n));
  }
  for (std::size_t p = 0; p < n; ++p) {  // negative counts throw here, before the group opens
    for (const std::int64_t v : {send_counts[p], send_displs[p], recv_counts[p], recv_displs[p]}) count(v);
  }
  ncclComm_t c = as_comm(comm_);
  PERFCAST_NCCL_CHECK(ncclGroupStart(), c);
  try {
    for (std::size_t p = 0; p < n; ++p) {
      if (send_counts[p] > 0) {
        PERFCAST_NCCL_CHECK(ncclSend(send + count(send_displs[p]), count(send_counts[p]), ncclFloat32,
                                     static_cast<int>(p), c, as_stream(stream)),
                            c);
      }
      if (recv_counts[p] > 0) {
        PERFCAST_NCCL_CHECK(ncclRecv(recv + count(recv_displs[p]), count(recv_counts[p]), ncclFloat32,
                                     static_cast<int>(p), c, as_stream(stream)),
                            c);
      }
    }
  } catch (...) {
    // Close the group (NCCL's group depth is per thread): a thread left inside a group would
    // defer its later NCCL calls, ncclCommAbort of the other ranks included, forever.
    (void)ncclGroupEnd();
    throw;
  }
  PERFCAST_NCCL_CHECK(ncclGroupEnd(), c);
}

void NcclComm::reduce_scatter(const float* send, float* recv, std::int64_t recv_count, void* stream) const {
  require_live("reduce_scatter");
  if (recv_count == 0) return;
  PERFCAST_NCCL_CHECK(
      ncclReduceScatter(send, recv, count(recv_count), ncclFloat32, ncclSum, as_comm(comm_), as_stream(stream)),
      as_comm(comm_));
}

void NcclComm::all_gather(const float* send, float* recv, std::int64_t send_count, void* stream) const {
  require_live("all_gather");
  if (send_count == 0) return;
  PERFCAST_NCCL_CHECK(ncclAllGather(send, recv, count(send_count), ncclFloat32, as_comm(comm_), as_stream(stream)),
                      as_comm(comm_));
}

void NcclComm::all_reduce(float* buffer, std::int64_t n, void* stream) const {
  require_live("all_reduce");
  if (n == 0) return;
  PERFCAST_NCCL_CHECK(ncclAllReduce(buffer, buffer, count(n), ncclFloat32, ncclSum, as_comm(comm_), as_stream(stream)),
                      as_comm(comm_));
}

void NcclComm::all_reduce_mean(float* buffer, std::int64_t n, void* stream) const {
  require_live("all_reduce_mean");
  if (n == 0) return;
  PERFCAST_NCCL_CHECK(ncclAllReduce(buffer, buffer, count(n), ncclFloat32, ncclAvg, as_comm(comm_), as_stream(stream)),
                      as_comm(comm_));
}

}  // namespace perfcast::validation

// Multi-node NCCL bootstrap over MPI (compiled only when CMake's find_package(MPI) found an
// MPI implementation: PERFCAST_HAVE_MPI). See nccl_comm.hpp and docs/gpu-calibration.md.
#include <mpi.h>

#include <stdexcept>
#include <string>

#include "validation/nccl_comm.hpp"

namespace perfcast::validation {

NcclUniqueId mpi_broadcast_unique_id() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) throw std::logic_error("mpi_broadcast_unique_id: MPI_Init has not been called");
  int rank = 0;
  if (MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS) throw std::runtime_error("MPI_Comm_rank failed");
  NcclUniqueId id;
  if (rank == 0) id = NcclUniqueId::create();
  if (MPI_Bcast(id.bytes.data(), static_cast<int>(id.bytes.size()), MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
    throw std::runtime_error("MPI_Bcast of the NCCL unique id failed");
  }
  return id;
}

}  // namespace perfcast::validation

#pragma once
// NCCL start-up under MPI, as nccl-tests does it: rank 0 makes the unique id, MPI_Bcast shares it.
// Header-only: include it where both MPI and dtensor::nccl are linked.
#include <mpi.h>

#include <memory>

#include "dtensor/error.hpp"
#include "dtensor/nccl.hpp"

namespace dtensor {

// Collective over `comm` (MPI_COMM_WORLD: global rank = MPI rank). The CUDA device defaults to
// local_device() (the process's local rank modulo the visible GPUs).
inline std::unique_ptr<NcclCommunicator> nccl_communicator_from_mpi(Mesh mesh, NcclOptions options = {},
                                                                    MPI_Comm comm = MPI_COMM_WORLD) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (size != mesh.num_ranks())
    throw InputError(fmt::format("the MPI world has {} processes but mesh {} has {} ranks", size, mesh.str(),
                                 mesh.num_ranks()));
  NcclUniqueId id;
  if (rank == 0) id = nccl_unique_id();
  if (MPI_Bcast(id.bytes.data(), static_cast<int>(id.bytes.size()), MPI_BYTE, 0, comm) != MPI_SUCCESS)
    throw BackendError("broadcasting the NCCL unique id with MPI_Bcast failed");
  if (options.device < 0) options.device = local_device();
  return std::make_unique<NcclCommunicator>(std::move(mesh), rank, id, std::move(options));
}

}  // namespace dtensor

#pragma once
// dtensor::mpi: real multi-process execution on CPU buffers with MPI collectives (one process per
// rank). Built when CMake finds MPI. Global rank = the process's rank in the given communicator.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <vector>

#include "dtensor/comm.hpp"

namespace dtensor {

struct MpiOptions {
  // A collective that does not complete within this time is reported on stderr (naming it) and
  // the job is ended with MPI_Abort(comm, 4): an MPI request cannot be withdrawn safely.
  std::chrono::milliseconds timeout{60000};
};

// One rank of a mesh as one MPI process. Collectives: MPI_Iallgather, MPI_Ireduce_scatter_block,
// MPI_Iallreduce, MPI_Ialltoall on one sub-communicator per mesh-dim group (MPI_Comm_split, made
// by prepare()), MPI_Isend/MPI_Irecv for direct exchanges; each completes before the call returns.
// bf16, f16 and fp8 reductions use user-defined MPI ops with dtensor's arithmetic.
class MpiCommunicator final : public Communicator {
 public:
  // Collective over `comm`, whose size must be the mesh's. MPI must be initialised; the
  // communicator is duplicated (never freed by the caller's MPI_Comm_free), and every
  // sub-communicator is freed with this object.
  explicit MpiCommunicator(Mesh mesh, MPI_Comm comm = MPI_COMM_WORLD, MpiOptions options = {});
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  [[nodiscard]] const Mesh& mesh() const override { return mesh_; }
  [[nodiscard]] std::int64_t rank() const override { return rank_; }
  [[nodiscard]] bool supports(Collective c, DType dtype, ReduceOp op) const override;
  [[nodiscard]] std::vector<std::uint64_t> exchange(std::uint64_t value) override;
  void prepare(std::span<const Group> groups) override;
  void all_gather(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype) override;
  void reduce_scatter(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype,
                      ReduceOp op) override;
  void all_reduce(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype, ReduceOp op) override;
  void all_to_all(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype) override;
  void send_recv(std::span<const Transfer> sends, std::span<const Transfer> recvs, DType dtype) override;
  void synchronize() override {}  // every call completed before it returned
  // Host memory; under SimGrid's SMPI with DTENSOR_SMPI_FOLD set, folded buffers (timing only,
  // docs/virtual-cluster.md).
  [[nodiscard]] Memory& memory() override;

  // MPI's local rank of this process on its node (MPI_COMM_TYPE_SHARED), e.g. to pick a GPU.
  [[nodiscard]] int local_rank() const;

 private:
  MPI_Comm group_comm(const Group& g);
  void wait(MPI_Request* reqs, int n, const char* kind, const Group& g, std::int64_t count, DType dtype);
  Mesh mesh_;
  MPI_Comm world_ = MPI_COMM_NULL;
  std::int64_t rank_ = 0;
  MpiOptions options_;
  std::map<std::vector<int>, MPI_Comm> groups_;
  std::vector<MPI_Request> reqs_;  // reused by send_recv
  std::vector<std::size_t> order_;  // send_recv's posting order
};

}  // namespace dtensor

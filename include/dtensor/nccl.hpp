#pragma once
// dtensor::nccl: the executor's backend on GPU buffers through NCCL. Built only when CUDA and
// NCCL are found. No CUDA or NCCL type appears here: streams are `void*` (a cudaStream_t),
// communicators `void*` (an ncclComm_t), the unique id is its raw bytes.
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dtensor/comm.hpp"
#include "dtensor/memory.hpp"

namespace dtensor {

struct NcclUniqueId {
  std::array<char, 128> bytes{};
};
// ncclGetUniqueId: made by one rank and shared with the others (MPI: see nccl_mpi.hpp).
[[nodiscard]] NcclUniqueId nccl_unique_id();
// The NCCL library's version code (e.g. 22809 for 2.28.9).
[[nodiscard]] int nccl_version();
// The number of CUDA devices this process sees.
[[nodiscard]] int cuda_device_count();
// The CUDA device of this process: its local rank (LOCAL_RANK, then Open MPI's, MPICH's or
// Slurm's local rank variables) modulo the visible devices; 0 when none is set.
[[nodiscard]] int local_device();

struct NcclOptions {
  int device = -1;                           // CUDA device of this rank; -1: the current device
  void* stream = nullptr;                    // cudaStream_t every operation is issued on (nullptr: legacy default)
  std::chrono::milliseconds timeout{60000};  // communicator creation and wait(): then abort, BackendError
  // Optional: every rank's GPU UUID (by global rank), e.g. exchanged by the launcher. When
  // given, a mesh that puts two ranks on one GPU is rejected before NCCL is called.
  std::vector<std::string> device_uuids;
};

// One rank of a mesh on one GPU. Its world communicator is made from a unique id, or borrowed
// from the caller (a training stack's own ncclComm_t, never freed here); one communicator per
// mesh dim / flattened group a plan uses is split from it (ncclCommSplit) by prepare(), which
// the Executor calls (before any CUDA-graph capture). Every call is stream-ordered on the
// options' stream; synchronize() does not block the host, wait() does (with the watchdog).
class NcclCommunicator final : public Communicator {
 public:
  // Creates the world communicator (ncclCommInitRank) for global rank `rank`.
  NcclCommunicator(Mesh mesh, std::int64_t rank, const NcclUniqueId& id, NcclOptions options = {});
  // Borrows an existing world communicator (a `ncclComm_t`) whose size is the mesh's and whose
  // rank is this rank's global rank. It is never freed or aborted by dtensor; the groups split
  // from it are.
  NcclCommunicator(Mesh mesh, void* borrowed_nccl_comm, NcclOptions options = {});
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // One process driving every GPU of `devices` (one rank each, global rank = position): the
  // communicators are created together, one thread per GPU. For single-node use and tests.
  [[nodiscard]] static std::vector<std::unique_ptr<NcclCommunicator>> local_world(Mesh mesh, std::vector<int> devices,
                                                                                 std::chrono::milliseconds timeout =
                                                                                     std::chrono::milliseconds(60000));

  // Aborts every communicator (after a timeout or an asynchronous error); a borrowed one is left alone.
  void abort() noexcept;
  // Blocks the host until everything issued so far completed. Past the timeout, or on an
  // asynchronous NCCL error, aborts the communicators and throws BackendError naming the last
  // collective issued.
  void wait();
  [[nodiscard]] void* stream() const noexcept { return stream_; }

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
  void synchronize() override;
  void group_begin() override;  // ncclGroupStart: the collectives until group_end are one launch
  void group_end() override;
  // The rank's GPU memory: allocations on its device, uploads and downloads that wait for the
  // stream, copies, fills and strided packing as kernels on the stream. No local reductions (the
  // backend reduces through NCCL): supports() is false for them and reduce() throws InputError.
  [[nodiscard]] Memory& memory() override;

 private:
  struct State;
  void init_device();
  void* group_comm(const Group& g, const char* op);
  void note(const char* kind, const Group& g, std::int64_t count, DType dtype) noexcept;
  [[nodiscard]] std::string last_op() const;
  Mesh mesh_;
  std::int64_t rank_ = 0;
  std::vector<std::int64_t> coord_;
  void* stream_ = nullptr;
  NcclOptions options_;
  std::unique_ptr<State> state_;
  std::unique_ptr<Memory> memory_;
};

// Memory for the in-process backend on one GPU (SimulatedWorld's WorldOptions::memory): every rank
// of a mesh as device buffers, collectives as device copies and the reduction kernels, all on
// `stream`. It checks the CUDA kernels on multi-rank plans where NCCL (one rank per GPU) cannot.
// Use it with the all-ranks driver (execute_all_ranks), which issues everything from one thread.
// Allocations are on the current device; uploads and downloads wait for `stream`.
[[nodiscard]] std::shared_ptr<Memory> device_memory(void* stream = nullptr);

}  // namespace dtensor

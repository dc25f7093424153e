#pragma once
// dtensor::nccl: the executor's backend on GPU buffers through NCCL (SPEC §4). Built only when
// CUDA and NCCL are found. No CUDA or NCCL type appears here: streams are `void*`
// (a cudaStream_t), the unique id is its raw bytes.
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dtensor/comm.hpp"
#include "dtensor/simulated.hpp"

namespace dtensor {

struct NcclUniqueId {
  std::array<char, 128> bytes{};
};
// ncclGetUniqueId: made by one rank and shared with the others out of band.
[[nodiscard]] NcclUniqueId nccl_unique_id();
// The NCCL library's version code (e.g. 22809 for 2.28.9).
[[nodiscard]] int nccl_version();

struct NcclOptions {
  int device = -1;                       // CUDA device of this rank; -1: the current device
  void* stream = nullptr;                // cudaStream_t every operation is issued on (nullptr: legacy default)
  std::chrono::milliseconds timeout{60000};  // communicator creation; then abort
  // Optional: every rank's GPU UUID (by global rank), e.g. exchanged by the launcher. When
  // given, a mesh that puts two ranks on one GPU is rejected before NCCL is called.
  std::vector<std::string> device_uuids;
};

// One rank of a mesh on one GPU. Communicators: a world communicator made from the unique id,
// and one per mesh dim / flattened group a plan uses, split from it (ncclCommSplit) lazily or
// up front by prepare() — which must happen before a stream capture. Every call is
// stream-ordered on the options' stream; synchronize() does not block the host.
class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Mesh mesh, std::int64_t rank, const NcclUniqueId& id, NcclOptions options = {});
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Creates the communicator of every group `plan` uses (call before capturing a CUDA graph).
  void prepare(const Plan& plan);
  // Aborts every communicator (after a timeout or an asynchronous error).
  void abort() noexcept;
  [[nodiscard]] std::int64_t rank() const noexcept { return rank_; }
  [[nodiscard]] void* stream() const noexcept { return stream_; }

  [[nodiscard]] const Mesh& mesh() const override { return mesh_; }
  [[nodiscard]] bool supports(StepKind kind, DType dtype, ReduceOp op) const override;
  void all_gather(std::int64_t rank, const Group& g, const void* send, void* recv, std::int64_t count,
                  DType dtype) override;
  void reduce_scatter(std::int64_t rank, const Group& g, const void* send, void* recv, std::int64_t count,
                      DType dtype, ReduceOp op) override;
  void all_reduce(std::int64_t rank, const Group& g, const void* send, void* recv, std::int64_t count, DType dtype,
                  ReduceOp op) override;
  void all_to_all(std::int64_t rank, const Group& g, const void* send, void* recv, std::int64_t count,
                  DType dtype) override;
  void send_recv(std::int64_t rank, std::span<const Transfer> sends, std::span<const Transfer> recvs,
                 DType dtype) override;
  void synchronize() override;
  void copy(void* dst, const void* src, std::int64_t bytes) override;
  void fill(void* dst, DType dtype, std::int64_t count, double value) override;
  void copy_strided(void* dst, const void* src, std::int64_t run_bytes, std::span<const std::int64_t> count,
                    std::span<const std::int64_t> dst_stride, std::span<const std::int64_t> src_stride) override;

  struct State;

 private:
  void* group_comm(const Group& g, const char* op);
  void check_rank(std::int64_t rank, const char* op) const;
  Mesh mesh_;
  std::int64_t rank_;
  std::vector<std::int64_t> coord_;
  void* stream_;
  NcclOptions options_;
  std::unique_ptr<State> state_;
};

// The CUDA-buffer variant of the simulated backend: every rank of a mesh as device buffers on
// one GPU, collectives as device copies and reduction kernels. It checks the CUDA kernels on
// multi-rank plans where NCCL (one rank per GPU) cannot.
class DeviceSimulatedCommunicator final : public SimulatedCommunicator {
 public:
  explicit DeviceSimulatedCommunicator(Mesh mesh, void* stream = nullptr);
  [[nodiscard]] bool supports(StepKind kind, DType dtype, ReduceOp op) const override;
  void copy(void* dst, const void* src, std::int64_t bytes) override;
  void fill(void* dst, DType dtype, std::int64_t count, double value) override;
  void copy_strided(void* dst, const void* src, std::int64_t run_bytes, std::span<const std::int64_t> count,
                    std::span<const std::int64_t> dst_stride, std::span<const std::int64_t> src_stride) override;

 protected:
  void move(void* dst, const void* src, std::int64_t bytes) override;
  void reduce_group(DType dtype, ReduceOp op, void* out, std::span<const void* const> inputs,
                    std::int64_t count) override;

 private:
  void* stream_;
};

}  // namespace dtensor

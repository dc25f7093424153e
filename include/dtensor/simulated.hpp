#pragma once
#include <map>
#include <memory>
#include <vector>

#include "dtensor/comm.hpp"

namespace dtensor {

// All ranks of a mesh in one process on host memory, with the real semantics of every
// collective: the reference backend for tests, the CLI and machines without GPUs. The memory
// hooks (protected) let a device-memory variant reuse the pairing and the collective semantics.
class SimulatedCommunicator : public Communicator {
 public:
  explicit SimulatedCommunicator(Mesh mesh);
  ~SimulatedCommunicator() override;
  [[nodiscard]] const Mesh& mesh() const override { return mesh_; }
  [[nodiscard]] bool supports(StepKind, DType, ReduceOp) const override { return true; }

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

  // Collectives run so far (for tests).
  [[nodiscard]] std::int64_t collectives_run() const noexcept { return collectives_run_; }

 protected:
  // Memory the collectives use: move bytes, and out = op over inputs (avg: divided by their
  // number). The host version reduces 16- and 8-bit floats in double and rounds once.
  virtual void move(void* dst, const void* src, std::int64_t bytes);
  virtual void reduce_group(DType dtype, ReduceOp op, void* out, std::span<const void* const> inputs,
                            std::int64_t count);

 private:
  struct Pending;
  Pending& pending_for(std::int64_t rank, const Group& g, int kind, std::int64_t count, DType dtype, ReduceOp op,
                       std::int64_t& position);
  void run(Pending& p);
  Mesh mesh_;
  std::map<std::vector<std::int64_t>, std::unique_ptr<Pending>> pending_;
  struct P2P;
  std::vector<P2P> p2p_;
  std::int64_t collectives_run_ = 0;
};

}  // namespace dtensor

#pragma once
// The Communicator interface of SPEC §4: collectives over a group of ranks given by mesh dims.
// No CUDA types here: backends (simulated, NCCL) implement it.
#include <cstdint>
#include <span>
#include <vector>

#include "dtensor/dtype.hpp"
#include "dtensor/mesh.hpp"
#include "dtensor/placement.hpp"
#include "dtensor/plan.hpp"

namespace dtensor {

// The group of ranks that share the caller's coordinates on every mesh dim except `mesh_dims`.
// Members are ordered row-major over the coordinates of `mesh_dims`, in the listed order.
struct Group {
  std::vector<int> mesh_dims;
  friend bool operator==(const Group&, const Group&) = default;
};

// One point-to-point transfer of a grouped send/recv.
struct Transfer {
  std::int64_t peer = 0;  // global rank
  void* buffer = nullptr;  // send: read; recv: written
  std::int64_t count = 0;  // elements
};

// Collectives are issued per rank (`rank` is a global rank id) and complete, in issue order, by
// `synchronize()`; a backend that runs several ranks in one process (simulated) pairs the calls of
// a group's members. Counts are in elements of `dtype`. Local memory operations run on the
// backend's own memory (host or device).
class Communicator {
 public:
  virtual ~Communicator() = default;
  [[nodiscard]] virtual const Mesh& mesh() const = 0;
  // Whether this backend can run `kind` on `dtype` (with `op` for reductions).
  [[nodiscard]] virtual bool supports(StepKind kind, DType dtype, ReduceOp op) const = 0;

  virtual void all_gather(std::int64_t rank, const Group& g, const void* send, void* recv, std::int64_t count,
                          DType dtype) = 0;
  // `count` elements per member; `send` holds members * count.
  virtual void reduce_scatter(std::int64_t rank, const Group& g, const void* send, void* recv, std::int64_t count,
                              DType dtype, ReduceOp op) = 0;
  virtual void all_reduce(std::int64_t rank, const Group& g, const void* send, void* recv, std::int64_t count,
                          DType dtype, ReduceOp op) = 0;
  // `count` elements to / from each member.
  virtual void all_to_all(std::int64_t rank, const Group& g, const void* send, void* recv, std::int64_t count,
                          DType dtype) = 0;
  virtual void send_recv(std::int64_t rank, std::span<const Transfer> sends, std::span<const Transfer> recvs,
                         DType dtype) = 0;
  // Completes every operation issued so far.
  virtual void synchronize() = 0;

  // Local memory operations.
  virtual void copy(void* dst, const void* src, std::int64_t bytes) = 0;
  virtual void fill(void* dst, DType dtype, std::int64_t count, double value) = 0;
  // Strided copy: `count[k]` runs along dims, innermost `run_bytes` contiguous (see Executor).
  virtual void copy_strided(void* dst, const void* src, std::int64_t run_bytes, std::span<const std::int64_t> count,
                            std::span<const std::int64_t> dst_stride, std::span<const std::int64_t> src_stride) = 0;
};

}  // namespace dtensor

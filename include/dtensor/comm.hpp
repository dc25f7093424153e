#pragma once
// The Communicator: one rank's view of the collectives over groups of a mesh. A communicator
// serves exactly one rank (SPMD: one per process or per thread); every call is this rank's part
// of a collective that every member of the group issues in the same order. No CUDA or MPI types
// here: backends (threads, MPI, NCCL) implement it.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dtensor/collective.hpp"
#include "dtensor/dtype.hpp"
#include "dtensor/error.hpp"  // rank_list, for backends' messages
#include "dtensor/memory.hpp"
#include "dtensor/mesh.hpp"
#include "dtensor/placement.hpp"

namespace dtensor {

// The group of ranks that share the caller's coordinates on every mesh dim except `mesh_dims`.
// Members are ordered row-major over the coordinates of `mesh_dims`, in the listed order.
struct Group {
  std::vector<int> mesh_dims;
  friend bool operator==(const Group&, const Group&) = default;
};

// One point-to-point transfer of a grouped send/recv.
struct Transfer {
  std::int64_t peer = 0;   // global rank
  void* buffer = nullptr;  // send: read; recv: written
  std::int64_t count = 0;  // elements
};

// Collectives complete, in issue order, by `synchronize()` (a backend may complete them earlier:
// the threads and MPI backends block in the call, NCCL orders them on its stream). Counts are in
// elements of `dtype`. Local memory operations run on the backend's own memory (memory(): host or device).
// Failures of the backend (a peer that never arrives, a mismatched collective, a CUDA/NCCL/MPI
// error) throw BackendError.
class Communicator {
 public:
  virtual ~Communicator() = default;
  [[nodiscard]] virtual const Mesh& mesh() const = 0;
  // The global rank this communicator serves.
  [[nodiscard]] virtual std::int64_t rank() const = 0;
  // Whether this backend can run collective `c` on `dtype` (with `op` for reductions). Local
  // copies and fills every backend runs.
  [[nodiscard]] virtual bool supports(Collective c, DType dtype, ReduceOp op) const = 0;

  // Collective over every rank of the mesh: each rank's `value`, by global rank. Used when a plan
  // is prepared, to check that every rank runs the same plan. The default runs an all_gather on
  // host memory (backends whose collectives need device memory override it).
  [[nodiscard]] virtual std::vector<std::uint64_t> exchange(std::uint64_t value);
  // Creates whatever the backend needs for `groups` (the groups of a plan's collectives, in step
  // order; collective: every rank of the mesh calls it with the same groups). Called by the
  // Executor after the plans agree, before anything is issued (so before a CUDA-graph capture).
  virtual void prepare(std::span<const Group> groups) { (void)groups; }

  virtual void all_gather(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype) = 0;
  // `count` elements per member; `send` holds members * count.
  virtual void reduce_scatter(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype,
                              ReduceOp op) = 0;
  virtual void all_reduce(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype,
                          ReduceOp op) = 0;
  // `count` elements to / from each member.
  virtual void all_to_all(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype) = 0;
  // One grouped exchange: every send is matched by the peer's recv of the same count; several
  // transfers between one pair of ranks are matched in the order listed (as MPI's non-overtaking
  // rule and NCCL's grouped send/recv match them).
  virtual void send_recv(std::span<const Transfer> sends, std::span<const Transfer> recvs, DType dtype) = 0;
  // Completes every operation issued so far.
  virtual void synchronize() = 0;
  // Collectives issued between group_begin() and group_end() (same group of ranks, no local
  // memory operation in between) may start together as one launch where the backend can (NCCL:
  // ncclGroupStart/ncclGroupEnd); a backend that cannot runs them as issued (the default).
  // Their results are ready after group_end() and synchronize(). Batch plans' grouped stages
  // use it (docs/batch.md).
  virtual void group_begin() {}
  virtual void group_end() {}

  // Where this backend's buffers live; the executor's local operations run on it (host memory by
  // default; NCCL: the GPU's, ordered on the communicator's stream).
  [[nodiscard]] virtual Memory& memory() { return host_memory(); }
  // Local memory operations, on memory().
  void copy(void* dst, const void* src, std::int64_t bytes) { memory().copy(dst, src, bytes); }
  void fill(void* dst, DType dtype, std::int64_t count, double value) { memory().fill(dst, dtype, count, value); }
  void copy_strided(void* dst, const void* src, std::int64_t run_bytes, std::span<const std::int64_t> count,
                    std::span<const std::int64_t> dst_stride, std::span<const std::int64_t> src_stride) {
    memory().copy_strided(dst, src, run_bytes, count, dst_stride, src_stride);
  }
};

// A group for messages: "the world" (no mesh dim), "mesh dim 1 (tp, size 4)", "mesh dims 0 (size 2)
// + 1 (size 4)". Every backend names its groups this way.
[[nodiscard]] std::string describe(const Mesh& mesh, const Group& g);


// Checks that every rank's plan hash is the same (one `exchange`); throws BackendError naming the
// ranks on each differing plan otherwise.
void check_plans_agree(Communicator& comm, std::uint64_t plan_hash);

}  // namespace dtensor

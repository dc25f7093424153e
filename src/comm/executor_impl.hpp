#pragma once
// The prepared form of one rank's part of a plan (shared by the executor and the all-ranks driver).
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "dtensor/comm.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/index_set.hpp"

namespace dtensor::detail {

enum class Buf : std::uint8_t { input, output, ws };
struct Ref {
  Buf buf = Buf::ws;
  std::int64_t offset = 0;  // bytes
};

// A strided copy between two regions (offsets included in the refs).
struct BoxCopy {
  Ref dst, src;
  std::int64_t run_bytes = 0;
  std::vector<std::int64_t> count, dst_stride, src_stride;
};

struct Action {
  enum Kind : std::uint8_t { fill, copy, box } kind;
  Ref dst, src;
  std::int64_t bytes_or_count = 0;
  double value = 0;
  BoxCopy box_copy;
};

struct CommCall {
  std::optional<Collective> collective;  // none: a local step
  Ref send, recv;
  std::int64_t count = 0;
  ReduceOp op = ReduceOp::sum;
  struct P2P {
    std::int64_t peer;
    Ref buffer;
    std::int64_t count;
  };
  std::vector<P2P> sends, recvs;
};

struct RankStep {
  std::vector<Action> pre, post;
  CommCall comm;
};

// One grouped send/recv of prepared transfers (their buffers located in `b`) on `comm`, completed:
// the lists are filled into `send_list` / `recv_list` (kept by the caller so execute allocates nothing).
void run_send_recv(Communicator& comm, DType dtype, const Buffers& b, const std::vector<CommCall::P2P>& sends,
                   const std::vector<CommCall::P2P>& recvs, std::vector<Transfer>& send_list, std::vector<Transfer>& recv_list);
// Where `r` points in one rank's buffers (an input reference is only ever read).
[[nodiscard]] std::byte* buffer_ptr(const Buffers& b, Ref r) noexcept;
// Runs local actions (fills, copies, strided copies) on `comm`'s memory.
void run_actions(Communicator& comm, DType dtype, const Buffers& b, std::span<const Action> actions);

// Strided copies of the elements of `box` (per tensor dim, a subset of both) from a local tensor
// with index sets `src` at `src_ref` into one with index sets `dst` at `dst_ref`; throws
// InputError when the box reaches outside either.
void add_box_copies(std::vector<Action>& out, Ref dst_ref, const std::vector<IndexSet>& dst, Ref src_ref,
                    const std::vector<IndexSet>& src, const std::vector<IndexSet>& box, std::int64_t itemsize);
// Per tensor dim, a[d] ∩ b[d].
[[nodiscard]] std::vector<IndexSet> intersect(const std::vector<IndexSet>& a, const std::vector<IndexSet>& b);
// Where a `box` packed in row-major order is one plain run of a local tensor (index sets `local`,
// at `base`): then a send can read it (`reading`), or a receive write it, in place instead of
// through scratch.
[[nodiscard]] std::optional<Ref> run_in_place(Ref base, const std::vector<IndexSet>& local,
                                              const std::vector<IndexSet>& box, std::int64_t s, bool reading);


}  // namespace dtensor::detail

namespace dtensor {

struct Executor::Impl {
  Communicator* comm = nullptr;
  DType dtype = DType::f32;
  std::int64_t rank = 0;
  std::int64_t workspace = 0;
  std::int64_t input_bytes = 0, output_bytes = 0;
  std::uint64_t plan_hash = 0;
  bool check_every_call = false;  // ExecutorOptions::check_plans_every_call on a mesh of 2+ ranks
  std::vector<Group> groups;  // per step
  std::vector<detail::RankStep> steps;
  // Transfer lists of `direct` steps, sized when prepared so execute() never allocates. (One
  // executor serves one rank: execute is not called concurrently on it.)
  mutable std::vector<Transfer> send_list, recv_list;

  void check(const Buffers& b) const;
  [[nodiscard]] std::byte* ptr(const Buffers& b, detail::Ref r) const;
  void run(const Buffers& b, const std::vector<detail::Action>& actions) const;
  // Issues step k's collective on `comm` (no synchronize).
  void issue(const Buffers& b, std::size_t k) const;
  // Appends step k's grouped send/recv transfers, on buffers `b`, to the lists.
  void append_transfers(const Buffers& b, std::size_t k, std::vector<Transfer>& sends, std::vector<Transfer>& recvs) const;
};

// One collective (not send_recv) of `count` elements per member on `comm`, without synchronizing.
void issue_collective(Communicator& comm, Collective c, const Group& g, const void* send, void* recv, std::int64_t count,
                      DType dtype, ReduceOp op);

// One executor's steps by name, for the drivers that interleave several executors step by step:
// the batch executor (which also fuses its members' collectives into one) and the all-ranks driver
// (execute_all_ranks, simulated.hpp). A view: the executor must outlive it.
class ExecutorSteps {
 public:
  explicit ExecutorSteps(const Executor& e) noexcept : e_(*e.impl_) {}
  [[nodiscard]] std::size_t size() const noexcept { return e_.steps.size(); }
  [[nodiscard]] std::int64_t rank() const noexcept { return e_.rank; }
  [[nodiscard]] Communicator& communicator() const noexcept { return *e_.comm; }
  [[nodiscard]] DType dtype() const noexcept { return e_.dtype; }
  // Buffers of the sizes the plan needs (InputError otherwise).
  void check(const Buffers& b) const { e_.check(b); }
  // Step k's local work before its communication, the communication (not synchronized), and the
  // local work after it.
  void before(const Buffers& b, std::size_t k) const { e_.run(b, e_.steps[k].pre); }
  void issue(const Buffers& b, std::size_t k) const { e_.issue(b, k); }
  void after(const Buffers& b, std::size_t k) const { e_.run(b, e_.steps[k].post); }
  [[nodiscard]] bool communicates(std::size_t k) const noexcept { return e_.steps[k].comm.collective.has_value(); }
  // What fusing step k's communication with others' takes: its call (collective, count, op, the
  // regions it sends from and receives into), its group, where a region is in buffers `b`, and
  // its send/recv transfers appended to joined lists.
  [[nodiscard]] const detail::CommCall& call(std::size_t k) const noexcept { return e_.steps[k].comm; }
  [[nodiscard]] const Group& group(std::size_t k) const noexcept { return e_.groups[k]; }
  [[nodiscard]] std::byte* at(const Buffers& b, detail::Ref r) const { return e_.ptr(b, r); }
  void append_transfers(const Buffers& b, std::size_t k, std::vector<Transfer>& sends, std::vector<Transfer>& recvs) const {
    e_.append_transfers(b, k, sends, recvs);
  }

 private:
  const Executor::Impl& e_;
};

}  // namespace dtensor

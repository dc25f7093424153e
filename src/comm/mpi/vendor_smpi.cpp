// The MPI backend's vendor table for SimGrid's SMPI (a simulated cluster, docs/virtual-cluster.md):
// the real table (vendor_mpi.cpp, mpi_table()) with these entries adapted to what SMPI 3.32
// simulates well:
//  - the non-blocking collectives are the blocking ones (their request set to MPI_REQUEST_NULL):
//    SMPI runs MPI_I* collectives as linear exchanges (every rank to every rank, whatever
//    smpi/coll-selector says), which neither resembles a real MPI or NCCL nor finishes at 256
//    ranks; the blocking ones use the selected algorithms (rings, recursive doubling, ...).
//  - MPI_Testall waits (MPI_Wait on each request in order): the backend's polling loop (mpi.cpp)
//    would inject SMPI's smpi/test cost on every failed poll and switch contexts for nothing; a wait costs only the
//    simulated transfer. A peer that never comes cannot hang the simulation: when no rank can
//    progress, SimGrid detects it (simulated time stops), and this table prints which ranks wait
//    in which call and which ranks are not waiting (the missing peers), and exits with status 4.
// With DTENSOR_SMPI_FOLD set (a timing-only run), buffers from memory() are folded
// (folded_memory.hpp) and a reduction over one runs a no-op operator: the values are garbage,
// the simulated transfers are the same.
// MPI_Alltoall is every peer's message at once, waited one by one (linear_alltoall, below).
// And a collective of zero elements (every rank's count is the same, so all skip it together)
// returns at once: SMPI's "ompi" selector divides by the message size (SIGFPE) on some of them.
#include "vendor.hpp"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <simgrid/s4u/Engine.hpp>

#include "folded_memory.hpp"

namespace dtensor::mpi_vendor {
namespace {

// What each simulated rank is blocked in (index: world rank; empty: not in a call of this
// table), for the report when the simulation cannot advance. The ranks share one thread.
std::vector<std::string>& blocked() {
  static std::vector<std::string> b;
  return b;
}

void report_deadlock() {
  const auto& b = blocked();
  std::string waiting, absent;
  int n_waiting = 0, n_absent = 0;
  for (std::size_t r = 0; r < b.size(); ++r) {
    std::string& list = b[r].empty() ? absent : waiting;
    int& n = b[r].empty() ? n_absent : n_waiting;
    if (++n <= 16) list += (n > 1 ? ", " : "") + std::to_string(r) + (b[r].empty() ? "" : " in " + b[r]);
  }
  if (n_waiting > 16) waiting += ", and " + std::to_string(n_waiting - 16) + " more";
  if (n_absent > 16) absent += ", and " + std::to_string(n_absent - 16) + " more";
  std::fprintf(stderr,
               "error: the simulation cannot advance: %d rank(s) wait on peers that never come (rank %s); ranks not "
               "waiting in a collective or exchange: %s; exiting (status 4)\n",
               n_waiting, waiting.c_str(), n_absent ? absent.c_str() : "none");
  std::fflush(stderr);
  std::_Exit(4);
}

// Marks this rank blocked in `call` for as long as it lives.
class Blocked {
 public:
  Blocked(const char* call, long long bytes, MPI_Comm c) {
    static const bool watching = (simgrid::s4u::Engine::on_deadlock_cb(&report_deadlock), true);
    (void)watching;
    int size = 0, n = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (c != MPI_COMM_NULL) MPI_Comm_size(c, &n);
    auto& b = blocked();
    if (b.size() != static_cast<std::size_t>(size)) b.resize(static_cast<std::size_t>(size));
    std::string what = call;
    if (bytes >= 0) what += " (" + std::to_string(bytes) + " bytes" + (n ? " over " + std::to_string(n) + " ranks" : "") + ")";
    b[static_cast<std::size_t>(rank_)] = std::move(what);
  }
  ~Blocked() { blocked()[static_cast<std::size_t>(rank_)].clear(); }
  Blocked(const Blocked&) = delete;
  Blocked& operator=(const Blocked&) = delete;

 private:
  int rank_ = 0;
};

long long bytes_of(int count, MPI_Datatype t) {
  int size = 0;
  MPI_Type_size(t, &size);
  return static_cast<long long>(count) * size;
}

void noop(void*, void*, int*, MPI_Datatype*) {}

// A contiguous datatype's elements as bytes (the same message): SMPI moves a derived datatype's
// payload through a packing copy, even between folded buffers; MPI_BYTE it moves directly (and,
// folded, not at all). Kept as is where the byte count would not fit an int.
std::pair<int, MPI_Datatype> as_bytes(int count, MPI_Datatype t) {
  const long long bytes = bytes_of(count, t);
  if (bytes > INT_MAX) return {count, t};
  return {static_cast<int>(bytes), MPI_BYTE};
}

// The operator a reduction runs: the caller's, or a no-op one over folded buffers.
MPI_Op op_for(const void* send, const void* recv, MPI_Op op) {
  if (!smpi_folded(recv) && (send == MPI_IN_PLACE || !smpi_folded(send))) return op;
  static MPI_Op none = [] {
    MPI_Op o;
    MPI_Op_create(&noop, 1, &o);
    return o;
  }();
  return none;
}

// One MPI_Wait per request, in order: the same completion as MPI_Waitall (every request is
// already in flight, so waiting on one delays no other), where SMPI's MPI_Waitall re-registers on
// every pending request at each completion (quadratic in the requests a rank posts).
int wait_each(int n, MPI_Request* q, MPI_Status* st) {
  for (int i = 0; i < n; ++i)
    if (const int rc = MPI_Wait(&q[i], st == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &st[i]); rc != MPI_SUCCESS) return rc;
  return MPI_SUCCESS;
}

// A collective that moves a block per rank (MPI_Allgather), blocking, as bytes.
using Exchange = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);
int exchange(const char* name, Exchange call, const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt,
             MPI_Comm c, MPI_Request* q) {
  *q = MPI_REQUEST_NULL;
  if (sc == 0) return MPI_SUCCESS;
  const auto [sn, sb] = as_bytes(sc, st);
  const auto [rn, rb] = as_bytes(rc, rt);
  const Blocked mark(name, bytes_of(sc, st), c);
  return call(s, sn, sb, r, rn, rb, c);
}

// A reduction (MPI_Reduce_scatter_block, MPI_Allreduce), blocking; over folded buffers as bytes
// with the no-op operator.
using Reduction = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);
int reduction(const char* name, Reduction call, const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c,
              MPI_Request* q) {
  *q = MPI_REQUEST_NULL;
  if (n == 0) return MPI_SUCCESS;
  const MPI_Op o = op_for(s, r, op);
  const Blocked mark(name, bytes_of(n, t), c);
  if (o != op) {  // folded: bytes, no arithmetic
    const auto [bn, bt] = as_bytes(n, t);
    return call(s, r, bn, bt, o, c);
  }
  return call(s, r, n, t, op, c);
}

// MPI_Alltoall as every peer's message posted at once, then waited one by one. SMPI's own linear
// algorithm (what the "ompi" selector picks for most sizes) posts the same messages in the same
// order but waits with MPI_Waitall, which re-registers on every pending request at each
// completion: on a 1,024-rank group the wall time was quadratic in the peers. Posting every peer
// at once is also what NCCL's all-to-all (grouped sends and receives) does; at the sizes where
// "ompi" would choose the pairwise or Bruck algorithm instead, this one is used all the same (the
// reports' clock line says so). Point-to-point on the collective's communicator under a tag of
// its own (the backend's direct exchanges use another, on another communicator).
int linear_alltoall(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm c, MPI_Request* q) {
  constexpr int kTag = 0x7d8;
  *q = MPI_REQUEST_NULL;
  if (sc == 0) return MPI_SUCCESS;
  const auto [sn, sb] = as_bytes(sc, st);
  const auto [rn, rb] = as_bytes(rc, rt);
  const Blocked mark("MPI_Alltoall", bytes_of(sc, st), c);
  int n = 0, me = 0;
  MPI_Comm_size(c, &n);
  MPI_Comm_rank(c, &me);
  MPI_Aint lb = 0, sext = 0, rext = 0;
  MPI_Type_get_extent(sb, &lb, &sext);
  MPI_Type_get_extent(rb, &lb, &rext);
  const auto* send = static_cast<const char*>(s);
  auto* recv = static_cast<char*>(r);
  const auto block = [&](auto* base, int i, int count, MPI_Aint extent) { return base + static_cast<MPI_Aint>(i) * count * extent; };
  std::vector<MPI_Request> reqs;
  reqs.reserve(2 * static_cast<std::size_t>(n));
  for (int i = 1; i < n; ++i) {  // as SMPI's linear algorithm: receives first, from me+1 on
    const int peer = (me + i) % n;
    reqs.emplace_back();
    if (const int e = MPI_Irecv(block(recv, peer, rn, rext), rn, rb, peer, kTag, c, &reqs.back()); e != MPI_SUCCESS) return e;
  }
  for (int i = 1; i < n; ++i) {
    const int peer = (me + n - i) % n;
    reqs.emplace_back();
    if (const int e = MPI_Isend(block(send, peer, sn, sext), sn, sb, peer, kTag, c, &reqs.back()); e != MPI_SUCCESS) return e;
  }
  // this rank's own block: a local copy (none over folded buffers, whose values are garbage)
  if (!smpi_folded(recv) || !smpi_folded(send))
    std::memcpy(block(recv, me, rn, rext), block(send, me, sn, sext), static_cast<std::size_t>(bytes_of(sn, sb)));
  return wait_each(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
}

Table adapted() {
  Table t = mpi_table();
  t.iallgather = [](const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm c, MPI_Request* q) {
    return exchange("MPI_Allgather", &MPI_Allgather, s, sc, st, r, rc, rt, c, q);
  };
  t.ialltoall = &linear_alltoall;
  t.ireduce_scatter_block = [](const void* s, void* r, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm c, MPI_Request* q) {
    return reduction("MPI_Reduce_scatter_block", &MPI_Reduce_scatter_block, s, r, n, dt, op, c, q);
  };
  t.iallreduce = [](const void* s, void* r, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm c, MPI_Request* q) {
    return reduction("MPI_Allreduce", &MPI_Allreduce, s, r, n, dt, op, c, q);
  };
  t.isend = [](const void* b, int n, MPI_Datatype dt, int peer, int tag, MPI_Comm c, MPI_Request* q) {
    const auto [bn, bt] = as_bytes(n, dt);
    return MPI_Isend(b, bn, bt, peer, tag, c, q);
  };
  t.irecv = [](void* b, int n, MPI_Datatype dt, int peer, int tag, MPI_Comm c, MPI_Request* q) {
    const auto [bn, bt] = as_bytes(n, dt);
    return MPI_Irecv(b, bn, bt, peer, tag, c, q);
  };
  t.testall = [](int n, MPI_Request* q, int* done, MPI_Status* st) {
    *done = 1;
    const Blocked mark(("MPI_Waitall of " + std::to_string(n) + " send/recv requests").c_str(), -1, MPI_COMM_NULL);
    return wait_each(n, q, st);
  };
  t.memory = []() -> Memory& { return smpi_memory(); };
  return t;
}

}  // namespace

const Table& table() {
  static const Table adapted_table = adapted();  // built on first use: after vendor_mpi.cpp's table
  return adapted_table;
}

}  // namespace dtensor::mpi_vendor

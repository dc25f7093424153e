// The MPI backend's vendor table for SimGrid's SMPI (a simulated cluster, docs/virtual-cluster.md).
// The same calls as vendor_mpi.cpp except two, adapted to what SMPI 3.32 simulates well:
//  - the non-blocking collectives are the blocking ones (their request set to MPI_REQUEST_NULL):
//    SMPI runs MPI_I* collectives as linear exchanges (every rank to every rank, whatever
//    smpi/coll-selector says), which neither resembles a real MPI or NCCL nor finishes at 256
//    ranks; the blocking ones use the selected algorithms (rings, recursive doubling, ...).
//  - MPI_Testall is MPI_Waitall: the backend's polling loop (mpi.cpp) would inject SMPI's
//    smpi/test cost on every failed poll and switch contexts for nothing; a wait costs only the
//    simulated transfer. A peer that never comes cannot hang the simulation: when no rank can
//    progress, SimGrid stops it and names every blocked rank and the call it waits in.
// With DTENSOR_SMPI_FOLD set (a timing-only run), buffers from memory() are folded
// (folded_memory.hpp) and a reduction over one runs a no-op operator: the values are garbage,
// the simulated transfers are the same.
// And a collective of zero elements (every rank's count is the same, so all skip it together)
// returns at once: SMPI's "ompi" selector divides by the message size (SIGFPE) on some of them.
#include "vendor.hpp"

#include <climits>
#include <utility>

#include "folded_memory.hpp"

namespace dtensor::mpi_vendor {
namespace {

void noop(void*, void*, int*, MPI_Datatype*) {}

// A contiguous datatype's elements as bytes (the same message): SMPI moves a derived datatype's
// payload through a packing copy, even between folded buffers; MPI_BYTE it moves directly (and,
// folded, not at all). Kept as is where the byte count would not fit an int.
std::pair<int, MPI_Datatype> as_bytes(int count, MPI_Datatype t) {
  int size = 0;
  MPI_Type_size(t, &size);
  const long long bytes = static_cast<long long>(count) * size;
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

const Table kTable{
    [](int* f) { return MPI_Initialized(f); },
    [](int* f) { return MPI_Finalized(f); },
    [](MPI_Comm c, int* n) { return MPI_Comm_size(c, n); },
    [](MPI_Comm c, int* r) { return MPI_Comm_rank(c, r); },
    [](MPI_Comm c, MPI_Comm* out) { return MPI_Comm_dup(c, out); },
    [](MPI_Comm c, int color, int key, MPI_Comm* out) { return MPI_Comm_split(c, color, key, out); },
    [](MPI_Comm c, int type, int key, MPI_Info info, MPI_Comm* out) { return MPI_Comm_split_type(c, type, key, info, out); },
    [](MPI_Comm* c) { return MPI_Comm_free(c); },
    [](int n, MPI_Datatype old, MPI_Datatype* out) { return MPI_Type_contiguous(n, old, out); },
    [](MPI_Datatype* t) { return MPI_Type_commit(t); },
    [](MPI_User_function* f, int commute, MPI_Op* op) { return MPI_Op_create(f, commute, op); },
    [](const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm c, MPI_Request* q) {
      *q = MPI_REQUEST_NULL;
      if (sc == 0) return static_cast<int>(MPI_SUCCESS);
      const auto [sn, sb] = as_bytes(sc, st);
      const auto [rn, rb] = as_bytes(rc, rt);
      return MPI_Allgather(s, sn, sb, r, rn, rb, c);
    },
    [](const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q) {
      *q = MPI_REQUEST_NULL;
      if (n == 0) return static_cast<int>(MPI_SUCCESS);
      const MPI_Op o = op_for(s, r, op);
      if (o != op) {  // folded: bytes, no arithmetic
        const auto [bn, bt] = as_bytes(n, t);
        return MPI_Reduce_scatter_block(s, r, bn, bt, o, c);
      }
      return MPI_Reduce_scatter_block(s, r, n, t, op, c);
    },
    [](const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q) {
      *q = MPI_REQUEST_NULL;
      if (n == 0) return static_cast<int>(MPI_SUCCESS);
      const MPI_Op o = op_for(s, r, op);
      if (o != op) {  // folded: bytes, no arithmetic
        const auto [bn, bt] = as_bytes(n, t);
        return MPI_Allreduce(s, r, bn, bt, o, c);
      }
      return MPI_Allreduce(s, r, n, t, op, c);
    },
    [](const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm c, MPI_Request* q) {
      *q = MPI_REQUEST_NULL;
      if (sc == 0) return static_cast<int>(MPI_SUCCESS);
      const auto [sn, sb] = as_bytes(sc, st);
      const auto [rn, rb] = as_bytes(rc, rt);
      return MPI_Alltoall(s, sn, sb, r, rn, rb, c);
    },
    [](const void* b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c, MPI_Request* q) {
      const auto [bn, bt] = as_bytes(n, t);
      return MPI_Isend(b, bn, bt, peer, tag, c, q);
    },
    [](void* b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c, MPI_Request* q) {
      const auto [bn, bt] = as_bytes(n, t);
      return MPI_Irecv(b, bn, bt, peer, tag, c, q);
    },
    [](int n, MPI_Request* q, int* done, MPI_Status* st) {
      *done = 1;
      return MPI_Waitall(n, q, st);
    },
    [](MPI_Comm c, int code) { return MPI_Abort(c, code); },
    [](int code, char* text, int* len) { return MPI_Error_string(code, text, len); },
    []() -> Memory& { return smpi_memory(); },
};

}  // namespace

const Table& table() { return kTable; }

}  // namespace dtensor::mpi_vendor

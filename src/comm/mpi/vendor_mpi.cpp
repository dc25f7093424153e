// The real MPI behind the backend's vendor table (vendor.hpp).
#include "vendor.hpp"

#include "dtensor/memory.hpp"

namespace dtensor::mpi_vendor {
namespace {

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
      return MPI_Iallgather(s, sc, st, r, rc, rt, c, q);
    },
    [](const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q) {
      return MPI_Ireduce_scatter_block(s, r, n, t, op, c, q);
    },
    [](const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q) {
      return MPI_Iallreduce(s, r, n, t, op, c, q);
    },
    [](const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm c, MPI_Request* q) {
      return MPI_Ialltoall(s, sc, st, r, rc, rt, c, q);
    },
    [](const void* b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c, MPI_Request* q) {
      return MPI_Isend(b, n, t, peer, tag, c, q);
    },
    [](void* b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c, MPI_Request* q) {
      return MPI_Irecv(b, n, t, peer, tag, c, q);
    },
    [](int n, MPI_Request* q, int* done, MPI_Status* st) { return MPI_Testall(n, q, done, st); },
    [](MPI_Comm c, int code) { return MPI_Abort(c, code); },
    [](int code, char* text, int* len) { return MPI_Error_string(code, text, len); },
    []() -> Memory& { return host_memory(); },
};

}  // namespace

const Table& mpi_table() { return kTable; }

#ifndef DTENSOR_MPI_VENDOR_SMPI  // the SMPI build's table() is vendor_smpi.cpp's, adapted from this one
const Table& table() { return kTable; }
#endif

}  // namespace dtensor::mpi_vendor

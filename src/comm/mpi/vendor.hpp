#pragma once
// The MPI backend's one seam to its vendor: every MPI call the backend's logic
// (mpi.cpp) makes goes through this table, with MPI's own types and return codes.
// Two implementations, one linked into each build of that logic:
//   vendor_mpi.cpp  the real one (the MPI library): library dtensor::mpi;
//   tests/fakes/mpi_vendor_cpu.cpp  a one-process stand-in for tests (tests/test_mpi_cpu.cpp; a
//                   test double, so outside src/): a world of one rank whose calls complete at once, with faults to inject (an error code from
//                   a chosen call, requests that never complete, MPI not initialised).
#include <mpi.h>

namespace dtensor {
class Memory;
}

namespace dtensor::mpi_vendor {

struct Table {
  int (*initialized)(int* flag);
  int (*finalized)(int* flag);
  int (*comm_size)(MPI_Comm c, int* size);
  int (*comm_rank)(MPI_Comm c, int* rank);
  int (*comm_dup)(MPI_Comm c, MPI_Comm* out);
  int (*comm_split)(MPI_Comm c, int color, int key, MPI_Comm* out);
  int (*comm_split_type)(MPI_Comm c, int type, int key, MPI_Info info, MPI_Comm* out);
  int (*comm_free)(MPI_Comm* c);
  int (*type_contiguous)(int count, MPI_Datatype old, MPI_Datatype* out);
  int (*type_commit)(MPI_Datatype* t);
  int (*op_create)(MPI_User_function* f, int commute, MPI_Op* op);
  int (*iallgather)(const void* send, int scount, MPI_Datatype st, void* recv, int rcount, MPI_Datatype rt, MPI_Comm c,
                    MPI_Request* req);
  int (*ireduce_scatter_block)(const void* send, void* recv, int count, MPI_Datatype t, MPI_Op op, MPI_Comm c,
                               MPI_Request* req);
  int (*iallreduce)(const void* send, void* recv, int count, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* req);
  int (*ialltoall)(const void* send, int scount, MPI_Datatype st, void* recv, int rcount, MPI_Datatype rt, MPI_Comm c,
                   MPI_Request* req);
  int (*isend)(const void* buf, int count, MPI_Datatype t, int peer, int tag, MPI_Comm c, MPI_Request* req);
  int (*irecv)(void* buf, int count, MPI_Datatype t, int peer, int tag, MPI_Comm c, MPI_Request* req);
  int (*testall)(int n, MPI_Request* reqs, int* done, MPI_Status* statuses);
  int (*abort)(MPI_Comm c, int code);
  int (*error_string)(int code, char* text, int* len);
  // Where the backend's buffers live (MpiCommunicator::memory()): host memory, or under SMPI the
  // folded buffers of a timing-only run (folded_memory.hpp).
  Memory& (*memory)();
};

// The implementation linked with this build of the backend.
const Table& table();
// The MPI library's own calls (vendor_mpi.cpp): table() in an ordinary build; the SMPI build's
// table (vendor_smpi.cpp) adapts some of them.
const Table& mpi_table();

}  // namespace dtensor::mpi_vendor

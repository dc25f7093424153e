// A one-process stand-in for MPI behind the backend's vendor table (vendor.hpp): a world of one
// rank, every call completing at once on host memory (collectives copy the rank's own data,
// sends meet the posted receives to self in order), and faults to inject (vendor_cpu.hpp). It
// lets the backend's logic (errors, timeouts, counts, group splits) run in a test binary without
// mpirun; the multi-process semantics are tested on the real MPI under mpirun.
#include "mpi_vendor_cpu.hpp"

#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "comm/mpi/vendor.hpp"
#include "dtensor/memory.hpp"

namespace dtensor::mpi_vendor {
namespace stand_in {
namespace {

struct State {
  std::mutex mu;
  Faults faults;
  std::map<std::string, int> calls;
  struct Recv {
    void* buf;
    int bytes;
    int tag;
  };
  std::deque<Recv> recvs;
  // handles: communicators and datatypes are addresses in these arrays
  char comms[64] = {};
  int next_comm = 0;
  int type_bytes[64] = {};
  int next_type = 0;
};
State& st() {
  static State s;
  return s;
}

// Counts the call; its injected error code, or MPI_SUCCESS.
int enter(const char* call) {
  auto& s = st();
  std::lock_guard lock(s.mu);
  ++s.calls[call];
  return s.faults.fail == call ? s.faults.code : MPI_SUCCESS;
}

MPI_Comm new_comm() {
  auto& s = st();
  std::lock_guard lock(s.mu);
  return reinterpret_cast<MPI_Comm>(&s.comms[s.next_comm++ % 64]);
}

int bytes_of(MPI_Datatype t) {
  auto& s = st();
  for (int i = 0; i < 64; ++i)
    if (reinterpret_cast<MPI_Datatype>(&s.type_bytes[i]) == t) return s.type_bytes[i];
  if (t == MPI_DOUBLE || t == MPI_INT64_T || t == MPI_UINT64_T) return 8;
  if (t == MPI_FLOAT || t == MPI_INT32_T) return 4;
  if (t == MPI_INT8_T || t == MPI_UINT8_T || t == MPI_BYTE) return 1;
  throw std::logic_error("MPI stand-in: unknown datatype");
}

void copy(void* dst, const void* src, int count, MPI_Datatype t) {
  if (src != MPI_IN_PLACE && dst != src && count > 0)
    std::memmove(dst, src, static_cast<std::size_t>(count) * static_cast<std::size_t>(bytes_of(t)));
}

}  // namespace

Faults& faults() { return st().faults; }

int calls(const std::string& call) {
  std::lock_guard lock(st().mu);
  auto it = st().calls.find(call);
  return it == st().calls.end() ? 0 : it->second;
}

void reset() {
  auto& s = st();
  std::lock_guard lock(s.mu);
  s.faults = {};
  s.calls.clear();
  s.recvs.clear();
}

}  // namespace stand_in

namespace {
using namespace stand_in;

const Table kTable{
    [](int* f) {
      *f = faults().initialized ? 1 : 0;
      return enter("initialized");
    },
    [](int* f) {
      *f = 0;
      return enter("finalized");
    },
    [](MPI_Comm, int* n) {
      *n = 1;
      return enter("comm_size");
    },
    [](MPI_Comm, int* r) {
      *r = 0;
      return enter("comm_rank");
    },
    [](MPI_Comm, MPI_Comm* out) {
      if (int rc = enter("comm_dup")) return rc;
      *out = new_comm();
      return MPI_SUCCESS;
    },
    [](MPI_Comm, int, int, MPI_Comm* out) {
      if (int rc = enter("comm_split")) return rc;
      *out = new_comm();
      return MPI_SUCCESS;
    },
    [](MPI_Comm, int, int, MPI_Info, MPI_Comm* out) {
      if (int rc = enter("comm_split_type")) return rc;
      *out = new_comm();
      return MPI_SUCCESS;
    },
    [](MPI_Comm* c) {
      *c = MPI_COMM_NULL;
      return enter("comm_free");
    },
    [](int n, MPI_Datatype old, MPI_Datatype* out) {
      if (int rc = enter("type_contiguous")) return rc;
      auto& s = st();
      std::lock_guard lock(s.mu);
      const int k = s.next_type++ % 64;
      s.type_bytes[k] = n * (old == MPI_BYTE ? 1 : 0);
      *out = reinterpret_cast<MPI_Datatype>(&s.type_bytes[k]);
      return MPI_SUCCESS;
    },
    [](MPI_Datatype*) { return enter("type_commit"); },
    [](MPI_User_function*, int, MPI_Op* op) {
      *op = MPI_SUM;  // one rank reduces nothing: any op will do
      return enter("op_create");
    },
    [](const void* s, int sc, MPI_Datatype st, void* r, int, MPI_Datatype, MPI_Comm, MPI_Request* q) {
      if (int rc = enter("iallgather")) return rc;
      copy(r, s, sc, st);
      *q = MPI_REQUEST_NULL;
      return MPI_SUCCESS;
    },
    [](const void* s, void* r, int n, MPI_Datatype t, MPI_Op, MPI_Comm, MPI_Request* q) {
      if (int rc = enter("ireduce_scatter_block")) return rc;
      copy(r, s, n, t);
      *q = MPI_REQUEST_NULL;
      return MPI_SUCCESS;
    },
    [](const void* s, void* r, int n, MPI_Datatype t, MPI_Op, MPI_Comm, MPI_Request* q) {
      if (int rc = enter("iallreduce")) return rc;
      copy(r, s, n, t);
      *q = MPI_REQUEST_NULL;
      return MPI_SUCCESS;
    },
    [](const void* s, int sc, MPI_Datatype st, void* r, int, MPI_Datatype, MPI_Comm, MPI_Request* q) {
      if (int rc = enter("ialltoall")) return rc;
      copy(r, s, sc, st);
      *q = MPI_REQUEST_NULL;
      return MPI_SUCCESS;
    },
    [](const void* b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm, MPI_Request* q) {
      if (int rc = enter("isend")) return rc;
      if (peer != 0) return static_cast<int>(MPI_ERR_RANK);
      auto& s = st();
      std::lock_guard lock(s.mu);
      for (auto it = s.recvs.begin(); it != s.recvs.end(); ++it)
        if (it->tag == tag) {
          const int bytes = n * bytes_of(t);
          if (bytes > it->bytes) return static_cast<int>(MPI_ERR_TRUNCATE);
          if (bytes > 0) std::memmove(it->buf, b, static_cast<std::size_t>(bytes));
          s.recvs.erase(it);
          *q = MPI_REQUEST_NULL;
          return MPI_SUCCESS;
        }
      return static_cast<int>(MPI_ERR_PENDING);  // the backend posts its receives first
    },
    [](void* b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm, MPI_Request* q) {
      if (int rc = enter("irecv")) return rc;
      if (peer != 0) return static_cast<int>(MPI_ERR_RANK);
      auto& s = st();
      std::lock_guard lock(s.mu);
      s.recvs.push_back({b, n * bytes_of(t), tag});
      *q = MPI_REQUEST_NULL;
      return MPI_SUCCESS;
    },
    [](int, MPI_Request*, int* done, MPI_Status*) {
      if (int rc = enter("testall")) return rc;
      *done = faults().never_complete ? 0 : 1;
      return MPI_SUCCESS;
    },
    [](MPI_Comm, int code) -> int {
      enter("abort");
      throw std::runtime_error("MPI_Abort(" + std::to_string(code) + ")");
    },
    [](int code, char* text, int* len) {
      const std::string t = "stand-in error " + std::to_string(code);
      std::memcpy(text, t.c_str(), t.size() + 1);
      *len = static_cast<int>(t.size());
      return MPI_SUCCESS;
    },
    []() -> Memory& { return host_memory(); },
};

}  // namespace

const Table& table() { return kTable; }

}  // namespace dtensor::mpi_vendor

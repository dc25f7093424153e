// A CPU stand-in for NCCL 2.28 (non-blocking mode) and the few CUDA runtime calls and kernels the
// NCCL backend makes, on host memory, ranks in threads (what it reproduces: vendor_cpu.hpp).
#include "nccl_vendor_cpu.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "dtensor/dtype.hpp"
#include "dtensor/memory.hpp"
#include "dtensor/scalar.hpp"
#include "comm/nccl/vendor.hpp"

namespace dtensor::nccl_vendor {
namespace {

std::atomic<std::int64_t> g_in_progress{0}, g_deferred{0}, g_invalid{0}, g_aborts{0};
std::atomic<int> g_devices{8};
thread_local int t_device = 0;

// ---------------------------------------------------------------- streams

struct FakeStream {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> tasks;
  std::int64_t pending = 0;  // queued or running
  bool stop = false;
  std::atomic<bool> capturing{false};
  std::thread worker;
  FakeStream() {
    worker = std::thread([this] {
      std::unique_lock lk(mu);
      while (true) {
        cv.wait(lk, [&] { return stop || !tasks.empty(); });
        if (tasks.empty()) return;
        auto task = std::move(tasks.front());
        tasks.pop_front();
        lk.unlock();
        task();
        lk.lock();
        --pending;
        cv.notify_all();
      }
    });
  }
  ~FakeStream() {
    {
      std::lock_guard lk(mu);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }
  void push(std::function<void()> f) {
    std::lock_guard lk(mu);
    tasks.push_back(std::move(f));
    ++pending;
    cv.notify_all();
  }
  bool idle() {
    std::lock_guard lk(mu);
    return pending == 0;
  }
  void drain() {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return pending == 0; });
  }
};

FakeStream* stream_of(Stream s) {
  if (s) return static_cast<FakeStream*>(s);
  thread_local std::unique_ptr<FakeStream> legacy;  // the legacy default stream of this thread
  if (!legacy) legacy = std::make_unique<FakeStream>();
  return legacy.get();
}

// ---------------------------------------------------------------- communicators

struct FakeComm;

// One collective (or split) of a clique, by sequence number.
struct Round {
  int arrived = 0, computed = 0, left = 0;
  std::vector<const void*> send;
  std::vector<void*> recv;
  std::vector<std::tuple<int, int, int>> split;  // (color, key, rank) per member
  std::size_t count = 0;
  DataType type = kUint8;
  RedOp op = kSum;
  int kind = 0;  // 1 all_gather, 2 reduce_scatter, 3 all_reduce, 4 split
};

struct Message {
  const void* data = nullptr;
  std::size_t bytes = 0;
  bool consumed = false;
};

struct Clique {
  explicit Clique(int n) : nranks(n), members(static_cast<std::size_t>(n), nullptr) {}
  int nranks;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<FakeComm*> members;
  int joined = 0;
  bool aborted = false;
  std::map<std::int64_t, Round> rounds;
  std::map<std::tuple<int, int, std::int64_t>, Message> mail;  // (src, dst, order)
};

struct FakeComm {
  std::shared_ptr<Clique> clique;
  int rank = 0;
  int device = 0;
  bool blocking = false;
  std::mutex mu;  // guards the fields below
  Result async = kSuccess;
  int polls_left = 0;    // an operation in progress clears after this many polls
  bool joining = false;  // init: in progress until every rank joined
  std::int64_t seq = 0;  // the next round
  std::int64_t ops = 0;  // operations issued (every fifth returns ncclInProgress)
  struct PendingSplit {
    std::int64_t seq;
    Comm* out;
    bool child_blocking;
  };
  std::vector<PendingSplit> splits;
  std::map<int, std::int64_t> sent, received;  // p2p order per peer
  bool aborted = false;
  std::string last_error;
  std::vector<std::function<void()>> deferred;  // operations that reach their stream when progress completes
};

std::mutex g_registry_mu;
std::vector<std::shared_ptr<FakeComm>> g_comms;  // kept until exit: handles stay valid after abort
std::map<std::string, std::shared_ptr<Clique>> g_cliques;
std::int64_t g_next_id = 0;

FakeComm* F(Comm c) { return static_cast<FakeComm*>(c); }

FakeComm* new_comm(std::shared_ptr<Clique> clique, int rank, bool blocking) {
  auto c = std::make_shared<FakeComm>();
  c->clique = std::move(clique);
  c->rank = rank;
  c->device = t_device;
  c->blocking = blocking;
  std::lock_guard lk(g_registry_mu);
  g_comms.push_back(c);
  return c.get();
}

// A call on `c` is allowed only when nothing is in progress on it (NCCL's non-blocking rule).
Result usable(FakeComm* c) {
  if (!c) return kInvalidArgument;
  std::lock_guard lk(c->mu);
  if (c->aborted) {
    c->last_error = "communicator was aborted";
    return kInvalidUsage;
  }
  if (c->async == kInProgress) {
    c->last_error = "Attempt to use communicator before the previous operation returned ncclSuccess";
    ++g_invalid;
    return kInvalidUsage;
  }
  if (c->async != kSuccess) return c->async;
  return kSuccess;
}

// The operation just issued on `c` (`enqueue` puts it on its stream): the first (connection
// set-up) and every fifth stay in progress for a few polls, and, as in NCCL, reach the stream
// only when the communicator leaves ncclInProgress (when it is polled).
Result issued(FakeComm* c, std::function<void()> enqueue) {
  {
    std::lock_guard lk(c->mu);
    const bool slow = c->ops++ % 5 == 0;
    if (slow && !c->blocking) {
      c->async = kInProgress;
      c->polls_left = 2;
      c->deferred.push_back(std::move(enqueue));
      ++g_in_progress;
      return kInProgress;
    }
  }
  enqueue();
  return kSuccess;
}

void fail(FakeComm* c, Result r, const std::string& why) {
  std::lock_guard lk(c->mu);
  if (c->async == kSuccess || c->async == kInProgress) c->async = r;
  c->last_error = why;
}

// Waits on the clique until `ready` (true) or an abort (false).
template <typename Pred>
bool wait_clique(Clique& q, std::unique_lock<std::mutex>& lk, Pred ready) {
  q.cv.wait(lk, [&] { return q.aborted || ready(); });
  return !q.aborted;
}

DType dtype_of(DataType t) {
  switch (t) {
    case kInt8: return DType::i8;
    case kUint8: return DType::u8;
    case kInt32: return DType::i32;
    case kInt64: case kUint64: return DType::i64;
    case kFloat16: return DType::f16;
    case kFloat32: return DType::f32;
    case kFloat64: return DType::f64;
    case kBfloat16: return DType::bf16;
    case kFloat8e4m3: return DType::f8e4m3;
    case kFloat8e5m2: return DType::f8e5m2;
    default: return DType::u8;
  }
}
ReduceOp op_of(RedOp op) {
  switch (op) {
    case kProd: return ReduceOp::product;
    case kMax: return ReduceOp::max;
    case kMin: return ReduceOp::min;
    case kAvg: return ReduceOp::avg;
    default: return ReduceOp::sum;
  }
}

// One rank's part of a collective, run on its stream: every member posts its buffers, each
// computes its own output into a temporary, all wait until every member has read the inputs,
// then each writes its output (in-place collectives stay correct).
void run_collective(FakeComm* c, std::int64_t seq, int kind, const void* send, void* recv, std::size_t count,
                    DataType type, RedOp op) {
  Clique& q = *c->clique;
  const int n = q.nranks;
  const std::size_t item = itemsize(dtype_of(type));
  std::unique_lock lk(q.mu);
  Round& r = q.rounds[seq];
  if (r.send.empty()) {
    r.send.assign(static_cast<std::size_t>(n), nullptr);
    r.recv.assign(static_cast<std::size_t>(n), nullptr);
  }
  r.send[static_cast<std::size_t>(c->rank)] = send;
  r.recv[static_cast<std::size_t>(c->rank)] = recv;
  r.count = count;
  r.type = type;
  r.op = op;
  r.kind = kind;
  ++r.arrived;
  q.cv.notify_all();
  if (!wait_clique(q, lk, [&] { return r.arrived == n; })) {
    lk.unlock();
    fail(c, kRemoteError, "a peer aborted its communicator");
    return;
  }
  lk.unlock();
  std::vector<unsigned char> out;
  const std::size_t bytes = count * item;
  if (kind == 1) {
    out.resize(bytes * static_cast<std::size_t>(n));
    for (int s = 0; s < n; ++s)
      if (bytes) std::memcpy(out.data() + bytes * static_cast<std::size_t>(s), r.send[static_cast<std::size_t>(s)], bytes);
  } else {
    out.resize(bytes);
    std::vector<const void*> in;
    const std::size_t off = kind == 2 ? bytes * static_cast<std::size_t>(c->rank) : 0;
    for (int s = 0; s < n; ++s) in.push_back(static_cast<const unsigned char*>(r.send[static_cast<std::size_t>(s)]) + off);
    if (count) host_memory().reduce(dtype_of(type), op_of(op), out.data(), in, static_cast<std::int64_t>(count));
  }
  lk.lock();
  ++r.computed;
  q.cv.notify_all();
  if (!wait_clique(q, lk, [&] { return r.computed == n; })) {
    lk.unlock();
    fail(c, kRemoteError, "a peer aborted its communicator");
    return;
  }
  if (!out.empty()) std::memcpy(recv, out.data(), out.size());
  if (++r.left == n) q.rounds.erase(seq);
  q.cv.notify_all();
}

Result enqueue_collective(int kind, const void* send, void* recv, std::size_t count, DataType type, RedOp op, Comm comm,
                          Stream s) {
  FakeComm* c = F(comm);
  if (const Result u = usable(c); u != kSuccess) return u;
  std::int64_t seq;
  {
    std::lock_guard lk(c->mu);
    seq = c->seq++;
  }
  FakeStream* st = stream_of(s);
  return issued(c, [=] { st->push([=] { run_collective(c, seq, kind, send, recv, count, type, op); }); });
}

// Group calls: send/recv between ncclGroupStart and ncclGroupEnd run as one task.
struct P2P {
  bool is_send;
  void* buf;
  std::size_t bytes;
  int peer;
  FakeComm* comm;
  Stream stream;
  std::int64_t order;
};
thread_local int t_group_depth = 0;
thread_local std::vector<P2P> t_group;

void run_p2p(const std::vector<P2P>& ops) {
  for (const auto& o : ops)  // post every send
    if (o.is_send) {
      Clique& q = *o.comm->clique;
      std::lock_guard lk(q.mu);
      q.mail[{o.comm->rank, o.peer, o.order}] = Message{o.buf, o.bytes, false};
      q.cv.notify_all();
    }
  for (const auto& o : ops)  // receive
    if (!o.is_send) {
      Clique& q = *o.comm->clique;
      std::unique_lock lk(q.mu);
      const auto key = std::make_tuple(o.peer, o.comm->rank, o.order);
      if (!wait_clique(q, lk, [&] { return q.mail.count(key) > 0; })) {
        lk.unlock();
        fail(o.comm, kRemoteError, "a peer aborted its communicator");
        return;
      }
      Message& m = q.mail[key];
      if (m.bytes != o.bytes) {
        lk.unlock();
        fail(o.comm, kInvalidArgument, "send/recv sizes differ");
        return;
      }
      if (o.bytes) std::memcpy(o.buf, m.data, o.bytes);
      m.consumed = true;
      q.cv.notify_all();
    }
  for (const auto& o : ops)  // the send buffers stay untouched until their receivers copied them
    if (o.is_send) {
      Clique& q = *o.comm->clique;
      std::unique_lock lk(q.mu);
      const auto key = std::make_tuple(o.comm->rank, o.peer, o.order);
      if (!wait_clique(q, lk, [&] { return q.mail[key].consumed; })) {
        lk.unlock();
        fail(o.comm, kRemoteError, "a peer aborted its communicator");
        return;
      }
      q.mail.erase(key);
    }
}

Result group_end_impl() {
  if (t_group_depth == 0) return kInvalidUsage;
  if (--t_group_depth > 0) return kSuccess;
  std::vector<P2P> ops;
  ops.swap(t_group);
  if (ops.empty()) return kSuccess;
  std::vector<FakeComm*> comms;
  for (const auto& o : ops)
    if (std::find(comms.begin(), comms.end(), o.comm) == comms.end()) comms.push_back(o.comm);
  for (FakeComm* c : comms)
    if (const Result u = usable(c); u != kSuccess) return u;
  FakeStream* st = stream_of(ops.front().stream);
  Result r = issued(comms.front(), [st, ops] { st->push([ops] { run_p2p(ops); }); });
  for (std::size_t i = 1; i < comms.size(); ++i)
    if (issued(comms[i], [] {}) == kInProgress) r = kInProgress;
  return r;
}

Result p2p(bool is_send, const void* buf, std::size_t count, DataType t, int peer, Comm comm, Stream s) {
  FakeComm* c = F(comm);
  if (!c) return kInvalidArgument;
  if (peer < 0 || peer >= c->clique->nranks) return kInvalidArgument;
  std::int64_t order;
  {
    std::lock_guard lk(c->mu);
    order = is_send ? c->sent[peer]++ : c->received[peer]++;
  }
  const bool alone = t_group_depth == 0;
  if (alone) ++t_group_depth;
  t_group.push_back(P2P{is_send, const_cast<void*>(buf), count * itemsize(dtype_of(t)), peer, c, s, order});
  return alone ? group_end_impl() : kSuccess;
}

// Completes what polling `c` may complete: its init, its splits, an operation in progress.
Result poll(FakeComm* c) {
  std::unique_lock lk(c->mu);
  if (c->aborted) return kInvalidUsage;
  if (c->joining) {
    lk.unlock();
    bool all;
    {
      std::lock_guard ql(c->clique->mu);
      all = c->clique->joined == c->clique->nranks;
    }
    lk.lock();
    if (!all) return kInProgress;
    c->joining = false;
    c->async = kSuccess;
  }
  if (!c->splits.empty()) {
    Clique& q = *c->clique;
    auto pending = c->splits;
    lk.unlock();
    std::vector<FakeComm::PendingSplit> still;
    for (const auto& ps : pending) {
      std::unique_lock ql(q.mu);
      Round& r = q.rounds[ps.seq];
      if (static_cast<int>(r.split.size()) < q.nranks) {
        still.push_back(ps);
        continue;
      }
      // every rank split: make the children once (the first poller), then hand this rank its own
      if (r.recv.empty()) {
        r.recv.assign(static_cast<std::size_t>(q.nranks), nullptr);
        auto members = r.split;  // (color, key, parent rank): member order is (key, parent rank)
        std::sort(members.begin(), members.end(), [](const auto& a, const auto& b) {
          return std::tie(std::get<0>(a), std::get<1>(a), std::get<2>(a)) < std::tie(std::get<0>(b), std::get<1>(b), std::get<2>(b));
        });
        std::size_t i = 0;
        while (i < members.size()) {
          std::size_t j = i;
          while (j < members.size() && std::get<0>(members[j]) == std::get<0>(members[i])) ++j;
          auto clique = std::make_shared<Clique>(static_cast<int>(j - i));
          for (std::size_t k = i; k < j; ++k) {
            const int parent_rank = std::get<2>(members[k]);
            FakeComm* child = new_comm(clique, static_cast<int>(k - i), ps.child_blocking);
            child->device = q.members[static_cast<std::size_t>(parent_rank)]->device;
            if (!ps.child_blocking) {  // a non-blocking child is still initialising: one more poll
              child->async = kInProgress;
              child->polls_left = 1;
            }
            clique->members[k - i] = child;
            r.recv[static_cast<std::size_t>(parent_rank)] = child;
          }
          clique->joined = clique->nranks;
          i = j;
        }
      }
      *ps.out = r.recv[static_cast<std::size_t>(c->rank)];
      if (++r.left == q.nranks) q.rounds.erase(ps.seq);
    }
    lk.lock();
    c->splits = still;
    if (!still.empty()) return kInProgress;
    if (c->async == kInProgress && c->polls_left == 0) c->async = kSuccess;
  }
  if (c->async == kInProgress && c->polls_left > 0 && --c->polls_left == 0) {
    c->async = kSuccess;
    auto ready = std::move(c->deferred);
    c->deferred.clear();
    lk.unlock();
    for (auto& f : ready) f();
    return kSuccess;
  }
  return c->async;
}

const char* error_name(Result r) {
  switch (r) {
    case kSuccess: return "no error";
    case kUnhandledCudaError: return "unhandled cuda error";
    case kSystemError: return "unhandled system error";
    case kInternalError: return "internal error";
    case kInvalidArgument: return "invalid argument";
    case kInvalidUsage: return "invalid usage";
    case kRemoteError: return "remote process exited or there was a network error";
    case kInProgress: return "NCCL operation in progress";
  }
  return "unknown result code";
}

const Table kTable{
    // get_unique_id
    [](UniqueId* id) {
      std::memset(id->bytes, 0, sizeof id->bytes);
      std::lock_guard lk(g_registry_mu);
      const std::string s = "cpu-nccl-" + std::to_string(g_next_id++);
      std::memcpy(id->bytes, s.data(), s.size());
      return kSuccess;
    },
    // comm_init_rank
    [](Comm* comm, int nranks, const UniqueId& id, int rank, bool blocking) {
      *comm = nullptr;
      if (nranks < 1 || rank < 0 || rank >= nranks) return kInvalidArgument;
      std::shared_ptr<Clique> q;
      {
        std::lock_guard lk(g_registry_mu);
        auto& slot = g_cliques[std::string(id.bytes, strnlen(id.bytes, sizeof id.bytes))];
        if (!slot) slot = std::make_shared<Clique>(nranks);
        q = slot;
      }
      if (q->nranks != nranks) return kInvalidArgument;
      FakeComm* c = new_comm(q, rank, blocking);
      {
        std::lock_guard lk(q->mu);
        if (q->members[static_cast<std::size_t>(rank)]) return kInvalidUsage;
        q->members[static_cast<std::size_t>(rank)] = c;
        ++q->joined;
        q->cv.notify_all();
      }
      *comm = c;
      if (blocking) {
        std::unique_lock lk(q->mu);
        q->cv.wait(lk, [&] { return q->joined == q->nranks || q->aborted; });
        return q->aborted ? kRemoteError : kSuccess;
      }
      std::lock_guard lk(c->mu);
      c->joining = true;
      c->async = kInProgress;
      ++g_in_progress;
      return kInProgress;
    },
    // comm_split
    [](Comm parent, int color, int key, Comm* child, bool child_blocking) {
      FakeComm* c = F(parent);
      if (const Result u = usable(c); u != kSuccess) return u;
      *child = nullptr;
      std::int64_t seq;
      {
        std::lock_guard lk(c->mu);
        seq = c->seq++;
      }
      Clique& q = *c->clique;
      {
        std::lock_guard lk(q.mu);
        q.rounds[seq].split.emplace_back(color, key, c->rank);
        q.cv.notify_all();
      }
      {
        std::lock_guard lk(c->mu);
        c->splits.push_back({seq, child, child_blocking});
        c->async = kInProgress;
        c->polls_left = 0;
      }
      if (c->blocking) {  // a blocking parent hands the handle out at once
        std::unique_lock lk(q.mu);
        q.cv.wait(lk, [&] { return q.aborted || static_cast<int>(q.rounds[seq].split.size()) == q.nranks; });
        lk.unlock();
        const Result r = poll(c);
        return r == kInProgress ? kSuccess : r;
      }
      ++g_deferred;
      return kSuccess;  // NCCL: success, the handle still NULL, the parent in progress
    },
    // comm_get_async_error
    [](Comm comm, Result* async) {
      FakeComm* c = F(comm);
      if (!c) {
        *async = kInvalidArgument;
        return kInvalidArgument;  // NCCL: "comm argument is NULL"
      }
      *async = poll(c);
      return kSuccess;
    },
    // comm_abort
    [](Comm comm) {
      FakeComm* c = F(comm);
      if (!c) return kSuccess;
      ++g_aborts;
      {
        std::lock_guard lk(c->mu);
        c->aborted = true;
        c->async = kSystemError;
      }
      Clique& q = *c->clique;
      std::lock_guard lk(q.mu);
      q.aborted = true;
      q.cv.notify_all();
      return kSuccess;
    },
    // comm_destroy
    [](Comm comm) { return comm ? kSuccess : kInvalidArgument; },
    [](Comm comm, int* n) {
      if (!comm) return kInvalidArgument;
      *n = F(comm)->clique->nranks;
      return kSuccess;
    },
    [](Comm comm, int* r) {
      if (!comm) return kInvalidArgument;
      *r = F(comm)->rank;
      return kSuccess;
    },
    [](Comm comm, int* d) {
      if (!comm) return kInvalidArgument;
      *d = F(comm)->device;
      return kSuccess;
    },
    error_name,
    [](Comm comm) -> const char* {
      if (!comm) return "comm argument is NULL";
      FakeComm* c = F(comm);
      std::lock_guard lk(c->mu);
      thread_local std::string copy;
      copy = c->last_error;
      return copy.c_str();
    },
    [] { return 22809; },
    [](const void* send, void* recv, std::size_t count, DataType t, Comm c, Stream s) {
      return enqueue_collective(1, send, recv, count, t, kSum, c, s);
    },
    [](const void* send, void* recv, std::size_t count, DataType t, RedOp op, Comm c, Stream s) {
      return enqueue_collective(2, send, recv, count, t, op, c, s);
    },
    [](const void* send, void* recv, std::size_t count, DataType t, RedOp op, Comm c, Stream s) {
      return enqueue_collective(3, send, recv, count, t, op, c, s);
    },
    [](const void* buf, std::size_t count, DataType t, int peer, Comm c, Stream s) { return p2p(true, buf, count, t, peer, c, s); },
    [](void* buf, std::size_t count, DataType t, int peer, Comm c, Stream s) { return p2p(false, buf, count, t, peer, c, s); },
    [] {
      ++t_group_depth;
      return kSuccess;
    },
    group_end_impl,
    // CUDA runtime
    [](int d) {
      if (d < 0 || d >= g_devices.load()) return 101;  // cudaErrorInvalidDevice
      t_device = d;
      return kCudaSuccess;
    },
    [](int* d) {
      *d = t_device;
      return kCudaSuccess;
    },
    [](int* n) {
      *n = g_devices.load();
      return kCudaSuccess;
    },
    [](int, int* major) {
      *major = 9;
      return kCudaSuccess;
    },
    [](void** p, std::size_t bytes) {
      *p = std::malloc(bytes ? bytes : 1);
      return *p ? kCudaSuccess : 2;  // cudaErrorMemoryAllocation
    },
    [](void* p) {
      std::free(p);
      return kCudaSuccess;
    },
    [](void* dst, const void* src, std::size_t bytes, Stream s) {
      stream_of(s)->push([=] { std::memcpy(dst, src, bytes); });
      return kCudaSuccess;
    },
    [](void* dst, const void* src, std::size_t bytes) {
      std::memcpy(dst, src, bytes);
      return kCudaSuccess;
    },
    [](void* dst, const void* src, std::size_t bytes, Stream s) {
      stream_of(s)->push([=] { std::memmove(dst, src, bytes); });
      return kCudaSuccess;
    },
    [](Stream s) { return stream_of(s)->idle() ? kCudaSuccess : kCudaNotReady; },
    [](Stream s, bool* capturing) {
      *capturing = stream_of(s)->capturing.load();
      return kCudaSuccess;
    },
    [](int e) -> const char* { return e == kCudaNotReady ? "cudaErrorNotReady" : e == 0 ? "cudaSuccess" : "cudaError"; },
    [](int e) -> const char* { return e == kCudaNotReady ? "device not ready" : e == 0 ? "no error" : "CPU stand-in error"; },
    [] {},
    [](void* dst, std::uint64_t pattern, int elem_bytes, std::int64_t count, Stream s) {
      stream_of(s)->push([=] {
        auto* d = static_cast<unsigned char*>(dst);
        for (std::int64_t k = 0; k < count; ++k)
          for (int b = 0; b < elem_bytes; ++b) d[k * elem_bytes + b] = static_cast<unsigned char>(pattern >> (8 * b));
      });
      return kCudaSuccess;
    },
    [](void* dst, const void* src, const cuda::StridedCopy& c, Stream s) {
      stream_of(s)->push([=] {
        std::vector<std::int64_t> count(c.count, c.count + c.ndim), ds(c.dst_stride, c.dst_stride + c.ndim),
            ss(c.src_stride, c.src_stride + c.ndim);
        host_memory().copy_strided(dst, src, c.run_bytes, count, ds, ss);
      });
      return kCudaSuccess;
    },
    // the reduction kernels as the CPU executor reduces (the device arithmetic gives its bits:
    // test_values checks reduce_math against it)
    [](int dtype, int op, void* out, const void* const* in, int n, std::int64_t count, Stream s) {
      std::vector<const void*> members(in, in + n);
      stream_of(s)->push([=] {
        host_memory().reduce(static_cast<DType>(dtype), static_cast<ReduceOp>(op), out, members, count);
      });
      return kCudaSuccess;
    },
    [](int dtype, int op, void* acc, const void* x, std::int64_t count, Stream s) {
      stream_of(s)->push([=] { reduce_into(static_cast<DType>(dtype), static_cast<ReduceOp>(op), acc, x, count); });
      return kCudaSuccess;
    },
    [](int dtype, void* acc, std::int64_t count, std::int64_t members, Stream s) {
      stream_of(s)->push([=] { finish_average(static_cast<DType>(dtype), acc, count, members); });
      return kCudaSuccess;
    },
    [](Stream s) {
      stream_of(s)->drain();
      return kCudaSuccess;
    },
};

}  // namespace

const Table& table() { return kTable; }

namespace cpu {
void* stream_create() { return new FakeStream(); }
void stream_destroy(void* stream) { delete static_cast<FakeStream*>(stream); }
void stream_drain(void* stream) { static_cast<FakeStream*>(stream)->drain(); }
void set_capturing(void* stream, bool capturing) { static_cast<FakeStream*>(stream)->capturing = capturing; }
void set_device_count(int n) { g_devices = n; }
Counters counters() { return {g_in_progress.load(), g_deferred.load(), g_invalid.load(), g_aborts.load()}; }
}  // namespace cpu

}  // namespace dtensor::nccl_vendor

// The in-process backend: a world of per-rank communicators meeting at rendezvous points. Used
// from one thread per rank, a call blocks until its group has arrived (or fails, naming who did
// not come). The all-ranks driver (sim.hpp) runs every rank from one thread instead: then a
// call only registers, the last member's call runs the collective, and the driver checks at each
// step that every collective completed.
#include "dtensor/executor.hpp"
#include "dtensor/simulated.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <system_error>
#include <thread>
#include <map>
#include <new>
#include <mutex>
#include <optional>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "dtensor/error.hpp"
#include "dtensor/scalar.hpp"
#include "dtensor/simulated.hpp"
#include "comm/executor_impl.hpp"
#include "comm/minifloat.hpp"

namespace dtensor {
namespace {

// The executor's name of a collective (all_to_all, not nccl-tests' alltoall), for messages.
const char* kind_name(Collective c) { return c == Collective::all_to_all ? "all_to_all" : to_string(c).data(); }

// One collective instance of one group: the i-th call of every member.
struct Op {
  std::optional<Collective> kind;  // unset until the first member arrives
  std::int64_t count = 0;
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
  std::vector<const void*> send;
  std::vector<void*> recv;
  std::vector<char> present;
  std::int64_t arrived = 0, left = 0;
  bool done = false;
  std::string error;
};

struct Channel {
  std::vector<int> dims;
  std::vector<std::int64_t> member_ranks;  // by position
  std::int64_t base = 0;                   // index of ops.front()
  std::deque<Op> ops;
  std::vector<std::int64_t> next;          // per position: index of its next call
};

struct Message {
  const void* buffer;
  std::int64_t count;
  DType dtype;
  bool taken = false;
  bool claimed = false;  // a receiver popped it and may be copying out of `buffer`
  std::string error;
  double sent_at = 0;  // the sender's virtual clock
};

std::string describe(const Mesh& mesh, const std::vector<int>& dims) { return dtensor::describe(mesh, Group{dims}); }

}  // namespace

class ThreadsCommunicator;

struct SimulatedWorld::Impl {
  Mesh mesh{std::vector<std::int64_t>{1}};
  WorldOptions options;
  std::shared_ptr<Memory> mem;
  std::vector<std::unique_ptr<ThreadsCommunicator>> comms;
  std::mutex mu;
  // One condition variable per rank: a wake-up goes to the ranks it concerns only.
  std::vector<std::unique_ptr<std::condition_variable>> cv;
  std::condition_variable& cv_of(std::int64_t rank) { return *cv[static_cast<std::size_t>(rank)]; }
  void wake(const std::vector<std::int64_t>& ranks) {
    for (auto r : ranks) cv_of(r).notify_one();
  }
  // Rank threads whose job ended in an error (run_rank_threads), with its text, and the order
  // they failed in: a peer waiting on one of them fails at once, naming it, instead of waiting for
  // the timeout; the run reports the first failure, the cause of the others.
  std::vector<std::string> failed;
  std::vector<std::int64_t> failure_order;
  [[nodiscard]] std::int64_t failed_among(const std::vector<std::int64_t>& ranks, const std::vector<char>* present) const {
    if (failed.empty()) return -1;
    for (std::size_t q = 0; q < ranks.size(); ++q)
      if ((present == nullptr || !(*present)[q]) && !failed[static_cast<std::size_t>(ranks[q])].empty()) return ranks[q];
    return -1;
  }
  std::map<std::vector<std::int64_t>, Channel> channels;
  std::map<std::pair<std::int64_t, std::int64_t>, std::deque<std::shared_ptr<Message>>> mail;  // (from, to)
  std::int64_t collectives_run = 0;
  std::vector<double> clock;  // per rank, µs (virtual clock)
  // The virtual time one collective takes (0 without a clock profile); `id` seeds its noise.
  [[nodiscard]] double clock_step(Collective c, const std::vector<int>& dims, std::int64_t members, double bytes,
                                  std::uint64_t id) const {
    if (!options.clock_profile) return 0;
    const CostModel& m = *options.clock_profile;
    bool inter = false;
    for (int d : dims) inter = inter || m.is_inter_host(mesh.shape(), d);
    return predict_collective_us(m, c, members, inter, bytes) * (1 + options.clock_noise * noise_of(id));
  }
  // A grouped send/recv as the clock profile prices a direct step (Traffic::Kind::direct).
  [[nodiscard]] double clock_direct(const std::vector<int>& dims, std::int64_t peers, double bytes, std::uint64_t id) const {
    if (!options.clock_profile || peers <= 0) return 0;
    const CostModel& m = *options.clock_profile;
    Traffic t;
    t.kind = Traffic::Kind::direct;
    t.peers = peers;
    t.bytes = bytes;
    for (int d : dims) t.inter_host = t.inter_host || m.is_inter_host(mesh.shape(), d);
    return m.time(t).total_us() * (1 + options.clock_noise * noise_of(id));
  }
  [[nodiscard]] double noise_of(std::uint64_t id) const {
    std::uint64_t h = id ^ (options.clock_seed * 0x9e3779b97f4a7c15ULL);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return static_cast<double>(h >> 11) / static_cast<double>(1ULL << 53) * 2 - 1;
  }
  bool lockstep = false;  // one thread drives every rank (the all-ranks driver)
  struct P2P {
    std::int64_t from, to;
    void* buffer;
    std::int64_t count;
    DType dtype;
    bool is_send;
  };
  std::vector<P2P> p2p;  // lockstep only: matched by flush()

  // Rank threads kept between run_rank_threads calls (one per rank, started on first use).
  struct Pool {
    std::mutex mu;
    std::condition_variable work, finished;
    std::vector<std::thread> threads;
    const std::function<void(std::int64_t, Communicator&)>* job = nullptr;
    std::uint64_t generation = 0;
    std::int64_t running = 0;
    bool stop = false;
    std::vector<std::exception_ptr> errors;
  } pool;
  void run_threads(const std::function<void(std::int64_t, Communicator&)>& fn);
  void note_failure(std::int64_t rank, const std::exception_ptr& err);
  ~Impl();

  void collective(std::int64_t rank, const Group& g, Collective kind, const void* send, void* recv, std::int64_t count,
                  DType dtype, ReduceOp op);
  void run(Op& p, std::int64_t members);
  void exchange_p2p(std::int64_t rank, std::span<const Transfer> sends, std::span<const Transfer> recvs, DType dtype);
  void flush();
  [[nodiscard]] std::chrono::steady_clock::time_point deadline() const {
    return std::chrono::steady_clock::now() + options.timeout;
  }
};

struct WorldAccess {
  static SimulatedWorld::Impl& impl(SimulatedWorld& w) { return *w.impl_; }
};

class ThreadsCommunicator final : public Communicator {
 public:
  ThreadsCommunicator(SimulatedWorld::Impl& w, std::int64_t rank) : w_(w), rank_(rank) {}
  [[nodiscard]] const Mesh& mesh() const override { return w_.mesh; }
  [[nodiscard]] std::int64_t rank() const override { return rank_; }
  [[nodiscard]] bool supports(Collective c, DType t, ReduceOp op) const override { return w_.mem->supports(c, t, op); }
  void all_gather(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype) override {
    w_.collective(rank_, g, Collective::all_gather, send, recv, count, dtype, ReduceOp::sum);
  }
  void reduce_scatter(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype,
                      ReduceOp op) override {
    w_.collective(rank_, g, Collective::reduce_scatter, send, recv, count, dtype, op);
  }
  void all_reduce(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype, ReduceOp op) override {
    w_.collective(rank_, g, Collective::all_reduce, send, recv, count, dtype, op);
  }
  void all_to_all(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype) override {
    w_.collective(rank_, g, Collective::all_to_all, send, recv, count, dtype, ReduceOp::sum);
  }
  void send_recv(std::span<const Transfer> sends, std::span<const Transfer> recvs, DType dtype) override {
    w_.exchange_p2p(rank_, sends, recvs, dtype);
  }
  void synchronize() override {}  // every call completed before it returned (or, in lockstep, by the driver)
  // The world's memory, each local operation charged to this rank's virtual clock.
  Memory& memory() override { return mem_; }

 private:
  // The virtual clock charges local copies as the clock profile prices them (its copy bandwidth).
  // Only this rank's thread writes its own clock outside a collective. Storage and reductions
  // (the world's, inside collectives) go to the world's memory uncharged.
  class ClockedMemory final : public Memory {
   public:
    ClockedMemory(SimulatedWorld::Impl& w, std::int64_t rank) : w_(w), rank_(rank) {}
    void* allocate(std::size_t bytes) override { return w_.mem->allocate(bytes); }
    void release(void* p) noexcept override { w_.mem->release(p); }
    void upload(void* dst, const void* src, std::size_t bytes) override { w_.mem->upload(dst, src, bytes); }
    void download(void* dst, const void* src, std::size_t bytes) override { w_.mem->download(dst, src, bytes); }
    void wait() override { w_.mem->wait(); }
    bool supports(Collective c, DType t, ReduceOp op) const override { return w_.mem->supports(c, t, op); }
    void reduce(DType t, ReduceOp op, void* out, std::span<const void* const> in, std::int64_t n) override {
      w_.mem->reduce(t, op, out, in, n);
    }
    void copy(void* dst, const void* src, std::int64_t bytes) override {
      w_.mem->copy(dst, src, bytes);
      charge(static_cast<double>(bytes));
    }
    void fill(void* dst, DType dtype, std::int64_t count, double value) override {
      w_.mem->fill(dst, dtype, count, value);
      charge(static_cast<double>(count) * static_cast<double>(itemsize(dtype)));
    }
    void copy_strided(void* dst, const void* src, std::int64_t run_bytes, std::span<const std::int64_t> count,
                      std::span<const std::int64_t> dst_stride, std::span<const std::int64_t> src_stride) override {
      w_.mem->copy_strided(dst, src, run_bytes, count, dst_stride, src_stride);
      double bytes = static_cast<double>(run_bytes);
      for (auto c : count) bytes *= static_cast<double>(c);
      charge(bytes);
    }

   private:
    void charge(double bytes) {
      if (!w_.options.clock_profile || bytes <= 0) return;
      Traffic t;
      t.kind = Traffic::Kind::local;
      t.copy_bytes = bytes;
      w_.clock[static_cast<std::size_t>(rank_)] += w_.options.clock_profile->time(t).copy_us;
    }
    SimulatedWorld::Impl& w_;
    std::int64_t rank_;
  };
  SimulatedWorld::Impl& w_;
  std::int64_t rank_;
  ClockedMemory mem_{w_, rank_};
};

void SimulatedWorld::Impl::run(Op& p, std::int64_t n) {
  const auto bytes = p.count * static_cast<std::int64_t>(itemsize(p.dtype));
  auto at = [&](const void* base, std::int64_t k) { return static_cast<const char*>(base) + k * bytes; };
  auto at_mut = [&](void* base, std::int64_t k) { return static_cast<char*>(base) + k * bytes; };
  const auto u = [](std::int64_t q) { return static_cast<std::size_t>(q); };
  switch (*p.kind) {
    case Collective::all_gather:
      for (std::int64_t q = 0; q < n; ++q)
        for (std::int64_t s = 0; s < n; ++s) mem->copy(at_mut(p.recv[u(q)], s), p.send[u(s)], bytes);
      break;
    case Collective::reduce_scatter: {
      std::vector<const void*> in(u(n));
      for (std::int64_t q = 0; q < n; ++q) {
        for (std::int64_t s = 0; s < n; ++s) in[u(s)] = at(p.send[u(s)], q);
        mem->reduce(p.dtype, p.op, p.recv[u(q)], in, p.count);
      }
      break;
    }
    case Collective::all_reduce: {
      // Reduce into member 0's output, then copy it out: no member reads an output after it is
      // written (each rank's output is its own memory; in place, it is also its own input).
      mem->reduce(p.dtype, p.op, p.recv[0], p.send, p.count);
      for (std::int64_t q = 1; q < n; ++q) mem->copy(p.recv[u(q)], p.recv[0], bytes);
      break;
    }
    case Collective::all_to_all:
      for (std::int64_t q = 0; q < n; ++q)
        for (std::int64_t s = 0; s < n; ++s) mem->copy(at_mut(p.recv[u(q)], s), at(p.send[u(s)], q), bytes);
      break;
    default: break;
  }
}

void SimulatedWorld::Impl::collective(std::int64_t rank, const Group& g, Collective kind, const void* send, void* recv,
                                      std::int64_t count, DType dtype, ReduceOp op) {
  const auto coord = mesh.coord_of_rank(rank);
  std::vector<std::int64_t> key;
  std::vector<char> in_group(static_cast<std::size_t>(mesh.ndim()), 0);
  std::int64_t members = 1, position = 0;
  for (int m : g.mesh_dims) {
    if (m < 0 || m >= mesh.ndim()) throw InputError(fmt::format("group names mesh dim {}, out of range", m));
    if (in_group[static_cast<std::size_t>(m)]) throw InputError(fmt::format("group names mesh dim {} twice", m));
    in_group[static_cast<std::size_t>(m)] = 1;
    key.push_back(m);
    members *= mesh.size(m);
    position = position * mesh.size(m) + coord[static_cast<std::size_t>(m)];
  }
  if (count < 0) throw InputError(fmt::format("{} with a negative count {}", kind_name(kind), count));
  key.push_back(-1);
  for (int m = 0; m < mesh.ndim(); ++m)
    if (!in_group[static_cast<std::size_t>(m)]) key.push_back(coord[static_cast<std::size_t>(m)]);
  const auto pos = static_cast<std::size_t>(position);
  const std::string what = fmt::format("{} over {} ({} elements of {})", kind_name(kind), describe(mesh, g.mesh_dims),
                                       count, to_string(dtype));

  std::unique_lock lock(mu);
  auto [it, fresh] = channels.try_emplace(key);
  Channel& ch = it->second;
  if (fresh) {
    ch.dims = g.mesh_dims;
    ch.next.assign(static_cast<std::size_t>(members), 0);
    std::vector<std::int64_t> c = coord;
    for (std::int64_t q = 0; q < members; ++q) {
      std::int64_t rem = q;
      for (std::size_t i = g.mesh_dims.size(); i-- > 0;) {
        const int m = g.mesh_dims[i];
        c[static_cast<std::size_t>(m)] = rem % mesh.size(m);
        rem /= mesh.size(m);
      }
      ch.member_ranks.push_back(mesh.rank_at(c));
    }
  }
  const std::int64_t index = ch.next[pos]++;
  while (index - ch.base >= static_cast<std::int64_t>(ch.ops.size())) ch.ops.emplace_back();
  Op& p = ch.ops[static_cast<std::size_t>(index - ch.base)];
  if (!p.kind) {
    p.kind = kind;
    p.count = count;
    p.dtype = dtype;
    p.op = op;
    p.send.assign(static_cast<std::size_t>(members), nullptr);
    p.recv.assign(static_cast<std::size_t>(members), nullptr);
    p.present.assign(static_cast<std::size_t>(members), 0);
  } else if (p.error.empty() && (p.kind != kind || p.count != count || p.dtype != dtype || p.op != op)) {
    std::int64_t other = -1;
    for (std::size_t q = 0; q < p.present.size(); ++q)
      if (p.present[q]) other = ch.member_ranks[q];
    p.error = fmt::format("ranks disagree on a collective: rank {} issued {}{}, while rank {} issued {} over the same "
                          "group ({} elements of {}{})",
                          rank, what, reduces(kind) ? fmt::format(" op {}", to_string(op)) : "",
                          other, kind_name(*p.kind), p.count, to_string(p.dtype),
                          reduces(*p.kind) ? fmt::format(", op {}", to_string(p.op)) : "");
  }
  p.send[pos] = send ? send : static_cast<const void*>(recv);
  p.recv[pos] = recv;
  p.present[pos] = 1;
  ++p.arrived;
  auto leave = [&] {
    if (++p.left == members) {
      while (!ch.ops.empty() && ch.ops.front().left == members) {
        ch.ops.pop_front();
        ++ch.base;
      }
    }
  };
  if (!p.error.empty()) {
    const std::string err = p.error;
    wake(ch.member_ranks);
    leave();
    throw BackendError(err);
  }
  if (p.arrived == members) {
    if (lockstep) {
      run(p, members);
    } else {
      lock.unlock();  // members are blocked in their calls: their buffers stay put
      std::string failure;
      try {
        run(p, members);
      } catch (const std::exception& e) {
        failure = e.what();
      }
      lock.lock();
      if (!failure.empty()) p.error = fmt::format("{} failed: {}", what, failure);
    }
    p.done = true;
    ++collectives_run;
    if (options.clock_profile) {
      const Collective c = *p.kind;
      const double item = static_cast<double>(p.count) * static_cast<double>(itemsize(p.dtype));
      const double bytes = c == Collective::all_reduce ? item : item * static_cast<double>(members);
      std::uint64_t id = static_cast<std::uint64_t>(index) * 0x100000001b3ULL;
      for (auto k : key) id = (id ^ static_cast<std::uint64_t>(k + 7)) * 0x100000001b3ULL;
      double start = 0;
      for (auto r : ch.member_ranks) start = std::max(start, clock[static_cast<std::size_t>(r)]);
      const double end = start + clock_step(c, ch.dims, members, bytes, id);
      for (auto r : ch.member_ranks) clock[static_cast<std::size_t>(r)] = end;
    }
    wake(ch.member_ranks);
  } else if (!lockstep) {
    const auto until = deadline();
    std::int64_t gone = -1;
    const bool ok = cv_of(rank).wait_until(lock, until, [&] {
      if (p.done || !p.error.empty()) return true;
      gone = failed_among(ch.member_ranks, &p.present);
      return gone >= 0;
    });
    if (ok && !p.done && p.error.empty() && gone >= 0) {
      p.error = fmt::format("{} on rank {}: rank {} of its group failed before arriving: {}", what, rank, gone,
                            failed[static_cast<std::size_t>(gone)]);
      wake(ch.member_ranks);
    }
    if (!ok) {
      std::vector<std::int64_t> missing;
      for (std::size_t q = 0; q < p.present.size(); ++q)
        if (!p.present[q]) missing.push_back(ch.member_ranks[q]);
      p.error = fmt::format("{} timed out after {} ms on rank {}: {} {} of its group did not arrive", what,
                            options.timeout.count(), rank, missing.size() == 1 ? "rank" : "ranks", rank_list(missing));
      wake(ch.member_ranks);
    }
  }
  if (lockstep) {
    // nobody waits in lockstep: each call leaves at once; flush() checks completion
    leave();
    return;
  }
  const std::string err = p.error;
  leave();
  if (!err.empty()) throw BackendError(err);
}

void SimulatedWorld::Impl::exchange_p2p(std::int64_t rank, std::span<const Transfer> sends,
                                        std::span<const Transfer> recvs, DType dtype) {
  const auto check_peer = [&](std::int64_t peer) {
    if (peer < 0 || peer >= mesh.num_ranks())
      throw InputError(fmt::format("rank {} names peer {}, outside the mesh's {} ranks", rank, peer, mesh.num_ranks()));
  };
  for (const auto& t : sends) check_peer(t.peer);
  for (const auto& t : recvs) check_peer(t.peer);
  const auto isz = static_cast<std::int64_t>(itemsize(dtype));
  std::unique_lock lock(mu);
  if (lockstep) {
    for (const auto& s : sends) p2p.push_back({rank, s.peer, s.buffer, s.count, dtype, true});
    for (const auto& r : recvs) p2p.push_back({r.peer, rank, r.buffer, r.count, dtype, false});
    return;
  }
  std::vector<std::shared_ptr<Message>> posted;
  for (const auto& s : sends) {
    auto m = std::make_shared<Message>(Message{s.buffer, s.count, dtype, false, false, {}, clock[static_cast<std::size_t>(rank)]});
    mail[{rank, s.peer}].push_back(m);
    posted.push_back(std::move(m));
    cv_of(s.peer).notify_one();
  }
  // Leaving by an error, this rank's buffers go away with its caller: its posted messages are
  // withdrawn, and one a receiver is copying out of is waited for (the copy is local: brief).
  struct Withdraw {
    Impl& w;
    std::unique_lock<std::mutex>& lock;
    std::int64_t rank;
    std::span<const Transfer> sends;
    std::vector<std::shared_ptr<Message>>& posted;
    bool done = false;
    ~Withdraw() {
      if (done) return;
      if (!lock.owns_lock()) lock.lock();
      for (std::size_t i = 0; i < posted.size(); ++i) {
        const auto& m = posted[i];
        if (!m->claimed) {
          auto& box = w.mail[{rank, sends[i].peer}];
          box.erase(std::remove(box.begin(), box.end(), m), box.end());
        } else {
          w.cv_of(rank).wait(lock, [&] { return m->taken || !m->error.empty(); });
        }
      }
    }
  } withdraw{*this, lock, rank, sends, posted};
  const auto until = deadline();
  // Take messages in whatever order they arrive: one wake-up may find several.
  std::vector<char> got(recvs.size(), 0);
  // what the cost model prices for a direct step: this rank's peers (the larger of its send and
  // receive peer counts) and bytes (the larger of what it sends and receives)
  // (distinct peers: a batch's coalesced stage lists one transfer per tensor to the same peer)
  double start = clock[static_cast<std::size_t>(rank)], sent = 0, received = 0;
  auto distinct_peers = [rank](std::span<const Transfer> ts) {
    std::vector<std::int64_t> peers;
    for (const auto& t : ts)
      if (t.peer != rank) peers.push_back(t.peer);
    std::sort(peers.begin(), peers.end());
    return static_cast<std::int64_t>(std::unique(peers.begin(), peers.end()) - peers.begin());
  };
  const std::int64_t send_peers = distinct_peers(sends), recv_peers = distinct_peers(recvs);
  for (const auto& s : sends) sent += static_cast<double>(s.count * isz);
  for (const auto& r : recvs) received += static_cast<double>(r.count * isz);
  // Several transfers between one pair of ranks are matched in the order listed: a receive waits
  // for the earlier ones from the same peer.
  std::vector<std::ptrdiff_t> before(recvs.size(), -1);
  for (std::size_t i = 0; i < recvs.size(); ++i)
    for (std::size_t k = i; k-- > 0;)
      if (recvs[k].peer == recvs[i].peer) {
        before[i] = static_cast<std::ptrdiff_t>(k);
        break;
      }
  std::size_t remaining = recvs.size();
  while (remaining > 0) {
    bool progress = false;
    for (std::size_t i = 0; i < recvs.size(); ++i) {
      if (got[i] || (before[i] >= 0 && !got[static_cast<std::size_t>(before[i])])) continue;
      const auto& r = recvs[i];
      auto& box = mail[{r.peer, rank}];
      if (box.empty()) continue;
      auto m = box.front();
      box.pop_front();
      m->claimed = true;
      if (m->count != r.count || m->dtype != dtype) {
        m->error = fmt::format("direct exchange: rank {} sends {} elements of {} to rank {}, which expects {} of {}",
                               r.peer, m->count, to_string(m->dtype), rank, r.count, to_string(dtype));
        cv_of(r.peer).notify_one();
        throw BackendError(m->error);
      }
      start = std::max(start, m->sent_at);
      lock.unlock();
      mem->copy(r.buffer, m->buffer, r.count * isz);
      lock.lock();
      m->taken = true;
      cv_of(r.peer).notify_one();
      got[i] = 1;
      --remaining;
      progress = true;
    }
    if (remaining == 0 || progress) continue;
    for (std::size_t i = 0; i < recvs.size(); ++i)
      if (!got[i] && mail[{recvs[i].peer, rank}].empty() && !failed.empty() &&
          !failed[static_cast<std::size_t>(recvs[i].peer)].empty())
        throw BackendError(fmt::format("direct exchange on rank {}: rank {}, which was to send it data, failed: {}", rank,
                                       recvs[i].peer, failed[static_cast<std::size_t>(recvs[i].peer)]));
    if (cv_of(rank).wait_until(lock, until) == std::cv_status::timeout) {
      bool any = false;
      for (std::size_t i = 0; i < recvs.size(); ++i) any = any || (!got[i] && !mail[{recvs[i].peer, rank}].empty());
      if (any) continue;
      std::vector<std::int64_t> missing;
      for (std::size_t i = 0; i < recvs.size(); ++i)
        if (!got[i]) missing.push_back(recvs[i].peer);
      throw BackendError(fmt::format("direct exchange timed out after {} ms on rank {}: {} {} never sent the data it "
                                     "expects", options.timeout.count(), rank, missing.size() == 1 ? "rank" : "ranks",
                                     rank_list(missing)));
    }
  }
  for (std::size_t i = 0; i < posted.size(); ++i) {
    const auto& m = posted[i];
    const auto peer = static_cast<std::size_t>(sends[i].peer);
    const bool ok = cv_of(rank).wait_until(
        lock, until, [&] { return m->taken || !m->error.empty() || (!failed.empty() && !failed[peer].empty()); });
    if (ok && !m->taken && m->error.empty()) {
      auto& box = mail[{rank, sends[i].peer}];
      box.erase(std::remove(box.begin(), box.end(), m), box.end());
      throw BackendError(fmt::format("direct exchange on rank {}: rank {}, which was to receive its data, failed: {}",
                                     rank, sends[i].peer, failed[peer]));
    }
    if (!ok) {
      // withdraw it, so a later exchange does not pair with it
      auto& box = mail[{rank, sends[i].peer}];
      box.erase(std::remove(box.begin(), box.end(), m), box.end());
      throw BackendError(fmt::format("direct exchange timed out after {} ms on rank {}: rank {} did not receive the {} "
                                     "elements sent to it", options.timeout.count(), rank, sends[i].peer, m->count));
    }
    if (!m->error.empty()) throw BackendError(m->error);
  }
  withdraw.done = true;
  if (options.clock_profile && (!sends.empty() || !recvs.empty())) {
    // the link: the mesh dims some transfer of this rank crosses
    const auto me = mesh.coord_of_rank(rank);
    std::vector<int> crossed;
    for (const auto* list : {&sends, &recvs})
      for (const auto& t : *list) {
        const auto peer = mesh.coord_of_rank(t.peer);
        for (int m = 0; m < mesh.ndim(); ++m)
          if (peer[static_cast<std::size_t>(m)] != me[static_cast<std::size_t>(m)] &&
              std::find(crossed.begin(), crossed.end(), m) == crossed.end())
            crossed.push_back(m);
      }
    clock[static_cast<std::size_t>(rank)] =
        start + clock_direct(crossed, std::max(send_peers, recv_peers), std::max(sent, received),
                             static_cast<std::uint64_t>(rank) * 0x9e3779b97f4a7c15ULL ^ static_cast<std::uint64_t>(start * 1e3));
  }
}

void SimulatedWorld::Impl::flush() {
  for (const auto& [key, ch] : channels)
    for (const auto& p : ch.ops)
      if (!p.done) {
        std::vector<std::int64_t> missing, present;
        for (std::size_t q = 0; q < p.present.size(); ++q) (p.present[q] ? present : missing).push_back(ch.member_ranks[q]);
        throw BackendError(fmt::format("{} over {} was issued by ranks {} but not by ranks {}", kind_name(*p.kind),
                                       describe(mesh, ch.dims), rank_list(present), rank_list(missing)));
      }
  // Pair the k-th recv of each ordered pair (from, to) with its k-th send: transfers between one
  // pair are matched in the order listed.
  std::vector<char> used(p2p.size(), 0);
  for (const auto& r : p2p) {
    if (r.is_send) continue;
    std::size_t match = p2p.size();
    for (std::size_t k = 0; k < p2p.size(); ++k)
      if (!used[k] && p2p[k].is_send && p2p[k].from == r.from && p2p[k].to == r.to) {
        match = k;
        break;
      }
    if (match == p2p.size()) throw BackendError(fmt::format("rank {} expects data from rank {}, which sends none", r.to, r.from));
    used[match] = 1;
    if (p2p[match].count != r.count)
      throw BackendError(fmt::format("rank {} sends {} elements to rank {}, which expects {}", r.from, p2p[match].count, r.to, r.count));
    mem->copy(r.buffer, p2p[match].buffer, r.count * static_cast<std::int64_t>(itemsize(r.dtype)));
  }
  for (std::size_t k = 0; k < p2p.size(); ++k)
    if (p2p[k].is_send && !used[k])
      throw BackendError(fmt::format("rank {} sends to rank {}, which expects nothing", p2p[k].from, p2p[k].to));
  p2p.clear();
}

void SimulatedWorld::Impl::run_threads(const std::function<void(std::int64_t, Communicator&)>& fn) {
  const auto R = mesh.num_ranks();
  std::unique_lock lock(pool.mu);
  if (pool.job) throw InputError("run_rank_threads: the world is already running rank threads");
  if (pool.threads.empty()) {
    for (std::int64_t r = 0; r < R; ++r) {
      Communicator* c = comms[static_cast<std::size_t>(r)].get();
      try {
      pool.threads.emplace_back([this, r, c] {
        std::uint64_t seen = 0;
        std::unique_lock l(pool.mu);
        while (true) {
          pool.work.wait(l, [&] { return pool.stop || pool.generation != seen; });
          if (pool.stop) return;
          seen = pool.generation;
          const auto* f = pool.job;
          l.unlock();
          std::exception_ptr err;
          try {
            (*f)(r, *c);
          } catch (...) {
            err = std::current_exception();
          }
          if (err) note_failure(r, err);
          l.lock();
          pool.errors[static_cast<std::size_t>(r)] = err;
          if (--pool.running == 0) pool.finished.notify_all();
        }
      });
      } catch (const std::system_error& e) {
        // the threads started so far wait for work: stop them, then report (never terminate)
        pool.stop = true;
        lock.unlock();
        pool.work.notify_all();
        for (auto& t : pool.threads) t.join();
        lock.lock();
        pool.threads.clear();
        pool.stop = false;
        throw BackendError(fmt::format("the simulated world could not start the thread of rank {} ({} threads needed, "
                                       "one per rank): {}", r, R, e.what()));
      }
    }
  }
  pool.errors.assign(static_cast<std::size_t>(R), nullptr);
  {
    std::lock_guard world_lock(mu);
    failed.assign(static_cast<std::size_t>(R), std::string());
    failure_order.clear();
  }
  pool.job = &fn;
  pool.running = R;
  ++pool.generation;
  pool.work.notify_all();
  pool.finished.wait(lock, [&] { return pool.running == 0; });
  pool.job = nullptr;
  // the first rank to fail: the others failed because of it (or on their own, later)
  std::int64_t first = -1;
  {
    std::lock_guard world_lock(mu);
    if (!failure_order.empty()) first = failure_order.front();
    failed.clear();
  }
  if (first >= 0 && pool.errors[static_cast<std::size_t>(first)]) {
    const auto& e = pool.errors[static_cast<std::size_t>(first)];
    try {
      std::rethrow_exception(e);
    } catch (const Error& x) {
      // dtensor's own errors, as thrown, with the rank where they do not name it
      const std::string text = x.what();
      if (text.find(fmt::format("rank {}", first)) != std::string::npos) throw;
      if (dynamic_cast<const InputError*>(&x)) throw InputError(fmt::format("rank {}: {}", first, text));
      if (dynamic_cast<const BackendError*>(&x)) throw BackendError(fmt::format("rank {}: {}", first, text));
      throw;
    } catch (const std::bad_alloc&) {
      throw BackendError(fmt::format("rank {} of the simulated world ran out of memory (std::bad_alloc); the ranks "
                                     "waiting on it stopped", first));
    } catch (const std::exception& x) {
      throw BackendError(fmt::format("rank {} of the simulated world failed: {}", first, x.what()));
    }
  }
  for (const auto& e : pool.errors)
    if (e) std::rethrow_exception(e);
}

void SimulatedWorld::Impl::note_failure(std::int64_t rank, const std::exception_ptr& err) {
  std::string text;
  try {
    std::rethrow_exception(err);
  } catch (const std::bad_alloc&) {
    text = "out of memory (std::bad_alloc)";
  } catch (const std::exception& e) {
    text = e.what();
  } catch (...) {
    text = "an unknown exception";
  }
  std::lock_guard lock(mu);
  if (failed.empty()) return;  // not a run_rank_threads job
  failed[static_cast<std::size_t>(rank)] = text;
  failure_order.push_back(rank);
  for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) cv_of(r).notify_all();
}

SimulatedWorld::Impl::~Impl() {
  {
    std::lock_guard lock(pool.mu);
    pool.stop = true;
  }
  pool.work.notify_all();
  for (auto& t : pool.threads) t.join();
}

void run_rank_threads(SimulatedWorld& world, const std::function<void(std::int64_t, Communicator&)>& fn) {
  for (std::int64_t r = 0; r < world.mesh().num_ranks(); ++r) (void)world.communicator(r);
  WorldAccess::impl(world).run_threads(fn);
}

SimulatedWorld::SimulatedWorld(Mesh mesh, WorldOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->mesh = std::move(mesh);
  impl_->options = std::move(options);
  impl_->mem = impl_->options.memory ? impl_->options.memory : std::shared_ptr<Memory>(&host_memory(), [](Memory*) {});
  if (impl_->options.timeout.count() <= 0)
    throw InputError(fmt::format("the world's timeout must be positive, not {} ms", impl_->options.timeout.count()));
  if (!(impl_->options.clock_noise >= 0 && impl_->options.clock_noise < 1))
    throw InputError(fmt::format("the virtual clock's noise must be in [0, 1), not {}", impl_->options.clock_noise));
  impl_->comms.resize(static_cast<std::size_t>(impl_->mesh.num_ranks()));
  impl_->clock.assign(static_cast<std::size_t>(impl_->mesh.num_ranks()), 0.0);
  for (std::int64_t r = 0; r < impl_->mesh.num_ranks(); ++r)
    impl_->cv.push_back(std::make_unique<std::condition_variable>());
}
SimulatedWorld::~SimulatedWorld() = default;

const Mesh& SimulatedWorld::mesh() const noexcept { return impl_->mesh; }

Communicator& SimulatedWorld::communicator(std::int64_t rank) {
  if (rank < 0 || rank >= impl_->mesh.num_ranks())
    throw InputError(fmt::format("rank {} is outside mesh {} ({} ranks)", rank, impl_->mesh.str(), impl_->mesh.num_ranks()));
  std::lock_guard lock(impl_->mu);
  auto& c = impl_->comms[static_cast<std::size_t>(rank)];
  if (!c) c = std::make_unique<ThreadsCommunicator>(*impl_, rank);
  return *c;
}

double SimulatedWorld::clock_us(std::int64_t rank) const {
  if (rank < 0 || rank >= impl_->mesh.num_ranks())
    throw InputError(fmt::format("rank {} is outside the world's {} ranks", rank, impl_->mesh.num_ranks()));
  std::lock_guard lock(impl_->mu);
  return impl_->clock[static_cast<std::size_t>(rank)];
}

std::int64_t SimulatedWorld::collectives_run() const noexcept {
  std::lock_guard lock(impl_->mu);
  return impl_->collectives_run;
}

// ---------------------------------------------------------------- the all-ranks driver

void execute_all_ranks(std::span<const Executor* const> executors, SimulatedWorld& world,
                       std::span<const Buffers> buffers) {
  auto& W = WorldAccess::impl(world);
  if (executors.size() != buffers.size())
    throw InputError(fmt::format("execute_all_ranks got {} executors and {} buffers", executors.size(), buffers.size()));
  std::vector<ExecutorSteps> ex;
  ex.reserve(executors.size());
  for (const auto* e : executors) ex.emplace_back(*e);
  for (std::size_t i = 0; i < ex.size(); ++i) {
    ex[i].check(buffers[i]);
    if (&ex[i].communicator() != &world.communicator(ex[i].rank()))
      throw InputError(fmt::format("executor {} (rank {}) was not prepared on this world", i, ex[i].rank()));
  }
  struct Lockstep {
    SimulatedWorld::Impl& w;
    explicit Lockstep(SimulatedWorld::Impl& x) : w(x) {
      std::lock_guard lock(w.mu);
      w.lockstep = true;
    }
    ~Lockstep() {
      std::lock_guard lock(w.mu);
      w.lockstep = false;
      w.channels.clear();
      w.p2p.clear();
    }
  } guard(W);
  const std::size_t S = ex.empty() ? 0 : ex[0].size();
  for (const auto& e : ex)
    if (e.size() != S) throw InputError("execute_all_ranks: the executors run plans of different lengths");
  if (S == 0) {
    for (std::size_t i = 0; i < ex.size(); ++i)
      ex[i].communicator().copy(buffers[i].output.data(), buffers[i].input.data(), static_cast<std::int64_t>(buffers[i].input.size()));
    return;
  }
  for (std::size_t k = 0; k < S; ++k) {
    bool any_comm = false;
    for (std::size_t i = 0; i < ex.size(); ++i) {
      ex[i].before(buffers[i], k);
      ex[i].issue(buffers[i], k);
      any_comm = any_comm || ex[i].communicates(k);
    }
    if (any_comm) W.flush();
    for (std::size_t i = 0; i < ex.size(); ++i) ex[i].after(buffers[i], k);
  }
}

}  // namespace dtensor

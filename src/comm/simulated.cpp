#include "dtensor/simulated.hpp"

#include <algorithm>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "dtensor/error.hpp"
#include "dtensor/scalar.hpp"

namespace dtensor {

enum CollKind : int { kAllGather, kReduceScatter, kAllReduce, kAllToAll };

struct SimulatedCommunicator::Pending {
  int kind;
  std::int64_t count;
  DType dtype;
  ReduceOp op;
  std::int64_t members;
  std::int64_t arrived = 0;
  std::vector<const void*> send;
  std::vector<void*> recv;
};

struct SimulatedCommunicator::P2P {
  std::int64_t from, to;
  void* buffer;
  std::int64_t count;
  DType dtype;
  bool is_send;
};

SimulatedCommunicator::SimulatedCommunicator(Mesh mesh) : mesh_(std::move(mesh)) {}
SimulatedCommunicator::~SimulatedCommunicator() = default;

SimulatedCommunicator::Pending& SimulatedCommunicator::pending_for(std::int64_t rank, const Group& g, int kind,
                                                                   std::int64_t count, DType dtype, ReduceOp op,
                                                                   std::int64_t& position) {
  const auto coord = mesh_.coord_of_rank(rank);
  std::vector<std::int64_t> key{kind};
  std::vector<char> in_group(static_cast<std::size_t>(mesh_.ndim()), 0);
  std::int64_t members = 1;
  position = 0;
  for (int m : g.mesh_dims) {
    if (m < 0 || m >= mesh_.ndim()) throw Error(fmt::format("group names mesh dim {}, out of range", m));
    if (in_group[static_cast<std::size_t>(m)]) throw Error(fmt::format("group names mesh dim {} twice", m));
    in_group[static_cast<std::size_t>(m)] = 1;
    key.push_back(m);
    members *= mesh_.size(m);
    position = position * mesh_.size(m) + coord[static_cast<std::size_t>(m)];
  }
  key.push_back(-1);
  for (int m = 0; m < mesh_.ndim(); ++m)
    if (!in_group[static_cast<std::size_t>(m)]) key.push_back(coord[static_cast<std::size_t>(m)]);
  auto& slot = pending_[key];
  if (!slot) {
    slot = std::make_unique<Pending>();
    *slot = Pending{kind, count, dtype, op, members, 0, std::vector<const void*>(static_cast<std::size_t>(members)),
                    std::vector<void*>(static_cast<std::size_t>(members))};
  }
  if (slot->count != count || slot->dtype != dtype || slot->op != op)
    throw Error(fmt::format("collective mismatch in a group: rank {} issued count {} ({}), others count {} ({})", rank,
                            count, to_string(dtype), slot->count, to_string(slot->dtype)));
  if (slot->send[static_cast<std::size_t>(position)] || slot->recv[static_cast<std::size_t>(position)])
    throw Error(fmt::format("rank {} issued the same collective twice before synchronize", rank));
  return *slot;
}

void SimulatedCommunicator::move(void* dst, const void* src, std::int64_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, static_cast<std::size_t>(bytes));
}
void SimulatedCommunicator::reduce_group(DType dtype, ReduceOp op, void* out, std::span<const void* const> inputs,
                                         std::int64_t count) {
  const auto n = static_cast<std::int64_t>(inputs.size());
  const bool narrow_float = dtype == DType::bf16 || dtype == DType::f16 || dtype == DType::f8e4m3 || dtype == DType::f8e5m2;
  if (narrow_float) {
    for (std::int64_t k = 0; k < count; ++k) {
      double acc = load_element(dtype, inputs[0], k);
      for (std::int64_t s = 1; s < n; ++s) {
        const double x = load_element(dtype, inputs[static_cast<std::size_t>(s)], k);
        switch (op) {
          case ReduceOp::sum: case ReduceOp::avg: acc += x; break;
          case ReduceOp::max: acc = std::max(acc, x); break;
          case ReduceOp::min: acc = std::min(acc, x); break;
          case ReduceOp::product: acc *= x; break;
        }
      }
      store_element(dtype, out, k, op == ReduceOp::avg ? acc / static_cast<double>(n) : acc);
    }
    return;
  }
  move(out, inputs[0], count * static_cast<std::int64_t>(itemsize(dtype)));
  for (std::int64_t s = 1; s < n; ++s) reduce_into(dtype, op, out, inputs[static_cast<std::size_t>(s)], count);
  if (op == ReduceOp::avg) finish_average(dtype, out, count, n);
}

void SimulatedCommunicator::run(Pending& p) {
  const auto n = p.members;
  const auto bytes = p.count * static_cast<std::int64_t>(itemsize(p.dtype));
  auto at = [&](const void* base, std::int64_t k) { return static_cast<const char*>(base) + k * bytes; };
  auto at_mut = [&](void* base, std::int64_t k) { return static_cast<char*>(base) + k * bytes; };
  switch (p.kind) {
    case kAllGather:
      for (std::int64_t q = 0; q < n; ++q)
        for (std::int64_t s = 0; s < n; ++s)
          move(at_mut(p.recv[static_cast<std::size_t>(q)], s), p.send[static_cast<std::size_t>(s)], bytes);
      break;
    case kReduceScatter:
      for (std::int64_t q = 0; q < n; ++q) {
        std::vector<const void*> in;
        for (std::int64_t s = 0; s < n; ++s) in.push_back(at(p.send[static_cast<std::size_t>(s)], q));
        reduce_group(p.dtype, p.op, p.recv[static_cast<std::size_t>(q)], in, p.count);
      }
      break;
    case kAllReduce: {
      // Reduce into member 0's output, then copy it out: no member reads an output after it is written.
      void* out = p.recv[0];
      reduce_group(p.dtype, p.op, out, p.send, p.count);
      for (std::int64_t q = 1; q < n; ++q) move(p.recv[static_cast<std::size_t>(q)], out, bytes);
      break;
    }
    case kAllToAll:
      for (std::int64_t q = 0; q < n; ++q)
        for (std::int64_t s = 0; s < n; ++s)
          move(at_mut(p.recv[static_cast<std::size_t>(q)], s), at(p.send[static_cast<std::size_t>(s)], q), bytes);
      break;
    default: break;
  }
  ++collectives_run_;
}

#define DTENSOR_SIM_COLLECTIVE(KIND, OP)                                                  \
  std::int64_t pos = 0;                                                                   \
  auto& p = pending_for(rank, g, KIND, count, dtype, OP, pos);                            \
  p.send[static_cast<std::size_t>(pos)] = send ? send : static_cast<const void*>(recv);   \
  p.recv[static_cast<std::size_t>(pos)] = recv;                                           \
  if (++p.arrived == p.members) {                                                         \
    run(p);                                                                               \
    p.arrived = 0;                                                                        \
    std::fill(p.send.begin(), p.send.end(), nullptr);                                     \
    std::fill(p.recv.begin(), p.recv.end(), nullptr);                                     \
  }

void SimulatedCommunicator::all_gather(std::int64_t rank, const Group& g, const void* send, void* recv,
                                       std::int64_t count, DType dtype) {
  DTENSOR_SIM_COLLECTIVE(kAllGather, ReduceOp::sum)
}
void SimulatedCommunicator::reduce_scatter(std::int64_t rank, const Group& g, const void* send, void* recv,
                                           std::int64_t count, DType dtype, ReduceOp op) {
  DTENSOR_SIM_COLLECTIVE(kReduceScatter, op)
}
void SimulatedCommunicator::all_reduce(std::int64_t rank, const Group& g, const void* send, void* recv,
                                       std::int64_t count, DType dtype, ReduceOp op) {
  DTENSOR_SIM_COLLECTIVE(kAllReduce, op)
}
void SimulatedCommunicator::all_to_all(std::int64_t rank, const Group& g, const void* send, void* recv,
                                       std::int64_t count, DType dtype) {
  DTENSOR_SIM_COLLECTIVE(kAllToAll, ReduceOp::sum)
}
#undef DTENSOR_SIM_COLLECTIVE

void SimulatedCommunicator::send_recv(std::int64_t rank, std::span<const Transfer> sends,
                                      std::span<const Transfer> recvs, DType dtype) {
  for (const auto& s : sends) p2p_.push_back({rank, s.peer, s.buffer, s.count, dtype, true});
  for (const auto& r : recvs) p2p_.push_back({r.peer, rank, r.buffer, r.count, dtype, false});
}

void SimulatedCommunicator::synchronize() {
  for (const auto& [key, p] : pending_)
    if (p->arrived != 0)
      throw Error(fmt::format("a collective was issued by {} of the {} members of its group", p->arrived, p->members));
  // Pair every recv with the send of the same (from, to); one message per ordered pair.
  for (const auto& r : p2p_) {
    if (r.is_send) continue;
    const P2P* match = nullptr;
    for (const auto& s : p2p_)
      if (s.is_send && s.from == r.from && s.to == r.to) {
        if (match) throw Error(fmt::format("two sends from rank {} to rank {} in one exchange", r.from, r.to));
        match = &s;
      }
    if (!match) throw Error(fmt::format("rank {} expects data from rank {}, which sends none", r.to, r.from));
    if (match->count != r.count)
      throw Error(fmt::format("rank {} sends {} elements to rank {}, which expects {}", r.from, match->count, r.to, r.count));
    move(r.buffer, match->buffer, r.count * static_cast<std::int64_t>(itemsize(r.dtype)));
  }
  for (const auto& s : p2p_) {
    if (!s.is_send) continue;
    bool received = false;
    for (const auto& r : p2p_) received = received || (!r.is_send && r.from == s.from && r.to == s.to);
    if (!received) throw Error(fmt::format("rank {} sends to rank {}, which expects nothing", s.from, s.to));
  }
  p2p_.clear();
}

void SimulatedCommunicator::copy(void* dst, const void* src, std::int64_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, static_cast<std::size_t>(bytes));
}

void SimulatedCommunicator::fill(void* dst, DType dtype, std::int64_t count, double value) {
  if (count <= 0) return;  // an empty buffer may have no address at all
  if (value == 0.0) {
    std::memset(dst, 0, static_cast<std::size_t>(count * static_cast<std::int64_t>(itemsize(dtype))));
    return;
  }
  for (std::int64_t k = 0; k < count; ++k) store_element(dtype, dst, k, value);
}

namespace {
// Large strided copies write each destination line once: non-temporal stores skip the read for
// ownership that plain stores pay, which is most of the gap to one big memcpy.
void copy_run(char* d, const char* s, std::size_t n, bool streaming) {
#if defined(__SSE2__)
  if (streaming && n >= 1024 && (reinterpret_cast<std::uintptr_t>(d) % 16) == 0 && n % 64 == 0) {
    auto* dv = reinterpret_cast<__m128i*>(d);
    const auto* sv = reinterpret_cast<const __m128i*>(s);
    for (std::size_t k = 0; k < n / 16; k += 4) {
      const __m128i a = _mm_loadu_si128(sv + k), b = _mm_loadu_si128(sv + k + 1), c = _mm_loadu_si128(sv + k + 2),
                    e = _mm_loadu_si128(sv + k + 3);
      _mm_stream_si128(dv + k, a);
      _mm_stream_si128(dv + k + 1, b);
      _mm_stream_si128(dv + k + 2, c);
      _mm_stream_si128(dv + k + 3, e);
    }
    return;
  }
#endif
  (void)streaming;
  std::memcpy(d, s, n);
}
}  // namespace

void SimulatedCommunicator::copy_strided(void* dst, const void* src, std::int64_t run_bytes,
                                         std::span<const std::int64_t> count, std::span<const std::int64_t> dst_stride,
                                         std::span<const std::int64_t> src_stride) {
  const std::size_t nd = count.size();
  if (run_bytes <= 0) return;
  if (nd == 0) {
    std::memcpy(dst, src, static_cast<std::size_t>(run_bytes));
    return;
  }
  for (auto c : count)
    if (c == 0) return;
  std::int64_t idx[16] = {};
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  std::int64_t total = run_bytes;
  for (auto c : count) total *= c;
  const bool streaming = total >= (std::int64_t{8} << 20);  // larger than the caches
  while (true) {
    std::int64_t doff = 0, soff = 0;
    for (std::size_t k = 0; k < nd; ++k) {
      doff += idx[k] * dst_stride[k];
      soff += idx[k] * src_stride[k];
    }
    copy_run(d + doff, s + soff, static_cast<std::size_t>(run_bytes), streaming);
    std::size_t k = nd;
    while (k > 0) {
      --k;
      if (++idx[k] < count[k]) break;
      idx[k] = 0;
      if (k == 0) {
#if defined(__SSE2__)
        if (streaming) _mm_sfence();
#endif
        return;
      }
    }
  }
}

}  // namespace dtensor

// Checkpoint loading (load_plan.hpp, docs/checkpoint.md): every saved chunk read once, by the
// rank that makes the predicted load fastest (a rank that needs its bytes on ties), then every
// piece moved from its reader to the ranks whose target layout holds it.
#include "dtensor/load_plan.hpp"

#include <algorithm>
#include <optional>
#include <climits>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dtensor/error.hpp"
#include "dtensor/ragged_plan.hpp"
#include "load_fanout.hpp"
#include "placement/blocks.hpp"
#include "placement/hash.hpp"
#include "placement/json_fields.hpp"

namespace dtensor {
namespace {

constexpr std::int64_t kMaxEntries = std::int64_t{1} << 31;

std::string chunk_str(const SavedChunk& c) {
  return fmt::format("offsets {} sizes {}", shape_str(c.offsets), shape_str(c.sizes));
}

// The figures a load's reads and messages give (what plan_load records and check_load_figures()
// recomputes): bytes read in all, by the busiest reader and at best (balanced), bytes moved
// between ranks, the busiest rank's transfer and peers (a peer either way counts once) and, under
// `cost` (else left 0 and false), whether a message crosses hosts, the reads' time at the plan's
// storage parameters and the transfer's time: from a plan's entries (load_figures), or from a
// decision's chunks and their shared needer lists (decision_figures: never message by message).
struct LoadFigures {
  std::int64_t total_read = 0, busiest_read = 0, balanced_read = 0, moved = 0, busiest_transfer = 0, busiest_peers = 0;
  bool inter_host = false;
  double read_us = 0, transfer_us = 0;
};
// The figures' maxima and times from per-rank sums (reads, chunks opened, bytes sent and received,
// peers), `f` holding the totals (bytes read, moved, inter_host).
void finish_figures(LoadFigures& f, const Mesh& mesh, const StorageParams& st, std::span<const std::int64_t> rs,
                    std::span<const std::int64_t> opened, std::span<const std::int64_t> snt, std::span<const std::int64_t> rcv,
                    std::span<const std::int64_t> peers, std::int64_t largest, const CostModel* cost) {
  const auto N = mesh.num_ranks();
  const auto n = static_cast<std::size_t>(N);
  for (std::size_t u = 0; u < n; ++u) {
    f.busiest_read = std::max(f.busiest_read, rs[u]);
    f.busiest_transfer = std::max({f.busiest_transfer, snt[u], rcv[u]});
    f.busiest_peers = std::max(f.busiest_peers, peers[u]);
    if (cost)
      f.read_us = std::max(f.read_us, static_cast<double>(rs[u]) / (st.read_bw_GBps * 1e3) +
                                          static_cast<double>(opened[u]) * st.read_alpha_us);
  }
  f.balanced_read = std::max((f.total_read + N - 1) / N, largest);
  if (cost) {
    Traffic tr;
    if (f.moved == 0) {
      tr.kind = Traffic::Kind::local;
    } else {
      tr.kind = Traffic::Kind::direct;
      tr.peers = f.busiest_peers;
      tr.bytes = static_cast<double>(f.busiest_transfer);
      tr.inter_host = f.inter_host;
    }
    f.transfer_us = cost->time(tr).total_us();
  }
}

// Per rank, its distinct partners either way, from `for_each_pair(f)` calling f(from, to) for
// every pair with a message (from != to; a pair may come more than once; called twice, the same
// pairs in the same order): a CSR of partners counted with a stamp per partner, O(pairs + ranks),
// no sort. A pair repeated right after itself (per receiver, the sender of its last pair) is not
// listed again: the lists stay short when pairs come grouped by sender.
template <class Pairs>
std::vector<std::int64_t> peers_of(std::size_t n, const Pairs& for_each_pair) {
  std::vector<std::size_t> start(n + 1, 0);
  std::vector<std::int64_t> last_from(n, -1);
  for_each_pair([&](std::int64_t from, std::int64_t to) {
    if (last_from[static_cast<std::size_t>(to)] == from) return;
    last_from[static_cast<std::size_t>(to)] = from;
    ++start[static_cast<std::size_t>(from) + 1];
    ++start[static_cast<std::size_t>(to) + 1];
  });
  for (std::size_t u = 0; u < n; ++u) start[u + 1] += start[u];
  std::vector<std::int32_t> partner(start[n]);
  std::vector<std::size_t> at(start.begin(), start.end() - 1);
  std::fill(last_from.begin(), last_from.end(), -1);
  for_each_pair([&](std::int64_t from, std::int64_t to) {
    if (last_from[static_cast<std::size_t>(to)] == from) return;
    last_from[static_cast<std::size_t>(to)] = from;
    partner[at[static_cast<std::size_t>(from)]++] = static_cast<std::int32_t>(to);
    partner[at[static_cast<std::size_t>(to)]++] = static_cast<std::int32_t>(from);
  });
  std::vector<std::int64_t> peers(n, 0), stamp(n, -1);
  for (std::size_t u = 0; u < n; ++u)
    for (std::size_t i = start[u]; i < start[u + 1]; ++i)
      if (auto& sp = stamp[static_cast<std::size_t>(partner[i])]; sp != static_cast<std::int64_t>(u)) {
        sp = static_cast<std::int64_t>(u);
        ++peers[u];
      }
  return peers;
}

// Per rank, its host under `cost` (empty without one).
std::vector<std::int64_t> hosts_of(std::size_t n, const CostModel* cost) {
  std::vector<std::int64_t> host;
  if (cost)
    for (std::size_t u = 0; u < n; ++u) host.push_back(static_cast<std::int64_t>(u) / cost->devices_per_host);
  return host;
}

// A plan's figures, from its entries (message by message: what check_load_figures recomputes a
// plan's recorded figures with). `itemsize_of(t)`: tensor t's element size.
template <class ItemSize>
LoadFigures load_figures(const LoadPlan& plan, const ItemSize& itemsize_of, const CostModel* cost) {
  const auto n = static_cast<std::size_t>(plan.mesh.num_ranks());
  std::vector<std::int64_t> rs(n, 0), opened(n, 0), snt(n, 0), rcv(n, 0);
  LoadFigures f;
  std::int64_t largest = 0;
  for (const auto& r : plan.reads) {
    rs[static_cast<std::size_t>(r.reader)] += r.bytes;
    ++opened[static_cast<std::size_t>(r.reader)];
    f.total_read += r.bytes;
    largest = std::max(largest, r.bytes);
  }
  const std::vector<std::int64_t> host = hosts_of(n, cost);
  for (const auto& x : plan.messages) {
    if (x.to == x.from) continue;
    const auto fu = static_cast<std::size_t>(x.from), tu = static_cast<std::size_t>(x.to);
    const std::int64_t b = x.elements * itemsize_of(x.tensor);
    snt[fu] += b;
    rcv[tu] += b;
    f.moved += b;
    if (cost) f.inter_host = f.inter_host || host[fu] != host[tu];
  }
  const std::vector<std::int64_t> peers = peers_of(n, [&](const auto& g) {
    for (const auto& x : plan.messages)
      if (x.from != x.to) g(x.from, x.to);
  });
  finish_figures(f, plan.mesh, plan.storage, rs, opened, snt, rcv, peers, largest, cost);
  return f;
}

// Range add and range maximum over n slots (coverage counts along one dim's cuts).
class CoverTree {
 public:
  explicit CoverTree(std::size_t n) : n_(std::max<std::size_t>(n, 1)), max_(4 * n_, 0), add_(4 * n_, 0) {}
  void add(std::size_t lo, std::size_t hi, int v) { add(1, 0, n_, lo, hi, v); }
  [[nodiscard]] int max(std::size_t lo, std::size_t hi) const { return max(1, 0, n_, lo, hi); }

 private:
  void add(std::size_t node, std::size_t l, std::size_t r, std::size_t lo, std::size_t hi, int v) {
    if (hi <= l || r <= lo) return;
    if (lo <= l && r <= hi) {
      max_[node] += v;
      add_[node] += v;
      return;
    }
    const std::size_t m = (l + r) / 2;
    add(2 * node, l, m, lo, hi, v);
    add(2 * node + 1, m, r, lo, hi, v);
    max_[node] = add_[node] + std::max(max_[2 * node], max_[2 * node + 1]);
  }
  [[nodiscard]] int max(std::size_t node, std::size_t l, std::size_t r, std::size_t lo, std::size_t hi) const {
    if (hi <= l || r <= lo) return INT_MIN / 2;
    if (lo <= l && r <= hi) return max_[node];
    const std::size_t m = (l + r) / 2;
    return add_[node] + std::max(max(2 * node, l, m, lo, hi), max(2 * node + 1, m, r, lo, hi));
  }
  std::size_t n_;
  std::vector<int> max_, add_;
};

// Whether the live chunks, which may differ only on dims `a` and `b` (every other dim whole),
// are disjoint: a sweep along `a` (a chunk leaves before one that starts where it stops enters),
// the entering chunk's extent on `b` checked against the active chunks' coverage. On an overlap,
// the active chunk it meets is found and both are named.
template <class Err>
void sweep_disjoint(const SavedTensor& t, const std::vector<std::size_t>& live, std::size_t a, std::optional<std::size_t> b,
                    const Err& overlap_error) {
  std::vector<std::int64_t> cuts;
  if (b)
    for (auto i : live) {
      cuts.push_back(t.chunks[i].offsets[*b]);
      cuts.push_back(t.chunks[i].offsets[*b] + t.chunks[i].sizes[*b]);
    }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  auto slot = [&](std::int64_t x) {
    return static_cast<std::size_t>(std::lower_bound(cuts.begin(), cuts.end(), x) - cuts.begin());
  };
  struct Event {
    std::int64_t at;
    int enter;  // 0: leaves, 1: enters (leaving first at the same coordinate)
    std::size_t chunk;
  };
  std::vector<Event> events;
  events.reserve(2 * live.size());
  for (auto i : live) {
    events.push_back({t.chunks[i].offsets[a], 1, i});
    events.push_back({t.chunks[i].offsets[a] + t.chunks[i].sizes[a], 0, i});
  }
  std::sort(events.begin(), events.end(), [](const Event& x, const Event& y) {
    return std::tie(x.at, x.enter, x.chunk) < std::tie(y.at, y.enter, y.chunk);
  });
  CoverTree tree(cuts.empty() ? 1 : cuts.size() - 1);
  std::vector<char> active(t.chunks.size(), 0);
  for (const auto& e : events) {
    const auto& c = t.chunks[e.chunk];
    const std::size_t lo = b ? slot(c.offsets[*b]) : 0, hi = b ? slot(c.offsets[*b] + c.sizes[*b]) : 1;
    if (e.enter && tree.max(lo, hi) > 0) {
      for (auto j : live)
        if (active[j] && (!b || (t.chunks[j].offsets[*b] < c.offsets[*b] + c.sizes[*b] &&
                                 c.offsets[*b] < t.chunks[j].offsets[*b] + t.chunks[j].sizes[*b])))
          throw overlap_error(j, e.chunk);
    }
    tree.add(lo, hi, e.enter ? 1 : -1);
    active[e.chunk] = static_cast<char>(e.enter);
  }
}

// The tiling check's grid: every dim cut at every chunk boundary. When the cells are few (chunks
// on a grid, as DCP writes them: one cell per chunk), each chunk marks its cells and a cell marked
// twice is an overlap; otherwise a sweep (at most two dims that some chunk does not span whole)
// or, in 3 or more such dims, the chunks compared pairwise along dim 0 (at most 65,536 of them).
void check_disjoint(const SavedTensor& t) {
  const std::size_t nd = t.shape.size();
  std::vector<std::size_t> live;
  for (std::size_t i = 0; i < t.chunks.size(); ++i)
    if (std::all_of(t.chunks[i].sizes.begin(), t.chunks[i].sizes.end(), [](std::int64_t s) { return s > 0; })) live.push_back(i);
  if (nd == 0 || live.size() < 2) return;
  std::vector<std::vector<std::int64_t>> cuts(nd);
  for (std::size_t d = 0; d < nd; ++d) {
    for (auto i : live) {
      cuts[d].push_back(t.chunks[i].offsets[d]);
      cuts[d].push_back(t.chunks[i].offsets[d] + t.chunks[i].sizes[d]);
    }
    std::sort(cuts[d].begin(), cuts[d].end());
    cuts[d].erase(std::unique(cuts[d].begin(), cuts[d].end()), cuts[d].end());
  }
  const double limit = std::max<double>(4.0 * static_cast<double>(live.size()), 4096);
  double cells = 1;
  for (const auto& c : cuts) cells *= static_cast<double>(c.size() - 1);
  auto overlap_error = [&](std::size_t a, std::size_t b) {
    return InputError(fmt::format("tensor {}: chunk {} ({}) overlaps chunk {} ({})", t.name, std::min(a, b),
                                  chunk_str(t.chunks[std::min(a, b)]), std::max(a, b), chunk_str(t.chunks[std::max(a, b)])));
  };
  if (cells <= limit) {
    std::vector<std::int64_t> owner(static_cast<std::size_t>(cells), -1);
    for (auto i : live) {
      const auto& c = t.chunks[i];
      std::vector<std::int64_t> lo(nd), hi(nd);
      for (std::size_t d = 0; d < nd; ++d) {
        lo[d] = std::lower_bound(cuts[d].begin(), cuts[d].end(), c.offsets[d]) - cuts[d].begin();
        hi[d] = std::lower_bound(cuts[d].begin(), cuts[d].end(), c.offsets[d] + c.sizes[d]) - cuts[d].begin();
      }
      std::vector<std::int64_t> at = lo;
      while (true) {
        std::int64_t cell = 0;
        for (std::size_t d = 0; d < nd; ++d) cell = cell * static_cast<std::int64_t>(cuts[d].size() - 1) + at[d];
        auto& o = owner[static_cast<std::size_t>(cell)];
        if (o >= 0) throw overlap_error(static_cast<std::size_t>(o), i);
        o = static_cast<std::int64_t>(i);
        std::size_t d = nd;
        while (d-- > 0 && ++at[d] == hi[d]) at[d] = lo[d];
        if (d == static_cast<std::size_t>(-1)) break;
      }
    }
    return;
  }
  // Off the grid: the dims every live chunk spans whole cannot separate two chunks. With at most
  // two dims left, a sweep decides in O(n log n): along the first, the active chunks' extents on
  // the second (a segment tree of coverage counts over its cuts) must never meet.
  std::vector<std::size_t> dims;
  for (std::size_t d = 0; d < nd; ++d)
    if (!std::all_of(live.begin(), live.end(), [&](std::size_t i) { return t.chunks[i].sizes[d] == t.shape[d]; }))
      dims.push_back(d);
  if (dims.size() <= 2) {
    if (dims.empty()) throw overlap_error(live[0], live[1]);  // two chunks each holding the whole tensor
    sweep_disjoint(t, live, dims.front(), dims.size() == 2 ? std::optional<std::size_t>(dims.back()) : std::nullopt,
                   overlap_error);
    return;
  }
  if (live.size() > 65536)
    throw InputError(fmt::format("tensor {}: {} chunks that do not lie on a grid in 3 or more dims: too irregular to check",
                                 t.name, live.size()));
  std::sort(live.begin(), live.end(), [&](std::size_t a, std::size_t b) {
    return std::pair(t.chunks[a].offsets[0], a) < std::pair(t.chunks[b].offsets[0], b);
  });
  for (std::size_t x = 0; x < live.size(); ++x) {
    const auto& a = t.chunks[live[x]];
    for (std::size_t y = x + 1; y < live.size() && t.chunks[live[y]].offsets[0] < a.offsets[0] + a.sizes[0]; ++y) {
      const auto& b = t.chunks[live[y]];
      bool meet = true;
      for (std::size_t d = 1; d < nd && meet; ++d)
        meet = a.offsets[d] < b.offsets[d] + b.sizes[d] && b.offsets[d] < a.offsets[d] + a.sizes[d];
      if (meet) throw overlap_error(live[x], live[y]);
    }
  }
}

}  // namespace

namespace {

// check_saved's checks of one tensor against its target alone (shape, dtype, chunk count).
void check_saved_against(const SavedTensor& t, const Layout& target) {
  if (t.shape != target.shape())
    throw InputError(fmt::format("tensor {}: saved with shape {}, but the target's is {}", t.name, shape_str(t.shape),
                                 shape_str(target.shape())));
  if (t.dtype != target.dtype())
    throw InputError(fmt::format("tensor {}: saved as {}, but the target is {}", t.name, to_string(t.dtype),
                                 to_string(target.dtype())));
  if (static_cast<std::int64_t>(t.chunks.size()) >= kMaxEntries)
    throw InputError(fmt::format("tensor {}: {} chunks", t.name, t.chunks.size()));
}

// check_saved's checks of the chunks: within the shape, disjoint, covering it.
void check_tiling(const SavedTensor& t) {
  const std::size_t nd = t.shape.size();
  std::int64_t numel = 1;
  for (auto z : t.shape) numel *= z;  // (the target's shape: its product fits)
  std::int64_t covered = 0;
  for (std::size_t i = 0; i < t.chunks.size(); ++i) {
    const auto& c = t.chunks[i];
    if (c.offsets.size() != nd || c.sizes.size() != nd)
      throw InputError(fmt::format("tensor {}: chunk {} has {} offsets and {} sizes for a tensor of {} dims", t.name, i,
                                   c.offsets.size(), c.sizes.size(), nd));
    std::int64_t n = 1;
    for (std::size_t d = 0; d < nd; ++d) {
      if (c.offsets[d] < 0 || c.sizes[d] < 0 || c.offsets[d] > t.shape[d] || c.sizes[d] > t.shape[d] - c.offsets[d])
        throw InputError(fmt::format("tensor {}: chunk {} ({}) is not within the tensor's shape {} on dim {}", t.name, i,
                                     chunk_str(c), shape_str(t.shape), d));
      n *= c.sizes[d];  // (each size is within the shape, whose product fits)
    }
    covered += n;
    if (covered > numel)
      throw InputError(fmt::format("tensor {}: chunks 0..{} hold more elements than the tensor's {}: some overlap", t.name, i,
                                   numel));
  }
  check_disjoint(t);
  if (covered != numel)
    throw InputError(fmt::format("tensor {}: the chunks cover {} of its {} elements: some are missing", t.name, covered, numel));
}

}  // namespace

void check_saved(const SavedTensor& t, const Layout& target) {
  check_saved_against(t, target);
  check_tiling(t);
}

namespace {

// A saved chunk with bytes, and the ranks whose target holds some of it with how many of its
// elements (every member of a target block it meets).
struct Chunk {
  std::int32_t tensor, index;
  std::int64_t bytes, itemsize;
  std::size_t first = 0, last = 0;  // its needers: [first, last) of Chunks::needers
  std::int64_t needed = 0;          // the elements its needers hold in all
};
struct Chunks {
  std::vector<Chunk> list;
  std::vector<std::pair<std::int64_t, std::int64_t>> needers;  // (rank, elements), each chunk's in rank order
  [[nodiscard]] std::span<const std::pair<std::int64_t, std::int64_t>> of(std::size_t k) const {
    return {needers.data() + list[k].first, needers.data() + list[k].last};
  }
};

// The figures of a decision (each chunk's reader), from the chunks and their needer lists, which a
// model's repeated kinds of tensor share: the bytes each rank receives are summed per distinct list
// (its elements per needer times the bytes factor of the chunks using it), less what each reader
// holds of its own chunks; the peers from the distinct (reader, list) pairs. O(chunks log needers +
// the distinct lists' and pairs' needers), never message by message; the same integers as
// load_figures over the messages.
LoadFigures decision_figures(const Chunks& cs, std::span<const std::int64_t> reader, const Mesh& mesh,
                             const StorageParams& st, const CostModel& cost) {
  const auto n = static_cast<std::size_t>(mesh.num_ranks());
  std::vector<std::int64_t> rs(n, 0), opened(n, 0), snt(n, 0), rcv(n, 0);
  LoadFigures f;
  std::int64_t largest = 0;
  const std::vector<std::int64_t> host = hosts_of(n, &cost);
  // the distinct lists (by their first entry), each with its weight (the chunks' itemsizes summed)
  // and the hosts its needers span
  std::unordered_map<std::size_t, std::uint32_t> list_of;
  struct List {
    std::size_t first, last;
    std::int64_t weight = 0, low_host = INT64_MAX, high_host = -1;
  };
  std::vector<List> lists;
  std::unordered_set<std::uint64_t> seen;  // (reader, list) pairs met
  std::vector<std::pair<std::int64_t, std::uint32_t>> pairs;
  for (std::size_t k = 0; k < cs.list.size(); ++k) {
    const Chunk& ch = cs.list[k];
    const auto r = reader[k];
    const auto u = static_cast<std::size_t>(r);
    rs[u] += ch.bytes;
    ++opened[u];
    f.total_read += ch.bytes;
    largest = std::max(largest, ch.bytes);
    auto [it, fresh] = list_of.try_emplace(ch.first, static_cast<std::uint32_t>(lists.size()));
    if (fresh) {
      List l{ch.first, ch.last};
      for (const auto& [m, e] : cs.of(k))
        l.low_host = std::min(l.low_host, host[static_cast<std::size_t>(m)]),
        l.high_host = std::max(l.high_host, host[static_cast<std::size_t>(m)]);
      lists.push_back(l);
    }
    List& l = lists[it->second];
    l.weight += ch.itemsize;
    const auto nd = cs.of(k);
    std::int64_t own = 0;
    const auto at = std::lower_bound(nd.begin(), nd.end(), std::pair<std::int64_t, std::int64_t>(r, INT64_MIN));
    if (at != nd.end() && at->first == r) own = at->second;
    const std::int64_t out = (ch.needed - own) * ch.itemsize;
    snt[u] += out;
    rcv[u] -= own * ch.itemsize;  // (the list's sum below counts it)
    f.moved += out;
    // (a message leaves r for every needer but itself: some crosses when a needer is on another host)
    f.inter_host = f.inter_host || l.low_host != host[u] || l.high_host != host[u];
    if (seen.insert(static_cast<std::uint64_t>(r) << 32 | it->second).second) pairs.emplace_back(r, it->second);
  }
  for (const List& l : lists)
    for (std::size_t i = l.first; i < l.last; ++i)
      rcv[static_cast<std::size_t>(cs.needers[i].first)] += cs.needers[i].second * l.weight;
  std::sort(pairs.begin(), pairs.end());  // (grouped by reader)
  const std::vector<std::int64_t> peers = peers_of(n, [&](const auto& g) {
    for (const auto& [r, li] : pairs)
      for (std::size_t i = lists[li].first; i < lists[li].last; ++i)
        if (cs.needers[i].first != r) g(r, cs.needers[i].first);
  });
  finish_figures(f, mesh, st, rs, opened, snt, rcv, peers, largest, &cost);
  return f;
}

// The checks plan_load makes of its inputs (throwing InputError): the mesh they share, and per
// tensor the first with the same shape and chunks (a model repeats a few kinds of tensor over
// its layers: the chunks of a repeat tile as its first's did, checked once).
struct Inputs {
  Mesh mesh;
  std::vector<std::size_t> same_saved;
};
Inputs check_inputs(std::span<const SavedTensor> saved, std::span<const Layout> targets) {
  if (saved.size() != targets.size())
    throw InputError(fmt::format("{} saved tensors for {} targets", saved.size(), targets.size()));
  if (saved.empty()) throw InputError("nothing to load: no tensors");
  if (static_cast<std::int64_t>(saved.size()) >= kMaxEntries) throw InputError(fmt::format("{} tensors", saved.size()));
  Inputs in{targets.front().mesh(), std::vector<std::size_t>(saved.size())};
  const Mesh& mesh = in.mesh;
  std::unordered_map<std::uint64_t, std::vector<std::size_t>> firsts;  // a hash of (shape, chunks) -> its first tensors
  for (std::size_t t = 0; t < saved.size(); ++t) {
    if (!(targets[t].mesh() == mesh))
      throw InputError(fmt::format("tensor {}: target on mesh {}, the first on {}", saved[t].name, targets[t].mesh().str(),
                                   mesh.str()));
    for (int m = 0; m < mesh.ndim(); ++m)
      if (targets[t].sharding().partial(m))
        throw InputError(fmt::format("tensor {}: a checkpoint loads into {}, not into a Partial layout", saved[t].name,
                                     targets[t].placements_str()));
    check_saved_against(saved[t], targets[t]);
    std::uint64_t h = 0;
    for (auto z : saved[t].shape) detail::hash_combine(h, static_cast<std::uint64_t>(z));
    for (const auto& c : saved[t].chunks) {
      for (auto v : c.offsets) detail::hash_combine(h, static_cast<std::uint64_t>(v));
      for (auto v : c.sizes) detail::hash_combine(h, static_cast<std::uint64_t>(v));
    }
    auto& same = firsts[h];
    in.same_saved[t] = t;
    for (const std::size_t p : same)
      if (saved[p].shape == saved[t].shape && saved[p].chunks == saved[t].chunks) {
        in.same_saved[t] = p;
        break;
      }
    if (in.same_saved[t] != t) continue;
    same.push_back(t);
    check_tiling(saved[t]);
  }
  return in;
}

// The distinct blocks of each distinct target layout of a load (a model repeats a few layouts over
// its layers): built once per plan_load, whichever candidates ask.
class BlocksCache {
 public:
  const detail::LayoutBlocks& get(const Layout& l) {
    std::string key = l.sharding().str();
    for (auto z : l.shape()) key += fmt::format(",{}", z);
    auto it = cache_.find(key);
    if (it == cache_.end()) it = cache_.emplace(std::move(key), std::make_unique<detail::LayoutBlocks>(l)).first;
    return *it->second;
  }

 private:
  std::map<std::string, std::unique_ptr<detail::LayoutBlocks>> cache_;
};

// Per tensor, the first tensor whose target has the same blocks and whose shape and chunks are the
// same (`same_saved`: check_inputs'; its chunks then meet the same blocks with the same elements),
// or itself.
std::vector<std::size_t> kinds_of(std::span<const Layout> targets, std::span<const std::size_t> same_saved,
                                  BlocksCache& cache) {
  std::vector<std::size_t> kind(targets.size());
  std::map<std::pair<std::size_t, const detail::LayoutBlocks*>, std::size_t> first;
  for (std::size_t t = 0; t < targets.size(); ++t)
    kind[t] = first.try_emplace({same_saved[t], &cache.get(targets[t])}, t).first->second;
  return kind;
}

// In (tensor, chunk) order: on_tensor(t, its kind) for every tensor, then, for a tensor that is its
// own kind, on_chunk(tensor, chunk, its elements, the target's blocks, the blocks it meets) for each
// of its chunks with elements: range queries (placement/blocks.hpp), never a test of every block.
// A repeat of a kind has the same chunks meeting the same blocks: its caller reuses the kind's.
template <class T, class F>
void for_each_chunk_met(std::span<const SavedTensor> saved, std::span<const Layout> targets, BlocksCache& cache,
                        std::span<const std::size_t> kinds, T&& on_tensor, F&& on_chunk) {
  std::vector<detail::LayoutBlocks::Meet> met;
  detail::LayoutBlocks::Scratch scratch;
  for (std::size_t t = 0; t < saved.size(); ++t) {
    on_tensor(t, kinds[t]);
    if (kinds[t] != t) continue;
    const detail::LayoutBlocks& blocks = cache.get(targets[t]);
    std::vector<IndexSet> box(targets[t].shape().size());
    for (std::size_t c = 0; c < saved[t].chunks.size(); ++c) {
      const auto& sc = saved[t].chunks[c];
      std::int64_t n = 1;
      for (auto z : sc.sizes) n *= z;
      if (n == 0) continue;
      for (std::size_t d = 0; d < box.size(); ++d) box[d] = IndexSet::range(sc.offsets[d], sc.offsets[d] + sc.sizes[d]);
      met.clear();
      blocks.meeting(box, met, scratch);
      on_chunk(t, c, n, blocks, std::span<const detail::LayoutBlocks::Meet>(met));
    }
  }
}

// Per chunk with bytes, its needers in rank order: the members of every distinct block of the
// target (ranks holding equal index sets: replicas) that the chunk meets. A rank is in one block,
// so a chunk's messages are in `to` order as plan_load makes them; in (tensor, chunk) order. A
// repeated kind's chunks share its needers (one list per kind of tensor, not per tensor).
Chunks chunks_of(std::span<const SavedTensor> saved, std::span<const Layout> targets, std::span<const std::size_t> same,
                 BlocksCache& cache) {
  Chunks chunks;
  const std::vector<std::size_t> kinds = kinds_of(targets, same, cache);
  {
    std::size_t total = 0;
    for (const auto& t : saved) total += t.chunks.size();
    chunks.list.reserve(total);
  }
  std::vector<std::size_t> first(saved.size(), 0);  // per tensor, its first entry in chunks.list
  for_each_chunk_met(
      saved, targets, cache, kinds,
      [&](std::size_t t, std::size_t kind) {
        first[t] = chunks.list.size();
        if (kind == t) return;
        const auto s = static_cast<std::int64_t>(itemsize(targets[t].dtype()));
        const std::size_t from = first[kind], to = kind + 1 < saved.size() ? first[kind + 1] : chunks.list.size();
        for (std::size_t i = from; i < to; ++i) {
          Chunk ch = chunks.list[i];
          ch.tensor = static_cast<std::int32_t>(t);
          ch.bytes = ch.bytes / ch.itemsize * s;
          ch.itemsize = s;
          chunks.list.push_back(ch);
        }
      },
      [&](std::size_t t, std::size_t c, std::int64_t n, const detail::LayoutBlocks& blocks,
          std::span<const detail::LayoutBlocks::Meet> met) {
        const auto s = static_cast<std::int64_t>(itemsize(targets[t].dtype()));
        Chunk ch{static_cast<std::int32_t>(t), static_cast<std::int32_t>(c), n * s, s, chunks.needers.size(), 0, 0};
        for (const auto& m : met)
          for (auto r : blocks.members(static_cast<std::size_t>(m.block))) chunks.needers.emplace_back(r, m.elements);
        ch.last = chunks.needers.size();
        const auto b = chunks.needers.begin() + static_cast<std::ptrdiff_t>(ch.first), e = chunks.needers.end();
        if (!std::is_sorted(b, e)) std::sort(b, e);
        for (auto it = b; it != e; ++it) ch.needed += it->second;
        chunks.list.push_back(ch);
      });
  return chunks;
}

}  // namespace

namespace {

// A fan-out candidate's decision: its chunks and their needers in the received layouts, each
// chunk's reader, and the figures these give; with its fan-out (staged tensors, the post batch).
// What a whole plan or one rank's part is recorded from.
struct Candidate {
  Chunks cs;
  std::vector<std::int64_t> reader;
  LoadFigures f;
  std::vector<std::int32_t> staged;
  BatchPlan post;
  std::int64_t gathered_bytes = 0;
  double total_us = 0;
};

// The reads of a load whose tensors are received in `received` (their targets, or
// intermediates), and the figures they and the moves give: no fan-out yet.
Candidate assign(std::span<const SavedTensor> saved, std::span<const Layout> received, std::span<const std::size_t> same,
                 const Mesh& mesh, const CostModel& cost, const StorageParams& st, BlocksCache& blocks) {
  Candidate out;
  out.cs = chunks_of(saved, received, same, blocks);
  const Chunks& cs = out.cs;
  const std::int64_t N = mesh.num_ranks();
  const std::vector<Chunk>& chunks = cs.list;
  // Whole chunks to readers. First, largest first, each to the rank that needs its bytes whose
  // predicted time (its reads, then max(sent, received) at the point-to-point bandwidth) grows
  // least (ties: the most of its bytes needed, then the lower rank). Then, while it lowers the
  // busiest rank's time, a chunk of the busiest rank moves to the least loaded one (storage is
  // slow next to the links: spreading reads can beat reading what one needs).
  // (the order by bytes, descending, ties in (tensor, chunk) order: a counting sort over the distinct
  // sizes, which a model's chunks take few of)
  std::vector<std::size_t> order(chunks.size());
  {
    std::unordered_map<std::int64_t, std::size_t> slot;  // a size -> its place among the sizes, descending
    for (std::size_t k = 0; k < chunks.size(); ++k)
      if (k == 0 || chunks[k].bytes != chunks[k - 1].bytes) slot.emplace(chunks[k].bytes, 0);
    std::vector<std::int64_t> sizes;
    for (const auto& [b, i] : slot) sizes.push_back(b);
    std::sort(sizes.begin(), sizes.end(), std::greater<>());
    for (std::size_t i = 0; i < sizes.size(); ++i) slot[sizes[i]] = i;
    std::vector<std::size_t> at(sizes.size() + 1, 0), bucket(chunks.size());
    std::int64_t last = -1;
    std::size_t last_slot = 0;
    for (std::size_t k = 0; k < chunks.size(); ++k) {
      if (chunks[k].bytes != last) last = chunks[k].bytes, last_slot = slot.at(last);
      ++at[(bucket[k] = last_slot) + 1];
    }
    for (std::size_t i = 0; i < sizes.size(); ++i) at[i + 1] += at[i];
    for (std::size_t k = 0; k < chunks.size(); ++k) order[at[bucket[k]]++] = k;
  }
  const double read_Bpus = st.read_bw_GBps * 1e3, link_Bpus = cost.link(N > cost.devices_per_host).p2p_bw_GBps * 1e3;
  const auto n = static_cast<std::size_t>(N);
  std::vector<double> read(n, 0), sent(n, 0), recv(n, 0);
  std::vector<std::int64_t> opened(n, 0);
  auto time_of = [&](std::size_t r, double dread, std::int64_t dopen, double dsent, double drecv) {
    return (read[r] + dread) / read_Bpus + static_cast<double>(opened[r] + dopen) * st.read_alpha_us +
           std::max(sent[r] + dsent, recv[r] + drecv) / link_Bpus;
  };
  // every rank's time, ordered: kept only while rebalancing (the first pass never asks; the set is
  // then built once, as keeping it through the first pass would have left it)
  std::set<std::pair<double, std::int64_t>> by_load;
  bool tracking = false;
  // applies a reader change of chunk k: sign +1 assigns it to `r`, -1 takes it away
  auto apply = [&](std::size_t k, std::int64_t r, int sign) {
    const double s = static_cast<double>(chunks[k].itemsize), bytes = static_cast<double>(chunks[k].bytes);
    std::vector<std::int64_t> touched;
    if (tracking) {  // r and the needers (sorted by rank, one entry each): merged, not sorted
      touched.reserve(cs.of(k).size() + 1);
      bool placed = false;
      for (const auto& [m, e] : cs.of(k)) {
        if (!placed && r <= m) {
          if (r < m) touched.push_back(r);
          placed = true;
        }
        if (touched.empty() || touched.back() != m) touched.push_back(m);
      }
      if (!placed) touched.push_back(r);
      for (auto t : touched) by_load.erase({time_of(static_cast<std::size_t>(t), 0, 0, 0, 0), t});
    }
    const auto u = static_cast<std::size_t>(r);
    read[u] += sign * bytes;
    opened[u] += sign;
    for (const auto& [m, e] : cs.of(k))
      if (m != r) sent[u] += sign * static_cast<double>(e) * s, recv[static_cast<std::size_t>(m)] += sign * static_cast<double>(e) * s;
    for (auto t : touched) by_load.insert({time_of(static_cast<std::size_t>(t), 0, 0, 0, 0), t});
  };
  // r's time with chunk k added (its read, and what it then sends instead of receiving): from the
  // chunk's total needed elements and r's own (needers are sorted by rank), in O(log needers);
  // integer sums, so the same doubles as adding the needers one by one
  auto own_of = [&](std::size_t k, std::int64_t r) {
    const auto& nd = cs.of(k);
    std::int64_t own = 0;
    for (auto it = std::lower_bound(nd.begin(), nd.end(), std::pair<std::int64_t, std::int64_t>(r, INT64_MIN));
         it != nd.end() && it->first == r; ++it)
      own += it->second;
    return own;
  };
  auto time_with_own = [&](std::size_t k, std::int64_t r, std::int64_t own, int sign) {
    const double s = static_cast<double>(chunks[k].itemsize);
    const double out = static_cast<double>(chunks[k].needed - own) * s, mine = static_cast<double>(own) * s;
    return time_of(static_cast<std::size_t>(r), sign * static_cast<double>(chunks[k].bytes), sign, sign * out, -sign * mine);
  };
  auto time_with = [&](std::size_t k, std::int64_t r, int sign) { return time_with_own(k, r, own_of(k, r), sign); };
  std::vector<std::int64_t> reader(chunks.size(), -1);
  for (const std::size_t k : order) {
    std::int64_t best = -1, best_own = 0;
    double best_time = 0;
    for (const auto& [r, e] : cs.of(k)) {
      const double t = time_with_own(k, r, e, +1);  // (one entry per rank: blocks are distinct per rank)
      if (best < 0 || t < best_time - 1e-9 || (t <= best_time + 1e-9 && (e > best_own || (e == best_own && r < best))))
        best = r, best_time = t, best_own = e;
    }
    reader[k] = best;
    apply(k, best, +1);
  }
  for (std::int64_t r = 0; r < N; ++r) by_load.insert({time_of(static_cast<std::size_t>(r), 0, 0, 0, 0), r});
  tracking = true;
  std::vector<std::vector<std::size_t>> read_by(n);  // per rank, its chunks, largest first
  for (const std::size_t k : order) read_by[static_cast<std::size_t>(reader[k])].push_back(k);
  for (std::size_t moves = 0; moves < chunks.size() && N > 1; ++moves) {
    const auto [busiest_time, b] = *by_load.rbegin();
    const std::int64_t l = by_load.begin()->second;
    if (l == b) break;
    auto& mine = read_by[static_cast<std::size_t>(b)];
    std::size_t pick = mine.size();
    for (std::size_t i = 0; i < mine.size(); ++i)
      if (time_with(mine[i], b, -1) < busiest_time - 1e-6 && time_with(mine[i], l, +1) < busiest_time - 1e-6) {
        pick = i;
        break;
      }
    if (pick == mine.size()) break;
    const std::size_t k = mine[pick];
    mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(pick));
    apply(k, b, -1);
    apply(k, l, +1);
    reader[k] = l;
    auto& theirs = read_by[static_cast<std::size_t>(l)];
    theirs.insert(std::upper_bound(theirs.begin(), theirs.end(), k, [&](std::size_t x, std::size_t y) {
      return chunks[x].bytes > chunks[y].bytes || (chunks[x].bytes == chunks[y].bytes && x < y);
    }), k);
  }
  out.f = decision_figures(cs, reader, mesh, st, cost);
  out.total_us = out.f.read_us + out.f.transfer_us;
  out.reader = std::move(reader);
  return out;
}

// The plan's hash of its decisions: the mesh, who reads each chunk, the fan-out. The messages
// follow from these and the inputs. `for_each_read(f)` calls f(tensor, chunk, reader, bytes) in
// (tensor, chunk) order.
template <class Reads>
std::uint64_t decision_hash_of(const Mesh& mesh, const Reads& for_each_read, std::span<const std::int32_t> staged,
                               const BatchPlan& post) {
  std::uint64_t h = detail::fnv1a(mesh.str().data(), mesh.str().size());
  detail::hash_combine(h, 0x6c6f6164u);  // ("load": not the whole plan's hash of the same entries)
  for_each_read([&](std::int64_t t, std::int64_t c, std::int64_t reader, std::int64_t bytes) {
    for (std::int64_t v : {t, c, reader, bytes}) detail::hash_combine(h, static_cast<std::uint64_t>(v));
  });
  for (auto t : staged) detail::hash_combine(h, static_cast<std::uint64_t>(t));
  if (!staged.empty()) detail::hash_combine(h, post.hash());
  return detail::mix64(h);
}

// The plan a candidate is, whole, or only the entries of rank `only` (its reads, and the
// messages it sends or receives): reads in (tensor, chunk) order, messages in (tensor, chunk, to)
// order, the figures the whole plan's.
LoadPlan record(Candidate&& c, const Mesh& mesh, const CostModel& cost, const StorageParams& st,
                std::optional<std::int64_t> only = std::nullopt) {
  LoadPlan plan;
  plan.mesh = mesh;
  plan.cost_model = cost.name;
  plan.storage = st;
  const Chunks& cs = c.cs;
  const std::vector<Chunk>& chunks = cs.list;
  if (!only) {
    plan.reads.reserve(chunks.size());
    plan.messages.reserve(cs.needers.size());
  }
  for (std::size_t k = 0; k < chunks.size(); ++k) {  // (made in (tensor, chunk) order)
    const Chunk& ch = chunks[k];
    const std::int64_t from = c.reader[k];
    const auto needers = cs.of(k);
    if (!only || *only == from) {
      plan.reads.push_back({ch.tensor, ch.index, from, ch.bytes});
      for (const auto& [to, elements] : needers) plan.messages.push_back({ch.tensor, ch.index, from, to, elements});
      continue;
    }
    const auto it = std::lower_bound(needers.begin(), needers.end(), std::pair<std::int64_t, std::int64_t>(*only, INT64_MIN));
    if (it != needers.end() && it->first == *only) plan.messages.push_back({ch.tensor, ch.index, from, *only, it->second});
  }
  const LoadFigures& f = c.f;
  plan.total_read_bytes = f.total_read;
  plan.busiest_read_bytes = f.busiest_read;
  plan.balanced_read_bytes = f.balanced_read;
  plan.moved_bytes = f.moved;
  plan.busiest_transfer_bytes = f.busiest_transfer;
  plan.busiest_peers = f.busiest_peers;
  plan.inter_host = f.inter_host;
  plan.read_us = f.read_us;
  plan.transfer_us = f.transfer_us;
  plan.staged = std::move(c.staged);
  plan.post = std::move(c.post);
  plan.post_us = plan.staged.empty() ? 0.0 : plan.post.total_cost_us;
  plan.total_us = c.total_us;
  plan.gathered_bytes = c.gathered_bytes;
  return plan;
}

}  // namespace

const char* to_string(Fanout f) noexcept {
  switch (f) {
    case Fanout::direct: return "direct";
    case Fanout::gather: return "gather";
    case Fanout::cheapest: break;
  }
  return "cheapest";
}

Fanout parse_fanout(std::string_view text) {
  for (Fanout f : {Fanout::cheapest, Fanout::direct, Fanout::gather})
    if (text == to_string(f)) return f;
  throw InputError(fmt::format("fan-out {} is not cheapest, direct or gather", quote_input(text)));
}

namespace {

// The reads every candidate makes (the same chunks, whoever reads them): their bytes, count and
// the balanced bound max(ceil(bytes / ranks), largest chunk), as load_figures gives them.
struct ReadTotals {
  std::int64_t total = 0, reads = 0, balanced = 0;
};
ReadTotals read_totals(std::span<const SavedTensor> saved, std::int64_t ranks) {
  ReadTotals rt;
  std::int64_t largest = 0;
  for (const auto& t : saved) {
    const auto s = static_cast<std::int64_t>(itemsize(t.dtype));
    for (const auto& c : t.chunks) {
      std::int64_t n = 1;
      for (auto z : c.sizes) n *= z;
      if (n == 0) continue;
      rt.total += n * s;
      ++rt.reads;
      largest = std::max(largest, n * s);
    }
  }
  rt.balanced = std::max((rt.total + ranks - 1) / ranks, largest);
  return rt;
}

// A floor of the total of assign() on `targets` (the direct candidate, or a gather candidate's
// received layouts, before its gather), from each chunk's needers
// as block counts (never listed per rank): the reads' floor, then a transfer of at least the
// bytes the busiest reader must send (a chunk's needed elements less the most one needer holds;
// and the least bytes moved in all, spread over every rank) to at least as many peers as a
// chunk has needers less one, on the cheaper of the two links.
double assign_floor_us(std::span<const SavedTensor> saved, std::span<const Layout> targets, std::span<const std::size_t> same,
                       const CostModel& cost, double read_floor, BlocksCache& cache) {
  // per chunk of a kind (kinds_of): the elements it moves at least, its needers, whether they span hosts
  struct Floor {
    std::int64_t moved_elements = 0, needers = 0;
    bool inter_host = false;
  };
  std::vector<Floor> floors;
  std::vector<std::size_t> first(saved.size(), 0);  // per tensor, its first entry in floors
  std::int64_t moved = 0, busiest = 0, peers = 0;
  bool inter_host = false;  // some chunk's needers are on two hosts: its reader sends across
  const std::int64_t dph = cost.devices_per_host;
  auto add = [&](const Floor& fl, std::int64_t s) {
    moved += fl.moved_elements * s;
    busiest = std::max(busiest, fl.moved_elements * s);
    peers = std::max(peers, fl.needers - 1);
    inter_host = inter_host || fl.inter_host;
  };
  const std::vector<std::size_t> kinds = kinds_of(targets, same, cache);
  for_each_chunk_met(
      saved, targets, cache, kinds,
      [&](std::size_t t, std::size_t kind) {
        first[t] = floors.size();
        if (kind == t) return;
        const auto s = static_cast<std::int64_t>(itemsize(targets[t].dtype()));
        const std::size_t to = kind + 1 < saved.size() ? first[kind + 1] : floors.size();
        for (std::size_t i = first[kind]; i < to; ++i) add(floors[i], s);
      },
      [&](std::size_t t, std::size_t, std::int64_t, const detail::LayoutBlocks& blocks,
          std::span<const detail::LayoutBlocks::Meet> met) {
        std::int64_t needed = 0, own = 0, needers = 0, lowest = INT64_MAX, highest = -1;
        for (const auto& m : met) {
          const auto mem = blocks.members(static_cast<std::size_t>(m.block));
          const auto k = static_cast<std::int64_t>(mem.size());
          lowest = std::min(lowest, mem.front());
          highest = std::max(highest, mem.back());
          needed += m.elements * k;
          needers += k;
          own = std::max(own, m.elements);
        }
        floors.push_back({needed - own, needers, dph > 0 && highest >= 0 && lowest / dph != highest / dph});
        add(floors.back(), static_cast<std::int64_t>(itemsize(targets[t].dtype())));
      });
  const std::int64_t N = targets.front().mesh().num_ranks();
  busiest = std::max(busiest, (moved + N - 1) / N);
  if (moved == 0) return read_floor;
  return read_floor + cost.direct_floor_us(static_cast<double>(busiest), peers, inter_host);
}

// The ranks holding each element of a layout without Partial: the sizes of the mesh dims that
// do not shard it (the sharding ones partition its elements, uneven and empty shards included).
std::int64_t holders(const Layout& l) {
  std::int64_t k = 1;
  for (int m = 0; m < l.mesh().ndim(); ++m)
    if (l.sharding().shard_dim_of(m) < 0) k *= l.mesh().size(m);
  return k;
}

// The storage parameters of a load (the profile's, or the options'), checked.
StorageParams storage_of(const CostModel& cost, const LoadOptions& o) {
  StorageParams st = cost.storage;
  if (o.read_bw_GBps) st.read_bw_GBps = *o.read_bw_GBps;
  if (o.read_alpha_us) st.read_alpha_us = *o.read_alpha_us;
  if (!(st.read_bw_GBps > 0 && st.read_bw_GBps < 1e9) || !(st.read_alpha_us >= 0 && st.read_alpha_us < 1e9))
    throw InputError(fmt::format("read bandwidth {} GB/s and latency {} us: bandwidth positive, latency not negative",
                                 st.read_bw_GBps, st.read_alpha_us));
  return st;
}

// The candidate plan_load records (the whole decision: every rank makes the same).
Candidate choose(std::span<const SavedTensor> saved, std::span<const Layout> targets, const Inputs& in,
                 const CostModel& cost, const StorageParams& st, const LoadOptions& o) {
  const Mesh& mesh = in.mesh;
  const std::span<const std::size_t> same = in.same_saved;
  BlocksCache blocks;
  if (o.fanout == Fanout::direct) return assign(saved, targets, same, mesh, cost, st, blocks);
  // Candidates: direct (every replica receives from the readers), then each set of replicated
  // mesh dims received sharded and gathered inside the mesh by one batch. The least predicted
  // total wins, ties to the earlier (direct first): in candidate order, one replaces the best so
  // far when it is cheaper by more than 1e-9 us. The direct candidate is planned once the first
  // gather candidate is, and only when a floor of its total does not already lose to it: a replicated
  // target's direct plan lists a message per replica and chunk (ranks x chunks), which a gather
  // candidate avoids.
  PlanCache cache(4096);
  std::vector<std::uint32_t> masks = load_detail::fanout_masks(targets);
  if (o.fanout == Fanout::gather && !masks.empty()) masks = {masks.back()};  // (the union: every replicated dim)
  // A floor on any candidate's reads (the same chunks, whoever reads them): some rank reads at
  // least the balanced bound, and the busiest at least the average of bytes and chunks opened.
  const double read_Bpus = st.read_bw_GBps * 1e3, N = static_cast<double>(mesh.num_ranks());
  const ReadTotals rt = read_totals(saved, mesh.num_ranks());
  const double read_floor = std::max(static_cast<double>(rt.balanced) / read_Bpus,
                                     (static_cast<double>(rt.total) / read_Bpus + static_cast<double>(rt.reads) * st.read_alpha_us) / N);
  // The chain over the candidates in order, kept as it goes (at most the best and one candidate
  // live): `best` is empty until the first gather candidate is planned; then direct is planned
  // unless its floor loses to that candidate by more than the tie margin.
  std::optional<Candidate> best;
  bool gathered = false;
  for (const std::uint32_t mask : masks) {
    std::vector<Layout> received(targets.begin(), targets.end());
    std::vector<std::int32_t> staged;
    std::vector<std::pair<Layout, Layout>> pairs;
    for (std::size_t t = 0; t < targets.size(); ++t)
      if (auto via = load_detail::intermediate(targets[t], mask, cost, cache)) {
        pairs.emplace_back(*via, targets[t]);
        received[t] = std::move(*via);
        staged.push_back(static_cast<std::int32_t>(t));
      }
    if (staged.empty()) continue;
    BatchPlan post = plan_batch(pairs, cost);
    // cannot win: its floor (reads, the transfer's floor, its gather) is not below the best so far
    if (o.fanout == Fanout::cheapest && best &&
        (read_floor + post.total_cost_us >= best->total_us - 1e-9 ||
         assign_floor_us(saved, received, same, cost, read_floor, blocks) + post.total_cost_us >= best->total_us - 1e-9))
      continue;
    Candidate p = assign(saved, received, same, mesh, cost, st, blocks);
    p.staged = std::move(staged);
    p.post = std::move(post);
    p.total_us += p.post.total_cost_us;
    for (const auto& [via, to] : pairs)  // what the gather brings: each element to its target's holders beyond the intermediate's
      p.gathered_bytes += to.numel() * (holders(to) - holders(via)) * static_cast<std::int64_t>(itemsize(to.dtype()));
    if (o.fanout == Fanout::gather) return p;
    if (!gathered && assign_floor_us(saved, targets, same, cost, read_floor, blocks) > p.total_us + 1e-9) {
      best = std::move(p);  // it replaces direct, whatever direct's total
    } else {
      if (!gathered) best = assign(saved, targets, same, mesh, cost, st, blocks);
      if (p.total_us < best->total_us - 1e-9) best = std::move(p);
    }
    gathered = true;
  }
  return best ? std::move(*best) : assign(saved, targets, same, mesh, cost, st, blocks);
}

}  // namespace

LoadPlan plan_load(std::span<const SavedTensor> saved, std::span<const Layout> targets, const CostModel& cost,
                   const LoadOptions& o) {
  const StorageParams st = storage_of(cost, o);
  const Inputs in = check_inputs(saved, targets);
  return record(choose(saved, targets, in, cost, st, o), in.mesh, cost, st);
}

LoadPart plan_load_part(std::span<const SavedTensor> saved, std::span<const Layout> targets, std::int64_t rank,
                        const CostModel& cost, const LoadOptions& o) {
  const StorageParams st = storage_of(cost, o);
  const Inputs in = check_inputs(saved, targets);
  const Mesh& mesh = in.mesh;
  if (rank < 0 || rank >= mesh.num_ranks())
    throw InputError(fmt::format("rank {} is not on the load's mesh {} (ranks 0..{})", rank, mesh.str(), mesh.num_ranks() - 1));
  Candidate c = choose(saved, targets, in, cost, st, o);
  LoadPart part;
  part.rank = rank;
  part.decision_hash = decision_hash_of(
      mesh,
      [&](const auto& f) {
        for (std::size_t k = 0; k < c.cs.list.size(); ++k)
          f(c.cs.list[k].tensor, c.cs.list[k].index, c.reader[k], c.cs.list[k].bytes);
      },
      c.staged, c.post);
  part.plan = record(std::move(c), mesh, cost, st, rank);
  return part;
}

std::uint64_t LoadPlan::decision_hash() const {
  return decision_hash_of(
      mesh,
      [&](const auto& f) {
        for (const auto& r : reads) f(r.tensor, r.chunk, r.reader, r.bytes);
      },
      staged, post);
}

LoadPart LoadPlan::part(std::int64_t rank) const {
  if (rank < 0 || rank >= mesh.num_ranks())
    throw InputError(fmt::format("rank {} is not on the load's mesh {} (ranks 0..{})", rank, mesh.str(), mesh.num_ranks() - 1));
  LoadPart out;
  out.rank = rank;
  out.decision_hash = decision_hash();
  out.plan = *this;
  out.plan.reads.clear();
  out.plan.messages.clear();
  for (const auto& r : reads)
    if (r.reader == rank) out.plan.reads.push_back(r);
  for (const auto& m : messages)
    if (m.from == rank || m.to == rank) out.plan.messages.push_back(m);
  return out;
}

Layout ragged_intermediate(const RaggedLayout& target, const CostModel& cost) {
  const Layout& base = target.base();
  if (!target.is_ragged()) return base;
  const Mesh& mesh = base.mesh();
  const RaggedShard& rs = *target.ragged();
  const auto s = static_cast<double>(itemsize(base.dtype()));
  std::optional<Layout> best;
  double best_us = 0;
  for (int d = -1; d < rs.prefix_dims; ++d) {  // -1: the ragged mesh dim received as Replicate
    Layout via = d < 0 ? base
                       : Layout(mesh, base.shape(), base.dtype(), base.sharding().with_shard_appended(d, ShardEntry{rs.mesh_dim, 1, false}));
    std::int64_t most = 0;
    for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) most = std::max(most, via.local_numel(mesh.coord_of_rank(r)));
    Traffic tr;
    tr.kind = most > 0 ? Traffic::Kind::direct : Traffic::Kind::local;
    tr.peers = 1;
    tr.bytes = static_cast<double>(most) * s;
    tr.inter_host = mesh.num_ranks() > cost.devices_per_host;
    const double us = cost.time(tr).total_us() + plan_ragged(RaggedLayout(via), target, cost).total_cost_us;
    if (!best || us < best_us - 1e-9) best = std::move(via), best_us = us;
  }
  return *best;
}

const Layout& LoadPlan::received_layout(std::int32_t t, const Layout& target) const {
  const auto it = std::lower_bound(staged.begin(), staged.end(), t);
  if (it == staged.end() || *it != t) return target;
  return post.plan(static_cast<std::size_t>(it - staged.begin())).src;
}

std::uint64_t LoadPlan::hash() const {
  std::uint64_t h = detail::fnv1a(mesh.str().data(), mesh.str().size());
  for (const auto& r : reads)
    for (std::int64_t v : {std::int64_t{r.tensor}, std::int64_t{r.chunk}, r.reader, r.bytes}) detail::hash_combine(h, static_cast<std::uint64_t>(v));
  for (const auto& m : messages)
    for (std::int64_t v : {std::int64_t{m.tensor}, std::int64_t{m.chunk}, m.from, m.to, m.elements})
      detail::hash_combine(h, static_cast<std::uint64_t>(v));
  if (!staged.empty()) {  // (plans without a fan-out hash as before it existed)
    for (auto t : staged) detail::hash_combine(h, static_cast<std::uint64_t>(t));
    detail::hash_combine(h, post.hash());
  }
  return detail::mix64(h);
}

std::string LoadPlan::to_json(int indent) const {
  nlohmann::ordered_json j;
  j["kind"] = "load";
  detail::write_mesh_fields(j, mesh);
  j["cost_model"] = cost_model;
  j["read_bw_GBps"] = storage.read_bw_GBps;
  j["read_alpha_us"] = storage.read_alpha_us;
  j["total_read_bytes"] = total_read_bytes;
  j["busiest_read_bytes"] = busiest_read_bytes;
  j["balanced_read_bytes"] = balanced_read_bytes;
  j["moved_bytes"] = moved_bytes;
  j["gathered_bytes"] = gathered_bytes;
  j["busiest_transfer_bytes"] = busiest_transfer_bytes;
  j["busiest_peers"] = busiest_peers;
  j["inter_host"] = inter_host;
  j["read_us"] = read_us;
  j["transfer_us"] = transfer_us;
  j["post_us"] = post_us;
  j["total_us"] = total_us;
  j["staged"] = staged;
  j["post"] = staged.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json::parse(post.to_json());
  j["reads"] = nlohmann::ordered_json::array();
  for (const auto& r : reads) j["reads"].push_back({{"tensor", r.tensor}, {"chunk", r.chunk}, {"reader", r.reader}, {"bytes", r.bytes}});
  j["messages"] = nlohmann::ordered_json::array();
  for (const auto& m : messages)
    j["messages"].push_back({{"tensor", m.tensor}, {"chunk", m.chunk}, {"from", m.from}, {"to", m.to}, {"elements", m.elements}});
  j["hash"] = fmt::format("{:016x}", hash());
  return j.dump(indent);
}

std::string explain(const LoadPlan& p) {
  const std::int64_t N = p.mesh.num_ranks();
  std::vector<std::int64_t> read(static_cast<std::size_t>(N), 0), chunks(static_cast<std::size_t>(N), 0);
  for (const auto& r : p.reads) read[static_cast<std::size_t>(r.reader)] += r.bytes, ++chunks[static_cast<std::size_t>(r.reader)];
  std::string o = fmt::format("load onto mesh {} (cost model {}, storage {:.3g} GB/s and {:.3g} us per chunk per reader)\n",
                              p.mesh.str(), p.cost_model, p.storage.read_bw_GBps, p.storage.read_alpha_us);
  o += fmt::format("reads: {} chunks, {} bytes, each read once; busiest reader {} bytes against the balanced bound {} ({:.2f}x)\n",
                   p.reads.size(), p.total_read_bytes, p.busiest_read_bytes, p.balanced_read_bytes,
                   p.balanced_read_bytes > 0 ? static_cast<double>(p.busiest_read_bytes) / static_cast<double>(p.balanced_read_bytes) : 1.0);
  const std::int64_t shown = std::min<std::int64_t>(N, 16);
  for (std::int64_t r = 0; r < shown; ++r)
    o += fmt::format("  rank {:>4}: reads {:>6} chunk(s), {:>14} bytes\n", r, chunks[static_cast<std::size_t>(r)], read[static_cast<std::size_t>(r)]);
  if (shown < N) o += fmt::format("  ... {} more ranks\n", N - shown);
  o += fmt::format("then: {} bytes sent between ranks in {} message(s); busiest rank {} bytes to or from {} peer(s){}\n",
                   p.moved_bytes, p.messages.size(), p.busiest_transfer_bytes, p.busiest_peers,
                   p.inter_host ? ", across hosts" : "");
  if (!p.staged.empty()) {
    o += fmt::format("fan-out: {} tensor(s) received sharded over their replicated mesh dims, then gathered inside the "
                     "mesh as one batch ({} collective(s), {} without batching): {} bytes gathered\n",
                     p.staged.size(), p.post.collectives(), p.post.separate_collectives(), p.gathered_bytes);
    o += fmt::format("predicted: reads {:.3f} us + transfer {:.3f} us + gather {:.3f} us = {:.3f} us\n", p.read_us,
                     p.transfer_us, p.post_us, p.total_us);
  } else {
    o += fmt::format("predicted: reads {:.3f} us + transfer {:.3f} us = {:.3f} us\n", p.read_us, p.transfer_us, p.total_us);
  }
  return o;
}

}  // namespace dtensor

namespace dtensor {
std::string LoadPart::to_json(int indent) const {
  nlohmann::ordered_json j;
  j["kind"] = "load_part";
  j["rank"] = rank;
  j["decision_hash"] = fmt::format("{:016x}", decision_hash);
  j["plan"] = nlohmann::ordered_json::parse(plan.to_json());
  return j.dump(indent);
}

std::string explain(const LoadPart& part) {
  const LoadPlan& p = part.plan;
  std::int64_t read = 0, sent = 0, received = 0, sends = 0, receives = 0, local = 0;
  std::set<std::int64_t> to, from;
  for (const auto& r : p.reads) read += r.bytes;
  for (const auto& m : p.messages) {
    if (m.from == m.to) {
      ++local;
    } else if (m.from == part.rank) {
      ++sends, sent += m.elements, to.insert(m.to);
    } else {
      ++receives, received += m.elements, from.insert(m.from);
    }
  }
  std::string o = fmt::format("rank {}'s part of a load onto mesh {} (planned alone; decision hash {:016x}, the same on every rank)\n",
                              part.rank, p.mesh.str(), part.decision_hash);
  o += fmt::format("reads: {} chunk(s), {} bytes (the busiest reader {} bytes, the balanced bound {})\n", p.reads.size(), read,
                   p.busiest_read_bytes, p.balanced_read_bytes);
  o += fmt::format("sends: {} message(s), {} elements to {} peer(s); receives: {} message(s), {} elements from {} peer(s); "
                   "{} local copies\n", sends, sent, to.size(), receives, received, from.size(), local);
  o += fmt::format("the plan: {} bytes read, {} moved; busiest rank {} bytes to or from {} peer(s){}\n", p.total_read_bytes,
                   p.moved_bytes, p.busiest_transfer_bytes, p.busiest_peers, p.inter_host ? ", across hosts" : "");
  if (!p.staged.empty())
    o += fmt::format("fan-out: {} tensor(s) received sharded, then gathered inside the mesh ({} collective(s))\n", p.staged.size(),
                     p.post.collectives());
  o += fmt::format("predicted: reads {:.3f} us + transfer {:.3f} us{} = {:.3f} us\n", p.read_us, p.transfer_us,
                   p.staged.empty() ? std::string() : fmt::format(" + gather {:.3f} us", p.post_us), p.total_us);
  return o;
}

namespace {

constexpr std::int64_t kMaxJsonEntries = std::int64_t{1} << 24;

const nlohmann::json& field(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) throw InputError(fmt::format("load plan: lacks '{}'", key));
  return *it;
}

double json_number(const nlohmann::json& j, const char* key) {
  const auto& v = field(j, key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
    throw InputError(fmt::format("load plan: '{}' must be a non-negative number, not {}", key, detail::json_quote(v)));
  return v.get<double>();
}

std::int64_t count(const nlohmann::json& j, const char* key) {
  return detail::json_int(field(j, key), key, 0, std::numeric_limits<std::int64_t>::max());
}

const nlohmann::json& list(const nlohmann::json& j, const char* key) {
  const auto& v = field(j, key);
  if (!v.is_array() || static_cast<std::int64_t>(v.size()) > kMaxJsonEntries)
    throw InputError(fmt::format("load plan: '{}' must be a list of at most {} entries", key, kMaxJsonEntries));
  return v;
}

}  // namespace

LoadPlan LoadPlan::from_json(std::string_view text) {
  const nlohmann::json j = detail::parse_json(text, "load plan");
  if (!j.is_object()) throw InputError("load plan: not a JSON object");
  if (field(j, "kind") != "load") throw InputError(fmt::format("load plan: kind {} is not \"load\"", detail::json_quote(j["kind"])));
  LoadPlan p;
  p.mesh = detail::read_mesh_fields(j, "load plan");
  const std::int64_t N = p.mesh.num_ranks();
  const auto& cm = field(j, "cost_model");
  if (!cm.is_string() || cm.get<std::string>().size() > 4096)
    throw InputError(fmt::format("load plan: 'cost_model' must be a string, not {}", detail::json_quote(cm)));
  p.cost_model = cm.get<std::string>();
  p.storage = {json_number(j, "read_bw_GBps"), json_number(j, "read_alpha_us")};
  if (!(p.storage.read_bw_GBps > 0)) throw InputError("load plan: 'read_bw_GBps' must be positive");
  p.total_read_bytes = count(j, "total_read_bytes");
  p.busiest_read_bytes = count(j, "busiest_read_bytes");
  p.balanced_read_bytes = count(j, "balanced_read_bytes");
  p.moved_bytes = count(j, "moved_bytes");
  p.gathered_bytes = count(j, "gathered_bytes");
  p.busiest_transfer_bytes = count(j, "busiest_transfer_bytes");
  p.busiest_peers = count(j, "busiest_peers");
  if (!field(j, "inter_host").is_boolean()) throw InputError("load plan: 'inter_host' must be true or false");
  p.inter_host = j["inter_host"].get<bool>();
  p.read_us = json_number(j, "read_us");
  p.transfer_us = json_number(j, "transfer_us");
  p.post_us = json_number(j, "post_us");
  p.total_us = json_number(j, "total_us");
  const auto& staged = list(j, "staged");
  for (const auto& t : staged) {
    p.staged.push_back(static_cast<std::int32_t>(detail::json_int(t, "staged[]", 0, kMaxEntries - 1)));
    if (p.staged.size() > 1 && p.staged[p.staged.size() - 2] >= p.staged.back())
      throw InputError(fmt::format("load plan: staged tensor {} is out of order or repeated", p.staged.back()));
  }
  const auto& post = field(j, "post");
  if (p.staged.empty() != post.is_null())
    throw InputError("load plan: 'post' must be null exactly when 'staged' is empty");
  if (!post.is_null()) {
    if (!post.is_object()) throw InputError("load plan: 'post' must be a batch plan object");
    p.post = BatchPlan::from_json(post.dump());
    if (p.post.size() != p.staged.size())
      throw InputError(fmt::format("load plan: 'post' holds {} tensors for {} staged", p.post.size(), p.staged.size()));
    if (std::abs(p.post_us - p.post.total_cost_us) > 1e-6 * std::max(1.0, p.post.total_cost_us))
      throw InputError(fmt::format("load plan: 'post_us' {} is not the post batch's cost {}", p.post_us, p.post.total_cost_us));
    for (std::size_t i = 0; i < p.post.size(); ++i)
      if (!(p.post.plan(i).src.mesh() == p.mesh))
        throw InputError(fmt::format("load plan: post tensor {} is on mesh {}, the plan's is {}", i,
                                     p.post.plan(i).src.mesh().str(), p.mesh.str()));
  }
  const auto rank = [&](const nlohmann::json& v, const char* what) { return detail::json_int(v, what, 0, N - 1); };
  const auto index = [](const nlohmann::json& v, const char* what) {
    return static_cast<std::int32_t>(detail::json_int(v, what, 0, kMaxEntries - 1));
  };
  const auto& reads = list(j, "reads");
  p.reads.reserve(reads.size());
  for (const auto& r : reads) {
    if (!r.is_object()) throw InputError(fmt::format("load plan: read {} is not an object", detail::json_quote(r)));
    Read x{index(field(r, "tensor"), "reads[].tensor"), index(field(r, "chunk"), "reads[].chunk"),
           rank(field(r, "reader"), "reads[].reader"),
           detail::json_int(field(r, "bytes"), "reads[].bytes", 1, std::numeric_limits<std::int64_t>::max())};
    if (!p.reads.empty() && std::pair{p.reads.back().tensor, p.reads.back().chunk} >= std::pair{x.tensor, x.chunk})
      throw InputError(fmt::format("load plan: read of tensor {} chunk {} is out of (tensor, chunk) order or repeated",
                                   x.tensor, x.chunk));
    p.reads.push_back(x);
  }
  const auto& messages = list(j, "messages");
  p.messages.reserve(messages.size());
  for (const auto& m : messages) {
    if (!m.is_object()) throw InputError(fmt::format("load plan: message {} is not an object", detail::json_quote(m)));
    Message x{index(field(m, "tensor"), "messages[].tensor"), index(field(m, "chunk"), "messages[].chunk"),
              rank(field(m, "from"), "messages[].from"), rank(field(m, "to"), "messages[].to"),
              detail::json_int(field(m, "elements"), "messages[].elements", 1, std::numeric_limits<std::int64_t>::max())};
    if (!p.messages.empty()) {
      const auto& b = p.messages.back();
      if (std::tuple{b.tensor, b.chunk, b.to} >= std::tuple{x.tensor, x.chunk, x.to})
        throw InputError(fmt::format("load plan: message of tensor {} chunk {} to rank {} is out of (tensor, chunk, to) "
                                     "order or repeated", x.tensor, x.chunk, x.to));
    }
    p.messages.push_back(x);
  }
  const auto& h = field(j, "hash");
  if (!detail::json_hash_is(h, p.hash()))
    throw InputError(fmt::format("load plan: hash {} is not the entries' ({:016x}): edited or corrupted",
                                 h.is_string() ? quote_input(h.get<std::string>()) : detail::json_quote(h), p.hash()));
  // the totals the entries determine, recomputed (an edited total is refused, as an edited hash is)
  std::int64_t total_read = 0, busiest_read = 0;
  {
    std::unordered_map<std::int64_t, std::int64_t> per_reader;  // sized by the reads, not the mesh
    for (const auto& r : p.reads) {
      if (r.bytes > std::numeric_limits<std::int64_t>::max() - total_read)
        throw InputError("load plan: its reads add up to more than 2^63 bytes");
      total_read += r.bytes;
      busiest_read = std::max(busiest_read, per_reader[r.reader] += r.bytes);
    }
  }
  if (p.total_read_bytes != total_read)
    throw InputError(fmt::format("load plan: 'total_read_bytes' is {}, its reads add up to {}", p.total_read_bytes, total_read));
  if (p.busiest_read_bytes != busiest_read)
    throw InputError(fmt::format("load plan: 'busiest_read_bytes' is {}, its busiest reader reads {}", p.busiest_read_bytes, busiest_read));
  const double total = p.read_us + p.transfer_us + p.post_us;
  if (!detail::same_time(p.total_us, total))
    throw InputError(fmt::format("load plan: 'total_us' is {}, its reads, transfer and post batch add up to {}", p.total_us, total));
  return p;
}

void check_load_figures(const LoadPlan& plan, std::span<const SavedTensor> saved, std::span<const Layout> targets,
                        const CostModel* cost) {
  // (its entries are the load's, check_load_plan has seen: every index below is in range)
  std::vector<Layout> received;
  for (std::size_t t = 0; t < targets.size(); ++t)
    received.push_back(plan.received_layout(static_cast<std::int32_t>(t), targets[t]));
  const auto N = plan.mesh.num_ranks();
  const LoadFigures f = load_figures(
      plan, [&](std::int32_t t) { return static_cast<std::int64_t>(itemsize(saved[static_cast<std::size_t>(t)].dtype)); },
      cost);
  std::int64_t gathered = 0;
  for (const auto t : plan.staged)
    for (std::int64_t r = 0; r < N; ++r) {
      const auto c = plan.mesh.coord_of_rank(r);
      const Layout& to = targets[static_cast<std::size_t>(t)];
      gathered += (to.local_numel(c) - received[static_cast<std::size_t>(t)].local_numel(c)) *
                  static_cast<std::int64_t>(itemsize(to.dtype()));
    }
  auto same = [](const char* field, std::int64_t have, std::int64_t want) {
    if (have != want) throw InputError(fmt::format("load plan: '{}' is {}, its entries give {}", field, have, want));
  };
  same("balanced_read_bytes", plan.balanced_read_bytes, f.balanced_read);
  same("moved_bytes", plan.moved_bytes, f.moved);
  same("busiest_transfer_bytes", plan.busiest_transfer_bytes, f.busiest_transfer);
  same("busiest_peers", plan.busiest_peers, f.busiest_peers);
  same("gathered_bytes", plan.gathered_bytes, gathered);
  if (!detail::same_time(plan.post_us, plan.staged.empty() ? 0.0 : plan.post.total_cost_us))
    throw InputError(fmt::format("load plan: 'post_us' is {}, its post batch's total is {}", plan.post_us,
                                 plan.staged.empty() ? 0.0 : plan.post.total_cost_us));
  if (!cost) return;
  if (plan.cost_model != cost->name)
    throw InputError(fmt::format("load plan: priced under cost model {}, not {} (check it with the model it was made with)",
                                 quote_input(plan.cost_model), quote_input(cost->name)));
  if (plan.inter_host != f.inter_host)
    throw InputError(fmt::format("load plan: 'inter_host' is {}, its messages {} cross hosts of {} devices", plan.inter_host,
                                 f.inter_host ? "do" : "do not", cost->devices_per_host));
  const StorageParams& st = plan.storage;
  if (!(st.read_bw_GBps > 0) || !(st.read_alpha_us >= 0))
    throw InputError(fmt::format("load plan: read bandwidth {} GB/s and latency {} us: bandwidth positive, latency not "
                                 "negative", st.read_bw_GBps, st.read_alpha_us));
  if (!detail::same_time(plan.read_us, f.read_us))
    throw InputError(fmt::format("load plan: 'read_us' is {}, its reads take {} at {} GB/s and {} us a chunk", plan.read_us,
                                 f.read_us, st.read_bw_GBps, st.read_alpha_us));
  if (!detail::same_time(plan.transfer_us, f.transfer_us))
    throw InputError(fmt::format("load plan: 'transfer_us' is {}, its messages take {} under {}", plan.transfer_us,
                                 f.transfer_us, quote_input(cost->name)));
}

void check_load_plan(const LoadPlan& plan, std::span<const SavedTensor> saved, std::span<const Layout> targets,
                     const CostModel* cost) {
  check_load_entries(plan, saved, targets);
  check_load_figures(plan, saved, targets, cost);
}

void check_load_entries(const LoadPlan& plan, std::span<const SavedTensor> saved, std::span<const Layout> targets) {
  const Inputs in = check_inputs(saved, targets);
  const Mesh& mesh = in.mesh;
  if (!(mesh == plan.mesh))
    throw InputError(fmt::format("load plan: made for mesh {}, the targets are on {}", plan.mesh.str(), mesh.str()));
  if (plan.post.size() != plan.staged.size())
    throw InputError(fmt::format("load plan: 'post' holds {} tensors for {} staged", plan.post.size(), plan.staged.size()));
  std::vector<Layout> received(targets.begin(), targets.end());
  if (!plan.staged.empty()) validate_batch_plan(plan.post);
  for (std::size_t i = 0; i < plan.staged.size(); ++i) {
    const auto t = plan.staged[i];
    if (t < 0 || static_cast<std::size_t>(t) >= targets.size() || (i > 0 && plan.staged[i - 1] >= t))
      throw InputError(fmt::format("load plan: staged tensor {} is out of range, order or repeated", t));
    const Plan& q = plan.post.plan(i);
    const std::string& name = saved[static_cast<std::size_t>(t)].name;
    if (!(q.dst == targets[static_cast<std::size_t>(t)]))
      throw InputError(fmt::format("load plan: tensor {}: the post plan ends in {}, the target is {}", name, q.dst.str(),
                                   targets[static_cast<std::size_t>(t)].str()));
    if (!(q.src.mesh() == mesh) || q.src.shape() != q.dst.shape() || q.src.dtype() != q.dst.dtype())
      throw InputError(fmt::format("load plan: tensor {}: the post plan starts from {}, not on the target's mesh, shape "
                                   "and dtype", name, q.src.str()));
    for (int m = 0; m < mesh.ndim(); ++m)
      if (q.src.sharding().partial(m))
        throw InputError(fmt::format("load plan: tensor {}: intermediate {} has a Partial", name, q.src.str()));
    received[static_cast<std::size_t>(t)] = q.src;
  }
  BlocksCache blocks;
  const Chunks cs = chunks_of(saved, received, in.same_saved, blocks);
  const std::vector<Chunk>& chunks = cs.list;
  if (plan.reads.size() != chunks.size())
    throw InputError(fmt::format("load plan: {} reads for the {} saved chunks with bytes", plan.reads.size(), chunks.size()));
  std::size_t m = 0;
  for (std::size_t k = 0; k < chunks.size(); ++k) {
    const Chunk& ch = chunks[k];
    const auto& r = plan.reads[k];
    const std::string& name = saved[static_cast<std::size_t>(ch.tensor)].name;
    if (r.tensor != ch.tensor || r.chunk != ch.index || r.bytes != ch.bytes || r.reader < 0 || r.reader >= mesh.num_ranks())
      throw InputError(fmt::format("load plan: read {} is of tensor {} chunk {} ({} bytes); the load's is tensor {} chunk {} "
                                   "({} bytes)", k, r.tensor, r.chunk, r.bytes, name, ch.index, ch.bytes));
    for (const auto& [to, elements] : cs.of(k)) {
      if (m >= plan.messages.size())
        throw InputError(fmt::format("load plan: tensor {} chunk {}: no message to rank {}", name, ch.index, to));
      const auto& x = plan.messages[m++];
      if (x.tensor != ch.tensor || x.chunk != ch.index || x.to != to || x.elements != elements || x.from != r.reader)
        throw InputError(fmt::format("load plan: tensor {} chunk {}: rank {} needs {} elements from reader {}; the plan's "
                                     "message is tensor {} chunk {}, {} elements from {} to {}", name, ch.index, to, elements,
                                     r.reader, x.tensor, x.chunk, x.elements, x.from, x.to));
    }
  }
  if (m != plan.messages.size())
    throw InputError(fmt::format("load plan: {} messages more than the load's {}", plan.messages.size() - m, m));
}

std::string show_tensor(const LoadPlan& plan, std::span<const SavedTensor> saved, std::int32_t tensor) {
  if (tensor < 0 || static_cast<std::size_t>(tensor) >= saved.size())
    throw InputError(fmt::format("tensor index {} is not one of the {} saved tensors", tensor, saved.size()));
  const SavedTensor& t = saved[static_cast<std::size_t>(tensor)];
  const auto lo = std::lower_bound(plan.reads.begin(), plan.reads.end(), tensor,
                                   [](const LoadPlan::Read& r, std::int32_t v) { return r.tensor < v; });
  auto m = std::lower_bound(plan.messages.begin(), plan.messages.end(), tensor,
                            [](const LoadPlan::Message& x, std::int32_t v) { return x.tensor < v; });
  std::string o = fmt::format("{}: shape {} {}, {} saved chunk(s)\n", t.name, shape_str(t.shape), to_string(t.dtype), t.chunks.size());
  if (const auto st = std::lower_bound(plan.staged.begin(), plan.staged.end(), tensor);
      st != plan.staged.end() && *st == tensor && plan.post.size() == plan.staged.size()) {
    const Plan& q = plan.post.plan(static_cast<std::size_t>(st - plan.staged.begin()));
    o += fmt::format("  received as {}, then gathered to {} ({} step(s), {:.3f} us alone)\n", q.src.placements_str(),
                     q.dst.placements_str(), q.steps.size(), q.total_cost_us);
  }
  for (auto r = lo; r != plan.reads.end() && r->tensor == tensor; ++r) {
    if (r->chunk < 0 || static_cast<std::size_t>(r->chunk) >= t.chunks.size())
      throw InputError(fmt::format("load plan: tensor {} has no chunk {}", t.name, r->chunk));
    o += fmt::format("  chunk {:>4} ({}): read by rank {}, {} bytes ->", r->chunk, chunk_str(t.chunks[static_cast<std::size_t>(r->chunk)]),
                     r->reader, r->bytes);
    while (m != plan.messages.end() && m->tensor == tensor && m->chunk < r->chunk) ++m;
    for (; m != plan.messages.end() && m->tensor == tensor && m->chunk == r->chunk; ++m)
      o += fmt::format(" {}{}:{}", m->to == r->reader ? "=" : "", m->to, m->elements);
    o += "\n";
  }
  o += "  (-> rank:elements per receiving rank; '=' the reader itself, a local copy)\n";
  return o;
}

}  // namespace dtensor

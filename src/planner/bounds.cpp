// The A* lower bounds of the redistribution search (docs/planner.md, "Lower bound"): what any
// path from a state to the target must still cost. Each term is admissible and consistent
// (tests/test_bounds.cpp checks both on every edge of small graphs), so the search's result is
// exactly Dijkstra's optimum.
#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <cmath>
#include <limits>
#include <queue>

#include "bounds.hpp"
#include "placement/odometer.hpp"

namespace dtensor {

Bounds::Bounds(const Query& q)
    : mesh(q.mesh), shape(q.shape), dtype(q.dtype), cost(q.cost), edges(q.edges), src(q.src), dst(q.dst), geo(q.geo),
      numel(q.numel) {
  empty_tensor_ = numel == 0;
  init_bounds();
}

void Bounds::init_bounds() {
  // every field but the name and the curves (a fitted profile's curves are the bulk of a copy)
  optimistic_.formula = cost.formula;
  optimistic_.devices_per_host = cost.devices_per_host;
  optimistic_.copy_bw_GBps = cost.copy_bw_GBps;
  if (!cost.prices_by_shard_count() && !cost.curves.empty()) {
    build_envelopes();  // (bound_link's constants too, with them)
  } else {
    optimistic_.intra = cost.bound_link(false);
    optimistic_.inter = cost.bound_link(true);
  }
  // wire_floor_us's rate, once (CostModel::wire_floor_us derives it from both links per call)
  recv_floor_bytes_per_us_ = cost.prices_by_shard_count() ? 0.0 : optimistic_.receive_floor_bytes_per_us();
  // Per mesh dim, the cheapest communication step over it alone: a reduce_scatter of nothing
  // (every collective kind pays at least its latency), whose PyTorch-formula bytes are counted
  // over at most every mesh dim's shards.
  for (int m = 0; m < mesh.ndim(); ++m) {
    if (mesh.size(m) <= 1) {
      comm_floor_us_.push_back(0);
      continue;
    }
    Traffic t;
    t.collective = Collective::reduce_scatter;
    t.group = mesh.size(m);
    t.inter_host = cost.is_inter_host(mesh.shape(), m);
    t.shard_bytes = numel * static_cast<double>(itemsize(dtype)) / static_cast<double>(mesh.num_ranks());
    comm_floor_us_.push_back(optimistic_.time(t).total_us());
  }

  if (edges == EdgeSet::pytorch) build_abstraction();

  // Target tables for the lower bound: per tensor dim, every rank's variant and its size.
  // The bound is a max over ranks, so any subset of ranks still gives a lower bound: every rank
  // of a mesh of at most 16, else at most 16 ranks on the mesh's diagonal and anti-diagonal
  // (coordinates t mod n and n - 1 - t mod n on every mesh dim of n ranks, for at most 8 values
  // of t spread over the longest dim): every coordinate of the dims of up to 8 ranks, the first
  // and last rank, and a set that swapping mesh dims of one size maps onto itself (each point
  // has equal coordinates on them), which keeps interchangeable mesh dims mergeable.
  const std::int64_t R = mesh.num_ranks();
  coords_.ndim = static_cast<std::size_t>(mesh.ndim());
  auto sample = [&](std::int64_t p) {  // row-major coordinates of rank position p
    const std::size_t at = coords_.flat.size();
    coords_.flat.resize(at + coords_.ndim);
    for (std::size_t d = coords_.ndim; d-- > 0;) {
      coords_.flat[at + d] = p % mesh.size(static_cast<int>(d));
      p /= mesh.size(static_cast<int>(d));
    }
  };
  coords_.flat.reserve(coords_.ndim * 16);
  if (R <= 16) {
    for (std::int64_t p = 0; p < R; ++p) sample(p);
  } else {
    std::int64_t longest = 1;
    for (int m = 0; m < mesh.ndim(); ++m) longest = std::max(longest, mesh.size(m));
    const std::int64_t values = std::min<std::int64_t>(longest, 8);
    boost::container::small_vector<std::int64_t, 16> taken;  // rank positions, in sample order
    for (int anti = 0; anti < 2; ++anti)
      for (std::int64_t k = 0; k < values; ++k) {
        const std::int64_t t = values == longest ? k : k * (longest - 1) / (values - 1);
        std::int64_t p = 0;
        for (int m = 0; m < mesh.ndim(); ++m) {
          const std::int64_t c = t % mesh.size(m);
          p = p * mesh.size(m) + (anti ? mesh.size(m) - 1 - c : c);
        }
        if (std::find(taken.begin(), taken.end(), p) != taken.end()) continue;
        taken.push_back(p);
        sample(p);
      }
  }
  dst_tables_.reserve(shape.size());
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    DimTable t;
    const auto es = dst.entries(d);
    if (const auto ranges = geo.variant_ranges(es, shape[static_cast<std::size_t>(d)]); !ranges.empty()) {
      t.need.reserve(ranges.size());
      for (const auto& r : ranges) t.need.push_back(r.size());
      t.range = ranges;
    } else {
      for (const auto& set : geo.variant_sets(es, shape[static_cast<std::size_t>(d)])) t.need.push_back(set.size());
    }
    t.variant.reserve(coords_.size());
    for (std::size_t p = 0; p < coords_.size(); ++p) t.variant.push_back(static_cast<std::int32_t>(geo.variant_of(es, coords_[p])));
    dst_tables_.push_back(std::move(t));
  }
  rank_need_.assign(coords_.size(), 1);
  for (std::size_t p = 0; p < coords_.size(); ++p)
    for (const auto& t : dst_tables_) rank_need_[p] *= t.need[static_cast<std::size_t>(t.variant[p])];
  max_rank_need_ = rank_need_.empty() ? 0 : *std::max_element(rank_need_.begin(), rank_need_.end());
  dst_max_numel_ = geo.numel_stats(dst).max;
  for (int m = 0; m < mesh.ndim(); ++m) {
    if (mesh.size(m) < 2) continue;
    if (dst.shard_dim_of(m) >= 0) dst_shards_ = true;
    else if (!dst.partial(m) && (dst_replicate_min_ == 0 || mesh.size(m) < dst_replicate_min_)) dst_replicate_min_ = mesh.size(m);
  }
  build_blocks();
}

void Bounds::build_envelopes() {
  // A step on a link costs at least one of these lines at the bytes its busiest rank receives:
  // a collective's curve charges its band's latency scaled by the group's hops over the fitted
  // group's (at least 1 / hops0, at two ranks) plus its bus bytes (at least what the busiest rank
  // receives) at the band's rate, and never less than that band's value (its monotone floor);
  // without a curve, the link's latency and one hop (ring constants). A direct step prices the
  // send/recv curve (or the link's point-to-point rate) and copies what it receives too.
  // The envelopes (and bound_link's constants, a scan of every band too) depend on the model's
  // curves, links and copy rate only: the last model's, per thread, are reused when all of those
  // compare equal (a job plans with one profile).
  struct Last {
    bool valid = false;
    std::vector<CollectiveCurve> curves;
    LinkParams intra, inter;
    double copy_bw_GBps = 0;
    std::array<Envelope, 3> envelopes;
    LinkParams bound_intra, bound_inter;
  };
  thread_local Last last;
  if (last.valid && last.copy_bw_GBps == cost.copy_bw_GBps && last.intra == cost.intra && last.inter == cost.inter &&
      last.curves == cost.curves) {
    envelopes_ = last.envelopes;
    optimistic_.intra = last.bound_intra;
    optimistic_.inter = last.bound_inter;
    return;
  }
  optimistic_.intra = cost.bound_link(false);
  optimistic_.inter = cost.bound_link(true);
  using Lines = boost::container::small_vector<std::pair<double, double>, 32>;
  const double per_copy = cost.copy_bw_GBps > 0 ? 1.0 / (cost.copy_bw_GBps * 1e3) : 0.0;
  std::array<Lines, 2> lines;  // per link
  std::array<std::uint32_t, 2> priced{};  // per link, bit c: collective c has its curve (the first one, as CostModel::curve)
  for (const auto& cv : cost.curves) {
    const auto bit = 1u << static_cast<unsigned>(cv.collective);
    auto& seen = priced[cv.inter_host ? 1 : 0];
    if (seen & bit) continue;
    seen |= bit;
    const bool direct = cv.collective == Collective::send_recv;
    const double hops0 = direct ? 1.0 : static_cast<double>(std::max<std::int64_t>(cv.ranks - 1, 1));
    for (const auto& band : cv.bands)
      lines[cv.inter_host ? 1 : 0].emplace_back(band.alpha_us / hops0, 1.0 / (band.bw_GBps * 1e3) + (direct ? per_copy : 0.0));
  }
  for (int x = 0; x < 2; ++x) {
    const LinkParams& L = cost.link(x == 1);
    const double alpha = L.alpha_us + L.alpha_per_peer_us;
    for (Collective c : {Collective::all_gather, Collective::reduce_scatter, Collective::all_reduce, Collective::all_to_all})
      if (!(priced[static_cast<std::size_t>(x)] & 1u << static_cast<unsigned>(c))) {
        lines[static_cast<std::size_t>(x)].emplace_back(alpha, 1.0 / (L.bw_GBps * 1e3));
        break;  // (one line serves every collective without a curve)
      }
    if (!(priced[static_cast<std::size_t>(x)] & 1u << static_cast<unsigned>(Collective::send_recv)))
      lines[static_cast<std::size_t>(x)].emplace_back(alpha, 1.0 / (L.p2p_bw_GBps * 1e3) + per_copy);
  }
  // The lower envelope over bytes >= 0: from the line of least latency (then flattest), each next
  // line is the flatter one whose crossing with the current comes first (the earliest, then the
  // flattest); the rest never attain the minimum, and dropping them changes no value.
  auto envelope = [](std::span<const std::pair<double, double>> all) {
    Envelope e;
    std::pair<double, double> cur = *std::min_element(all.begin(), all.end());
    e.lines.push_back(cur);
    for (;;) {
      // crossing at (l.a - cur.a) / (cur.s - l.s) bytes: compared by cross-multiplying
      const std::pair<double, double>* next = nullptr;
      for (const auto& l : all) {
        if (l.second >= cur.second) continue;
        if (next == nullptr) {
          next = &l;
          continue;
        }
        const double lhs = (l.first - cur.first) * (cur.second - next->second);
        const double rhs = (next->first - cur.first) * (cur.second - l.second);
        if (lhs < rhs || (lhs == rhs && l.second < next->second)) next = &l;
      }
      if (next == nullptr) break;
      cur = *next;
      e.lines.push_back(cur);
    }
    return e;
  };
  envelopes_.emplace();
  auto& env = *envelopes_;
  env[kIntra] = envelope({lines[0].data(), lines[0].size()});
  env[kInter] = envelope({lines[1].data(), lines[1].size()});
  // either link: the envelope of both envelopes' lines (the others never attain the minimum)
  Lines both(env[kIntra].lines.begin(), env[kIntra].lines.end());
  both.insert(both.end(), env[kInter].lines.begin(), env[kInter].lines.end());
  env[kEither] = envelope({both.data(), both.size()});
  last.valid = false;  // (a throwing copy leaves no half-made entry)
  last.curves = cost.curves;
  last.intra = cost.intra;
  last.inter = cost.inter;
  last.copy_bw_GBps = cost.copy_bw_GBps;
  last.envelopes = env;
  last.bound_intra = optimistic_.intra;
  last.bound_inter = optimistic_.inter;
  last.valid = true;
}

double Bounds::receive_floor_us(double bytes, bool inter, bool intra) const noexcept {
  if (cost.prices_by_shard_count() || bytes <= 0) return 0;
  if (!inter && !intra) return receive_either_us(bytes);
  if (envelopes_) return (*envelopes_)[inter ? kInter : kIntra].at(bytes);
  const LinkParams& l = inter ? optimistic_.inter : optimistic_.intra;
  return l.alpha_us + bytes / (optimistic_.receive_bw_floor_GBps(inter) * 1e3);
}

namespace {
// A memo key for (tensor dim, entries); the tables keep the entries to rule out collisions.
std::uint64_t entries_key(int d, Entries e) {
  std::uint64_t key = static_cast<std::uint64_t>(d) * 0x9e3779b97f4a7c15ULL;
  for (const auto& x : e)
    key = (key ^ (static_cast<std::uint64_t>(x.mesh_dim) | (static_cast<std::uint64_t>(x.split_factor) << 8) |
                  (x.strided ? 1ULL << 7 : 0))) * 0x100000001b3ULL + 0x51;
  return key;
}
// At most this many ranks per block are enumerated to build the block unions.
constexpr std::int64_t kMaxBlockRanks = 256;
}  // namespace

void Bounds::build_blocks() {
  // Ring formulas only (the PyTorch formula's wire time is not a function of the bytes that
  // cross), a tensor with elements, and a target without Partial (a target Partial can be made
  // without the data: S -> P(sum) locally).
  if (cost.prices_by_shard_count() || empty_tensor_) return;
  for (int m = 0; m < mesh.ndim(); ++m)
    if (dst.partial(m)) return;
  Blocks B;
  B.intra.assign(static_cast<std::size_t>(mesh.ndim()), 0);
  B.inter.assign(static_cast<std::size_t>(mesh.ndim()), 0);
  bool any_inter = false;
  for (int m = 0; m < mesh.ndim(); ++m) {
    if (mesh.size(m) < 2) continue;
    const bool x = cost.is_inter_host(mesh.shape(), m);
    (x ? B.inter : B.intra)[static_cast<std::size_t>(m)] = 1;
    any_inter = any_inter || x;
    if (!x) B.ranks *= mesh.size(m);
  }
  if (!any_inter || B.ranks > kMaxBlockRanks) return;  // one block: the per-rank term says more
  // Sample some blocks (any subset keeps the max a lower bound; the term is computed for every
  // state met, so fewer is cheaper): block k's member with intra coordinates 0. The blocks whose
  // inter coordinates sum to a multiple of q = nblocks / 4: about 4 (every block of a grid of
  // up to 7), and a set that a relabeling of interchangeable mesh dims maps onto itself (so it
  // keeps their merge, sample_invariant). On grids of more than 1024 blocks, or where that leaves
  // fewer than 4 (coordinate sums that stay below q), at most 16 in row-major order instead.
  std::vector<int> xdims;
  std::int64_t nblocks = 1;
  for (int m = 0; m < mesh.ndim(); ++m)
    if (B.inter[static_cast<std::size_t>(m)]) {
      xdims.push_back(m);
      nblocks *= mesh.size(m);
    }
  auto block_coord = [&](std::int64_t k) {  // row-major over the inter dims, the others 0
    std::array<std::int64_t, Sharding::kMaxMeshDims> c{};
    for (std::size_t i = xdims.size(); i-- > 0;) {
      c[static_cast<std::size_t>(xdims[i])] = k % mesh.size(xdims[i]);
      k /= mesh.size(xdims[i]);
    }
    return c;
  };
  auto keep = [&](const std::array<std::int64_t, Sharding::kMaxMeshDims>& c) { B.coords.emplace_back(c.begin(), c.begin() + mesh.ndim()); };
  const std::int64_t q = std::max<std::int64_t>(1, nblocks / 4);
  if (nblocks <= 1024) {
    for (std::int64_t k = 0; k < nblocks; ++k) {
      const auto c = block_coord(k);
      std::int64_t sum = 0;
      for (int m : xdims) sum += c[static_cast<std::size_t>(m)];
      if (sum % q == 0) keep(c);
    }
  }
  if (B.coords.size() < 4) {
    B.coords.clear();
    const std::int64_t step = std::max<std::int64_t>(1, nblocks / 16);
    for (std::int64_t k = 0; k < nblocks; k += step) keep(block_coord(k));
  }
  B.alpha_us = optimistic_.inter.alpha_us;
  B.bw_GBps = optimistic_.receive_bw_floor_GBps(true);
  B.intra_alpha_us = optimistic_.intra.alpha_us;
  B.intra_bw_GBps = optimistic_.receive_bw_floor_GBps(false);
  blocks_ = std::move(B);
  Blocks& b = *blocks_;
  b.need_numel.assign(b.coords.size(), 1.0);
  b.rank_need_numel.assign(b.coords.size(), 1.0);
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    std::vector<IndexSet> per;
    std::vector<std::int64_t> mine;
    for (std::size_t k = 0; k < b.coords.size(); ++k) {
      per.push_back(block_union(d, dst.entries(d), b.coords[k]));
      b.need_numel[k] *= static_cast<double>(per.back().size());
      mine.push_back(owned_count(dst.entries(d), shape[static_cast<std::size_t>(d)], mesh.shape(), b.coords[k]));
      b.rank_need_numel[k] *= static_cast<double>(mine.back());
    }
    b.need.push_back(std::move(per));
    b.rank_need.push_back(std::move(mine));
  }
}

bool Bounds::sample_invariant(int i, int j) const {
  const auto ui = static_cast<std::size_t>(i), uj = static_cast<std::size_t>(j);
  auto closed = [&](std::size_t n, auto at) {  // at(k): sampled coordinate k
    for (std::size_t k = 0; k < n; ++k) {
      const auto c = at(k);
      bool found = false;
      for (std::size_t l = 0; l < n && !found; ++l) {
        const auto o = at(l);
        found = o[ui] == c[uj] && o[uj] == c[ui];
        for (std::size_t m = 0; m < c.size() && found; ++m)
          if (m != ui && m != uj) found = o[m] == c[m];
      }
      if (!found) return false;
    }
    return true;
  };
  if (!closed(coords_.size(), [&](std::size_t k) { return coords_[k]; })) return false;
  return !blocks_ || closed(blocks_->coords.size(), [&](std::size_t k) { return std::span<const std::int64_t>(blocks_->coords[k]); });
}

// The elements along dim d that some rank of `coord`'s block owns under `e` (the union over
// the intra-host coordinates of e's mesh dims).
IndexSet Bounds::block_union(int d, Entries e, std::span<const std::int64_t> coord0) const {
  const auto& ms = mesh.shape();
  std::array<std::int64_t, Sharding::kMaxMeshDims> buf{};  // the coordinates, the free ones turned
  std::copy(coord0.begin(), coord0.end(), buf.begin());
  const std::span<std::int64_t> coord(buf.data(), coord0.size());
  const auto len = shape[static_cast<std::size_t>(d)];
  std::array<int, Sharding::kMaxMeshDims> free{};
  std::size_t nfree = 0, first = e.size();
  for (std::size_t k = 0; k < e.size(); ++k)
    if (blocks_->intra[static_cast<std::size_t>(e[k].mesh_dim)]) {
      free[nfree++] = e[k].mesh_dim;
      coord[static_cast<std::size_t>(e[k].mesh_dim)] = 0;
      first = std::min(first, k);
    }
  // Splits over intra-host dims last: every element of the list before them has one owner among
  // their coordinates (chunks and strided picks cover their list), so the union is that list.
  if (first + nfree == e.size()) return owned_indices(std::span<const ShardEntry>(e).first(first), len, ms, coord);
  std::vector<Interval> runs;
  do {
    if (const auto r = owned_range(e, len, ms, coord)) {
      runs.push_back(*r);
    } else {
      const auto set = owned_indices(e, len, ms, coord);
      runs.insert(runs.end(), set.runs().begin(), set.runs().end());
    }
  } while (detail::next_digits(
      nfree, [&](std::size_t k) -> auto& { return coord[static_cast<std::size_t>(free[k])]; },
      [&](std::size_t k) { return ms[static_cast<std::size_t>(free[k])]; }));
  return IndexSet::union_of(std::move(runs));
}

// Without strided entries every rank owns one range along d, and a block's union is a list of
// ranges found by descending the entries in order: a fixed coordinate narrows the range to its
// chunk, an intra-host mesh dim (free within the block) takes each of its chunks in turn, and
// where only free dims remain the whole range is owned. The ranges come out ascending and
// disjoint (an earlier entry splits more coarsely), so they meet `need`'s runs in one pass.
std::int64_t Bounds::block_overlap(int d, Entries e, std::span<const std::int64_t> coord, const IndexSet& need) const {
  for (const auto& x : e)
    if (x.split_factor != 1) return need.overlap(block_union(d, e, coord));
  const auto& ms = mesh.shape();
  const auto& intra = blocks_->intra;
  // from position j on, only intra-host (free) mesh dims
  std::array<char, Sharding::kMaxMeshDims + 1> free_tail{};
  free_tail[e.size()] = 1;
  for (std::size_t j = e.size(); j-- > 0;)
    free_tail[j] = free_tail[j + 1] && intra[static_cast<std::size_t>(e[j].mesh_dim)];
  const auto runs = need.runs();
  std::size_t p = 0;  // the first of need's runs that may meet the next range
  std::int64_t total = 0;
  auto meet = [&](std::int64_t a, std::int64_t b) {
    while (p < runs.size() && runs[p].stop <= a) ++p;
    for (std::size_t q = p; q < runs.size() && runs[q].start < b; ++q)
      total += std::min(b, runs[q].stop) - std::max(a, runs[q].start);
  };
  auto descend = [&](auto&& self, std::size_t j, std::int64_t start, std::int64_t len) -> void {
    for (; !free_tail[j]; ++j) {
      const auto m = static_cast<std::size_t>(e[j].mesh_dim);
      if (intra[m]) {
        for (std::int64_t i = 0; i < ms[m]; ++i) {
          const auto c = chunk_bounds(len, ms[m], i);
          if (c.end > c.begin) self(self, j + 1, start + c.begin, c.end - c.begin);
        }
        return;
      }
      const auto c = chunk_bounds(len, ms[m], coord[m]);
      start += c.begin;
      len = c.end - c.begin;
    }
    if (len > 0) meet(start, start + len);
  };
  descend(descend, 0, 0, shape[static_cast<std::size_t>(d)]);
  return total;
}

std::int64_t Bounds::block_count(int d, Entries e, std::size_t k, bool reference) const {
  const IndexSet& need = blocks_->need[static_cast<std::size_t>(d)][k];
  const auto& coord = blocks_->coords[k];
  return reference ? need.overlap(block_union(d, e, coord)) : block_overlap(d, e, coord, need);
}

std::uint32_t Bounds::held_record(int d, Entries e) const {
  const std::uint64_t key = entries_key(d, e);
  std::size_t free_at = 0;
  if (const HeldSlot* hit = held_slots_.find(key >> 40, [&](HeldSlot x) { return held_[x.r1 - 1].same(d, e); }, free_at))
    return hit->r1 - 1;
  if (2 * (held_.size() + 1) > held_slots_.slot_count()) {
    // (the records and their counts grow with the table)
    const std::size_t slots = std::max<std::size_t>(16, 2 * held_slots_.slot_count());
    held_.reserve(slots / 2);
    held_values_.reserve(slots / 2 * coords_.size());
  }
  HeldRecord x;
  std::copy(e.begin(), e.end(), x.v.begin());
  x.n = static_cast<std::uint8_t>(e.size());
  x.d = static_cast<std::int8_t>(d);
  held_.push_back(x);
  held_slots_.insert_at(free_at, key >> 40, HeldSlot{static_cast<std::uint32_t>(held_.size())}, [this](HeldSlot h) {
    const HeldRecord& y = held_[h.r1 - 1];
    return entries_key(y.d, Entries(y.v.data(), y.n)) >> 40;
  });
  return static_cast<std::uint32_t>(held_.size() - 1);
}

std::size_t Bounds::block_held(std::uint32_t r) const {
  if (held_[r].block_at >= 0) return static_cast<std::size_t>(held_[r].block_at);
  const int d = held_[r].d;
  const Entries e(held_[r].v.data(), held_[r].n);
  const Blocks& b = *blocks_;
  const std::size_t nb = b.coords.size(), at = held_values_.size();
  held_values_.resize(at + 2 * nb);
  std::int64_t* block = held_values_.data() + at;
  std::int64_t* rank = block + nb;
  const bool same = e == dst.entries(d);
  const Entries want = dst.entries(d);
  std::uint32_t used = 0;  // the mesh dims of e and of the target's entries
  for (const auto& x : e) used |= 1u << x.mesh_dim;
  for (const auto& x : want) used |= 1u << x.mesh_dim;
  // Both counts depend on the block only through its coordinates on the mesh dims of e and of
  // the target's entries (the sampled member's intra-host coordinates are 0): computed once per
  // distinct such coordinate.
  boost::container::small_vector<std::pair<std::uint64_t, std::size_t>, 32> seen;  // (coordinate key, first block)
  for (std::size_t k = 0; k < nb; ++k) {
    const IndexSet& need = b.need[static_cast<std::size_t>(d)][k];
    if (same) {
      block[k] = need.size();
      rank[k] = b.rank_need[static_cast<std::size_t>(d)][k];
      continue;
    }
    std::uint64_t key = 0;
    for (int m = 0; m < mesh.ndim(); ++m)
      key = key * static_cast<std::uint64_t>(mesh.size(m) + 1) +
            ((used >> m) & 1u ? static_cast<std::uint64_t>(b.coords[k][static_cast<std::size_t>(m)]) : 0);
    auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& x) { return x.first == key; });
    if (it != seen.end()) {
      block[k] = block[it->second];
      rank[k] = rank[it->second];
      continue;
    }
    seen.emplace_back(key, k);
    block[k] = block_overlap(d, e, b.coords[k], need);
    rank[k] = owned_overlap(e, b.coords[k], want, b.coords[k], shape[static_cast<std::size_t>(d)], mesh.shape());
  }
  held_[r].block_at = static_cast<std::int32_t>(at);
  return at;
}

// Any path from `s`, split into the steps over inter-host mesh dims (the only ones that move data
// between blocks, all charged the inter link) and the rest (within blocks, the intra link). Per
// sampled block: the elements the block needs and none of its ranks holds (all it needs while a
// Partial over an inter-host mesh dim is unreduced: each reduced value needs a contribution from
// another block) enter it in inter-host steps; some rank of the block receives at least an even
// share of them, and a step costs at least the bytes its busiest rank receives at its link's best
// bandwidth, so the inter-host steps take at least a = entering / ranks / inter bandwidth. The
// block's sampled rank must also receive every element it lacks: x of them in inter-host steps
// (then those take at least x / inter bandwidth) and the rest within the block. The least total
// over x (a piecewise-linear minimum: x at a's volume or x all it lacks) is the bound.
double Bounds::block_bound_us(const Sharding& s, std::span<const std::uint32_t> records, bool* enters) const {
  if (!blocks_) return 0;
  const Blocks& b = *blocks_;
  bool reduce_inter = false, reduce_any = false;
  double contributions = 1;  // per element: the partial values still to combine
  for (int m = 0; m < mesh.ndim(); ++m) {
    if (mesh.size(m) < 2 || !s.partial(m)) continue;  // the target has no Partial (build_blocks)
    reduce_any = true;
    reduce_inter = reduce_inter || b.inter[static_cast<std::size_t>(m)];
    contributions *= static_cast<double>(mesh.size(m));
  }
  // With a Partial over an inter-host dim unreduced a block and its rank lack all they need:
  // the term then depends on nothing else of the state, and is computed once per query.
  if (reduce_inter && b.all_lacking_us >= 0) {
    if (enters != nullptr && b.all_lacking_enters) *enters = true;
    return b.all_lacking_us;
  }
  const int nd = static_cast<int>(shape.size());
  // (what they hold, the block tables, is then not asked)
  std::array<std::size_t, Sharding::kMaxTensorDims> held_at{};
  if (!reduce_inter)
    for (int d = 0; d < nd; ++d) held_at[static_cast<std::size_t>(d)] = block_held(records[static_cast<std::size_t>(d)]);
  const std::int64_t* values = held_values_.data();
  const std::size_t nb = b.coords.size();
  const double item = static_cast<double>(geo.itemsize());
  const double bx = b.bw_GBps * 1e3, by = b.intra_bw_GBps * 1e3;  // bytes per us
  double best = 0;
  bool any_enters = false;
  for (std::size_t k = 0; k < b.coords.size(); ++k) {
    double block_have = 1, rank_have = 1;
    for (int d = 0; d < nd && !reduce_inter; ++d) {
      block_have *= static_cast<double>(values[held_at[static_cast<std::size_t>(d)] + k]);
      rank_have *= static_cast<double>(values[held_at[static_cast<std::size_t>(d)] + nb + k]);
    }
    const double entering = reduce_inter ? b.need_numel[k] : b.need_numel[k] - block_have;
    any_enters = any_enters || entering > 0;
    const double lacking = (reduce_any ? b.rank_need_numel[k] : b.rank_need_numel[k] - rank_have) * item;
    if (envelopes_) {
      // the same minimum with each link's envelope (concave: still at x = a's bytes or x = all
      // the rank lacks)
      const Envelope &ex = (*envelopes_)[kInter], &ey = (*envelopes_)[kIntra];
      const double share = std::max(0.0, entering) * item / static_cast<double>(b.ranks);
      const double all_inter = ex.at(std::max(share, lacking));
      best = std::max(best, b.ranks > 1 ? std::min(ex.at(share) + ey.at(lacking - share), all_inter) : all_inter);
    } else {
      const double a = std::max(0.0, entering) * item / static_cast<double>(b.ranks) / bx;
      // everything the rank lacks arrives in inter-host steps
      const double t = std::max(a, lacking / bx);
      const double all_inter = t > 0 ? b.alpha_us + t : 0;
      // the inter-host steps take a; what the rank lacks beyond them arrives within the block
      // (with one rank per block nothing moves within a block)
      const double rest = lacking - a * bx;
      const double split = (a > 0 ? b.alpha_us + a : 0) + (rest > 0 ? b.intra_alpha_us + rest / by : 0);
      best = std::max(best, b.ranks > 1 ? std::min(split, all_inter) : all_inter);
    }
    // Partials over intra-host dims only: the block holds all of an element's contributions.
    // Combining them inside the block takes contributions - 1 transfers (a tree over them) into
    // ranks of the block; otherwise the value (or a partial sum) comes from another block, one
    // transfer that enters it. Per element the cheaper of the two, spread over the block's ranks.
    if (reduce_any && !reduce_inter) {
      const double covered = block_have, uncovered = std::max(0.0, b.need_numel[k] - covered);
      const double per_rank = item / static_cast<double>(b.ranks);
      const double enter_all = b.need_numel[k] * per_rank / bx;
      const double reduce_inside = uncovered * per_rank / bx + (contributions - 1) * covered * per_rank / std::max(bx, by);
      const double t_red = std::min(enter_all, reduce_inside);
      if (t_red > 0) best = std::max(best, std::min(b.alpha_us, b.intra_alpha_us) + t_red);
    }
  }
  if (enters != nullptr && any_enters) *enters = true;
  if (reduce_inter) {
    b.all_lacking_us = best;
    b.all_lacking_enters = any_enters;
  }
  return best;
}

// [rank position] = how many of the target's elements along the record's dim the rank holds
// under its entries.
std::size_t Bounds::held_table(std::uint32_t r) const {
  if (held_[r].rank_at >= 0) return static_cast<std::size_t>(held_[r].rank_at);
  const int d = held_[r].d;
  const Entries e(held_[r].v.data(), held_[r].n);
  const auto& ms = mesh.shape();
  const auto len = shape[static_cast<std::size_t>(d)];
  const auto dst_e = dst.entries(d);
  const std::size_t at = held_values_.size();
  held_values_.resize(at + coords_.size());
  std::int64_t* held = held_values_.data() + at;
  // ranks with the same pair of variants hold the same count: each pair computed once
  boost::container::small_vector<std::pair<std::int64_t, std::size_t>, 32> seen;  // (variant pair, first rank position)
  for (std::size_t p = 0; p < coords_.size(); ++p) {
    const std::int64_t v = geo.variant_of(e, coords_[p]);
    const std::int64_t pair = v * 1000003 + dst_tables_[static_cast<std::size_t>(d)].variant[p];
    auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& x) { return x.first == pair; });
    if (it != seen.end()) {
      held[p] = held[it->second];
      continue;
    }
    seen.emplace_back(pair, p);
    if (e == dst_e) {
      held[p] = owned_count(e, len, ms, coords_[p]);
    } else if (const auto& t = dst_tables_[static_cast<std::size_t>(d)]; !t.range.empty()) {
      // (the target's range of this variant kept from init_bounds: only the state's is found)
      const auto ra = owned_range(e, len, ms, coords_[p]);
      const Interval& rb = t.range[static_cast<std::size_t>(t.variant[p])];
      held[p] = ra ? std::max<std::int64_t>(0, std::min(ra->stop, rb.stop) - std::max(ra->start, rb.start))
                   : owned_overlap(e, coords_[p], dst_e, coords_[p], len, ms);
    } else {
      held[p] = owned_overlap(e, coords_[p], dst_e, coords_[p], len, ms);
    }
  }
  held_[r].rank_at = static_cast<std::int32_t>(at);
  return at;
}

// Classes of a mesh dim's placement for the relaxed graph: 0 R, 1 Shard of the target's tensor
// dim, 2 Shard of another, 3 Partial of the target's op, 4 another Partial.
int Bounds::class_of(const Sharding& s, int m) const noexcept {
  if (const auto p = s.partial(m)) return p == dst.partial(m) ? 3 : 4;
  const int a = s.shard_dim_of(m);
  if (a < 0) return 0;
  return a == dst.shard_dim_of(m) ? 1 : 2;
}

void Bounds::build_abstraction() {
  // Only the pytorch edge set builds it, which has no relabel: every step maps onto a relaxed one.
  if (empty_tensor_) return;
  Abstraction A;
  std::int64_t states_n = 1;
  for (int m = 0; m < mesh.ndim(); ++m) {
    if (mesh.size(m) < 2) continue;  // a one-rank dim's placement changes nothing, at no cost
    std::array<std::int16_t, 5> code{-1, -1, -1, -1, -1};
    std::int16_t k = 0;
    code[0] = k++;                                   // R
    if (dst.shard_dim_of(m) >= 0) code[1] = k++;     // the target's shard
    code[2] = k++;                                   // another shard
    if (dst.partial(m)) code[3] = k++;               // the target's Partial (filled locally)
    if (src.partial(m) && src.partial(m) != dst.partial(m)) code[4] = k++;  // the source's other Partial
    A.dims.push_back(m);
    A.code.push_back(code);
    A.weight.push_back(states_n);
    states_n *= k;
    if (states_n > 20000) return;  // too many classes to pay for: the per-dim bound serves
  }
  const int K = static_cast<int>(A.dims.size());
  const double s = static_cast<double>(itemsize(dtype));
  // decode: class per relaxed dim
  std::vector<std::array<int, 5>> class_of_digit(static_cast<std::size_t>(K));
  for (int k = 0; k < K; ++k)
    for (int c = 0; c < 5; ++c)
      if (A.code[static_cast<std::size_t>(k)][static_cast<std::size_t>(c)] >= 0)
        class_of_digit[static_cast<std::size_t>(k)][static_cast<std::size_t>(A.code[static_cast<std::size_t>(k)][static_cast<std::size_t>(c)])] = c;
  auto digits = [&](std::int64_t idx, std::vector<int>& cls) {
    for (int k = K - 1; k >= 0; --k) {
      cls[static_cast<std::size_t>(k)] = class_of_digit[static_cast<std::size_t>(k)][static_cast<std::size_t>(idx / A.weight[static_cast<std::size_t>(k)])];
      idx %= A.weight[static_cast<std::size_t>(k)];
    }
  };
  std::int64_t goal = 0;
  for (int k = 0; k < K; ++k)
    goal += A.code[static_cast<std::size_t>(k)][static_cast<std::size_t>(class_of(dst, A.dims[static_cast<std::size_t>(k)]))] *
            A.weight[static_cast<std::size_t>(k)];
  // Lexicographic (cost, steps) distances. Under the PyTorch formula costs are summed as the
  // search sums them (each step rounded to integer picoseconds), so they are exact; otherwise
  // they are lower bounds in microseconds and the step counts are not used.
  const bool exact = cost.prices_by_shard_count();
  constexpr std::int64_t kInf = std::numeric_limits<std::int64_t>::max();
  A.dist.assign(static_cast<std::size_t>(states_n), std::numeric_limits<double>::infinity());
  A.dist_ps.assign(static_cast<std::size_t>(states_n), kInf);
  A.steps.assign(static_cast<std::size_t>(states_n), 0);
  A.dist[static_cast<std::size_t>(goal)] = 0;
  A.dist_ps[static_cast<std::size_t>(goal)] = 0;
  using Item = std::tuple<double, std::int64_t, std::int32_t, std::int64_t>;  // us, ps, steps, state
  std::priority_queue<Item, std::vector<Item>, std::greater<>> pq;
  pq.push({0.0, 0, 0, goal});
  std::vector<int> y(static_cast<std::size_t>(K));
  // a relaxed step's cost by (relaxed dim, collective kind, the relaxed dims holding a shard)
  std::vector<double> step_memo(static_cast<std::size_t>(K) * 4 * (std::size_t{1} << K), -1.0);
  // The step as traffic, priced by the optimistic model: PyTorch's bytes are exact (they depend
  // on the shard count alone); for the ring formulas the collective's per-member count is at
  // least the average share of the state it reads (the source's shards; reduce_scatter: the
  // target's, one more split by n; all_to_all: a source shard split n ways), and copies cost at
  // least nothing.
  auto relaxed_step_us = [&](int m, StepKind kind, double shards) {
    const std::int64_t n = mesh.size(m);
    const double nn = static_cast<double>(n);
    Traffic t;
    t.collective = collective_of(kind).value();  // communication kinds only
    t.group = n;
    t.inter_host = cost.is_inter_host(mesh.shape(), m);
    t.shard_bytes = numel * s / shards;
    const bool split = kind == StepKind::reduce_scatter || kind == StepKind::all_to_all;
    const double chunk = std::ceil(numel / (split ? shards * nn : shards));
    t.bytes = (kind == StepKind::all_reduce ? chunk : chunk * nn) * s;  // nccl-tests sizes
    return optimistic_.time(t).total_us();
  };
  auto kind_slot = [](StepKind k) -> std::size_t {
    switch (k) {
      case StepKind::all_gather: return 0;
      case StepKind::all_to_all: return 1;
      case StepKind::all_reduce: return 2;
      default: return 3;  // reduce_scatter
    }
  };
  while (!pq.empty()) {
    const auto [d_us, d_ps, d_steps, yi] = pq.top();
    pq.pop();
    const auto yu = static_cast<std::size_t>(yi);
    if (exact ? (d_ps != A.dist_ps[yu] || d_steps != A.steps[yu]) : d_us > A.dist[yu]) continue;
    digits(yi, y);
    std::uint32_t ymask = 0;  // the relaxed dims holding a shard in y
    for (int j = 0; j < K; ++j)
      if (y[static_cast<std::size_t>(j)] == 1 || y[static_cast<std::size_t>(j)] == 2) ymask |= 1u << j;
    // every predecessor differs from y on one dim k: class v -> y[k] by one step over mesh dim m
    for (int k = 0; k < K; ++k) {
      const int m = A.dims[static_cast<std::size_t>(k)];
      const int to = y[static_cast<std::size_t>(k)];
      for (int v = 0; v < 5; ++v) {
        if (v == to || A.code[static_cast<std::size_t>(k)][static_cast<std::size_t>(v)] < 0) continue;
        std::optional<StepKind> kind;  // nullopt: no step; a local step costs nothing
        bool local = false;
        const bool v_shard = v == 1 || v == 2, v_partial = v == 3 || v == 4;
        if (v == 0) local = to == 1 || to == 2 || to == 3;                       // chunk, fill
        else if (v_shard && to == 0) kind = StepKind::all_gather;
        else if (v_shard && (to == 1 || to == 2)) kind = StepKind::all_to_all;
        else if (v_shard && to == 3) local = dst.partial(m) == ReduceOp::sum;  // S(d) -> P(sum)
        else if (v_partial && to == 0) kind = StepKind::all_reduce;
        else if (v_partial && (to == 1 || to == 2)) kind = StepKind::reduce_scatter;
        if (!kind && !local) continue;
        double c = 0;
        if (kind) {
          // the cost depends on (k, kind, which relaxed dims hold a shard in x = y with v at k): memoised
          const std::uint32_t mask = (ymask & ~(1u << k)) | (v_shard ? 1u << k : 0u);
          const std::size_t memo_at = (static_cast<std::size_t>(k) * 4 + kind_slot(*kind)) * (std::size_t{1} << K) + mask;
          if (step_memo[memo_at] < 0) {
            double shards = 1;
            for (int j = 0; j < K; ++j)
              if (mask & (1u << j)) shards *= static_cast<double>(mesh.size(A.dims[static_cast<std::size_t>(j)]));
            step_memo[memo_at] = relaxed_step_us(m, *kind, shards);
          }
          c = step_memo[memo_at];
        }
        std::int64_t xi = yi + (A.code[static_cast<std::size_t>(k)][static_cast<std::size_t>(v)] -
                                A.code[static_cast<std::size_t>(k)][static_cast<std::size_t>(to)]) *
                                   A.weight[static_cast<std::size_t>(k)];
        const auto xu = static_cast<std::size_t>(xi);
        if (exact) {
          const std::int64_t ps = d_ps + std::llround(c * 1e6);  // as the search rounds each step
          if (ps < A.dist_ps[xu] || (ps == A.dist_ps[xu] && d_steps + 1 < A.steps[xu])) {
            A.dist_ps[xu] = ps;
            A.steps[xu] = d_steps + 1;
            A.dist[xu] = static_cast<double>(ps) * 1e-6;
            pq.push({0.0, ps, d_steps + 1, xi});
          }
        } else if (d_us + c < A.dist[xu]) {
          A.dist[xu] = d_us + c;
          pq.push({d_us + c, 0, 0, xi});
        }
      }
    }
  }
  abstraction_ = std::move(A);
}

Bounds::Bound Bounds::lower_bound(const Sharding& s) const {
  if (s == dst) return {};
  double relaxed = 0;
  if (abstraction_) {
    const auto& A = *abstraction_;
    std::int64_t idx = 0;
    for (std::size_t k = 0; k < A.dims.size(); ++k) {
      const auto digit = A.code[k][static_cast<std::size_t>(class_of(s, A.dims[k]))];
      if (digit < 0) return {1e12, 1};  // a class the relaxed graph says cannot occur: unreachable
      idx += digit * A.weight[k];
    }
    const double d = A.dist[static_cast<std::size_t>(idx)];
    if (!std::isfinite(d)) return {1e12, 1};
    // the PyTorch formula's relaxed distance is exact for every step: nothing else to add
    if (cost.prices_by_shard_count())
      return {d, 1, A.dist_ps[static_cast<std::size_t>(idx)], A.steps[static_cast<std::size_t>(idx)]};
    relaxed = d;
  }
  // pytorch edge set: every step works over one mesh dim, and a mesh dim whose placement must
  // leave Partial(op) (for anything but the same op) or Shard(d) (for anything but a Shard of d,
  // or a target P(sum), which S(d) fills locally) needs a communication step over that very
  // dim: only reduce/gather/all_to_all over it remove them, no step over another dim changes
  // it (the pytorch set has no relabel). The bound adds each such dim's cheapest step; a step
  // lowers that sum by at most its own latency (and PyTorch-formula wire floor).
  double steps = 0;
  if (edges == EdgeSet::pytorch && !empty_tensor_) {
    for (int m = 0; m < mesh.ndim(); ++m) {
      const auto want = dst.partial(m);
      bool needs = false;
      if (const auto have = s.partial(m)) needs = want != have;
      else if (const int a = s.shard_dim_of(m); a >= 0) needs = dst.shard_dim_of(m) != a && want != ReduceOp::sum;
      if (needs) steps += comm_floor_us_[static_cast<std::size_t>(m)];
    }
  }
  // The elements a rank still lacks: at least their bytes cross a link (default formula), and
  // at least one latency is paid. S(d) -> P(sum) fills locally: a target P(sum) the state lacks
  // can be made from any shard, so then nothing is counted as missing.
  // Any state can get there: a state holding the target's P(sum) reaches one that lacks it in a
  // step (e.g. a reduce_scatter), so a missing count taken only from states holding it would
  // drop by more than that step costs (an inconsistent bound: tests/test_bounds.cpp).
  // Reductions still to make (ring formulas): every element has as many contributions as the
  // ranks over the state's Partial mesh dims (they do not split the tensor), c_s, and the target
  // keeps c_t. Only a reduction lowers that count, and it receives, summed over all ranks, at
  // least the contributions it combines (an all_reduce over n ranks: 2(n-1)/n of every rank's
  // shard; a reduce_scatter: (n-1)/n of its input), so the ranks must still receive at least
  // numel * (c_s - c_t) elements in all and the busiest at least 1/R of that, at the fastest
  // receive rate, plus one step's latency. Relabel, copies, gathers, all_to_all and direct
  // steps keep every element's count; a local fill raises it.
  const double reduce_us = reduction_bound_us(s);
  // the last step's term, where it says more than the others (it asks whether `s` is equivalent
  // to the target, so it is computed last)
  auto with_last = [&](double others, std::int64_t missing) {
    Bound b{others, missing};
    const double last = last_step_bound_us(s, missing);
    // (an equivalent state owns what the target does: one that lacks anything is not)
    if (last > others && (missing > 0 || !equivalent(s, dst, mesh.shape(), shape))) {
      b.us = last;
      b.before_last_us = others;
    }
    return b;
  };
  bool reduce = false;
  for (int m = 0; m < mesh.ndim(); ++m) {
    if (mesh.size(m) == 1) continue;  // a Partial over one rank is already its value (relabel)
    const auto have = s.partial(m), want = dst.partial(m);
    if (want == ReduceOp::sum) return with_last(std::max({relaxed, steps, reduce_us}), 0);
    if (have && have != want) reduce = true;  // every needed element must still be reduced
  }
  // With a per-dim sum under the PyTorch formula, the missing count adds nothing: skip it.
  if (steps > 0 && cost.prices_by_shard_count()) return {steps, 1};
  const int nd = static_cast<int>(shape.size());
  // With a reduction pending every needed element counts as missing: what the state holds
  // (the held tables, the costly part of this bound) is then not asked.
  // (each tensor dim's record found once, for both bounds that read it)
  std::array<std::uint32_t, Sharding::kMaxTensorDims> records{};
  if (!reduce || blocks_)
    for (int d = 0; d < nd; ++d) records[static_cast<std::size_t>(d)] = held_record(d, s.entries(d));
  std::array<std::size_t, Sharding::kMaxTensorDims> held_at{};
  if (!reduce)
    for (int d = 0; d < nd; ++d) held_at[static_cast<std::size_t>(d)] = held_table(records[static_cast<std::size_t>(d)]);
  // The PyTorch formula's bound only asks whether anything is missing: stop at the first rank.
  const bool any_only = cost.prices_by_shard_count();
  // (with a reduction pending the busiest sampled rank lacks its whole need: no loop)
  const bool all_lack = reduce && !any_only;
  std::int64_t worst = all_lack ? max_rank_need_ : 0, lacking = 0;
  for (std::size_t p = 0; p < coords_.size() && !all_lack; ++p) {
    const std::int64_t need = rank_need_[p];
    std::int64_t have = 1;
    for (int d = 0; d < nd && !reduce; ++d) have *= held_values_[held_at[static_cast<std::size_t>(d)] + p];
    worst = std::max(worst, reduce ? need : need - have);
    lacking += need - have;  // (read only without a reduction)
    if (any_only && worst > 0) break;
  }
  // what must cross between host blocks, at the inter link's rate (0 unless built)
  bool enters = false;  // some sampled host block lacks elements none of its ranks holds
  const double block = block_bound_us(s, std::span<const std::uint32_t>(records.data(), static_cast<std::size_t>(nd)), &enters);
  if (worst == 0) return with_last(std::max({relaxed, steps, block, reduce_us}), 0);
  // optimistic_ holds bound_link's constants and no curves: no per-call scan of the curves
  const double bytes = static_cast<double>(worst * geo.itemsize());
  double receive = std::max(steps, alpha_floor_us()) + wire_floor_us(bytes);
  if (envelopes_) receive = std::max(receive, receive_either_us(bytes));
  Bound b = with_last(std::max({relaxed, receive, block, reduce_us}), worst);
  // A direct step from here sends every element some rank lacks once (the ranks' received
  // counts are exactly what they lack), so its busiest rank sends and receives at least twice
  // the average lacking count: known when the sample is every rank and nothing is Partial.
  // (Counting it over every rank of a larger mesh cost more than the direct steps it spared.)
  b.enters_host = enters;
  b.traffic = worst;
  if (!reduce && !any_only && !s.has_partial() && !dst.has_partial() &&
      static_cast<std::int64_t>(coords_.size()) == mesh.num_ranks())
    b.traffic = direct_traffic_floor(worst, lacking);
  return b;
}

// The last step of any path from a state not equivalent to the target (a relabel only leaves
// such states) writes the target's buffer, at least its largest shard T, and is one of:
// - a copying step (local_chunk, local_fill, all_to_all, direct): it copies at least T, and the
//   M elements the busiest rank lacks arrive in steps before it or in it (an all_to_all or a
//   direct step receives them), at least one latency and M at the fastest receive rate;
// - an all_gather or all_reduce over mesh dims the target replicates over, n ranks or more:
//   the busiest rank receives at least (n-1)/n T (an all_gather's n chunks hold T; an
//   all_reduce receives 2(n-1)/n of its T) and over the whole path at least M;
// - a reduce_scatter over mesh dims the target shards over: it receives (n-1) chunks of T.
// The least of the kinds the target admits. Consistent: each kind's term drops along a step by
// at most what the step receives at that rate, and a step that receives pays a latency.
double Bounds::last_step_bound_us(const Sharding& s, std::int64_t missing) const {
  if (cost.prices_by_shard_count() || empty_tensor_ || s == dst) return 0;
  const double item = static_cast<double>(geo.itemsize());
  const double T = static_cast<double>(dst_max_numel_) * item, M = static_cast<double>(missing) * item;
  double best = (M > 0 ? receive_either_us(M) : 0) + T / (cost.copy_bw_GBps * 1e3);
  if (dst_replicate_min_ > 0) {
    const double n = static_cast<double>(dst_replicate_min_);
    best = std::min(best, receive_either_us(std::max(M, (n - 1) / n * T)));
  }
  if (dst_shards_) best = std::min(best, receive_either_us(std::max(M, T)));
  return best;
}

double Bounds::reduction_bound_us(const Sharding& s) const {
  if (cost.prices_by_shard_count() || empty_tensor_) return 0;
  double cs = 1, ct = 1;  // contributions per element in the state and in the target
  for (int m = 0; m < mesh.ndim(); ++m) {
    if (mesh.size(m) < 2) continue;
    if (s.partial(m)) cs *= static_cast<double>(mesh.size(m));
    if (dst.partial(m)) ct *= static_cast<double>(mesh.size(m));
  }
  if (cs <= ct) return 0;
  const double busiest = numel * (cs - ct) / static_cast<double>(mesh.num_ranks()) * static_cast<double>(geo.itemsize());
  return receive_either_us(busiest);
}

// CostModel::time prices a direct step on one link, monotone in the busiest rank's bytes and
// in its peers (a fitted send/recv curve, or the link's constants): one peer and `bytes`, no
// copies, is at most any direct step that receives that much on that link.
double Bounds::direct_comm_floor_us(double bytes, bool enters_host) const {
  Traffic t;
  t.kind = Traffic::Kind::direct;
  t.peers = 1;
  t.bytes = bytes;
  t.inter_host = true;
  const double inter = cost.time(t).total_us();
  if (enters_host) return inter;
  t.inter_host = false;
  return std::min(cost.time(t).total_us(), inter);
}

double Bounds::edge_floor_us(StepKind kind, std::span<const int> group, const Sharding& from, std::int64_t from_max) const {
  const auto s = geo.itemsize();
  std::int64_t n = 1;
  Traffic t;
  for (int m : group) {
    n *= mesh.size(m);
    t.inter_host = t.inter_host || cost.is_inter_host(mesh.shape(), m);
  }
  t.group = n;
  switch (kind) {
    case StepKind::relabel:
    case StepKind::direct:
      return 0;
    case StepKind::local_chunk:
    case StepKind::local_fill:
      // both write the target's largest shard: a fill keeps or grows every rank's shard, a
      // chunk splits it n ways (one of the parts holds at least 1/n of the largest)
      t.kind = Traffic::Kind::local;
      t.copy_bytes = static_cast<double>((kind == StepKind::local_fill ? from_max : (from_max + n - 1) / n) * s);
      return cost.time(t).total_us();
    default:
      break;
  }
  // Under the ring formulas the floor below reads nothing of `from` but from_max (the PyTorch
  // formula's shard count is the one other input): memoised by (kind, n, link, from_max).
  const bool memo = !cost.prices_by_shard_count();
  const std::uint64_t at =
      memo ? (static_cast<std::uint64_t>(n) << 9 | static_cast<std::uint64_t>(t.inter_host) << 8 | static_cast<std::uint64_t>(kind)) + 1
           : 0;
  if (memo)
    if (const FloorSlot* hit = floor_memo_.find(floor_hash(at, from_max), [&](const FloorSlot& x) { return x.at == at && x.from_max == from_max; }))
      return hit->us;
  t.collective = collective_of(kind).value();  // communication kinds only
  // PyTorch's count, exactly as make_step takes it: the formula's collective time depends on
  // nothing else, so there the floor is the step's cost
  t.shard_bytes = shard_bytes(numel, s, mesh.shape(), from);
  // The nccl-tests size: an all_gather's n chunks hold at least the largest source shard each,
  // an all_reduce runs on the source shard; a reduce_scatter or all_to_all splits every source
  // shard into its n chunks, so n chunks of the largest hold at least the largest source shard.
  t.bytes = static_cast<double>((kind == StepKind::all_gather ? n * from_max : from_max) * s);
  // an all_to_all packs its source; the others may run on the caller's buffers
  t.copy_bytes = kind == StepKind::all_to_all ? static_cast<double>(from_max * s) : 0.0;
  // Priced by the query's own model: the step's collective, group and link are these, and its
  // time is monotone in bytes (a fitted curve too: CollectiveCurve::time_us)
  const double us = cost.time(t).total_us();
  if (memo)
    floor_memo_.insert(floor_hash(at, from_max), {at, from_max, us}, [](const FloorSlot& x) { return floor_hash(x.at, x.from_max); });
  return us;
}

}  // namespace dtensor

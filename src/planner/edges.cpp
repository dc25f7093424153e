// The edges of the redistribution graph (docs/planner.md) with their pre/post conditions, and the costed step record of each.
#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

#include "dtensor/error.hpp"
#include "graph.hpp"

namespace dtensor {
namespace {

std::int64_t group_size(const std::vector<std::int64_t>& mesh_shape, std::span<const int> mesh_dims) {
  std::int64_t n = 1;
  for (int m : mesh_dims) n *= mesh_shape[static_cast<std::size_t>(m)];
  return n;
}

// The tensor dims whose entries differ, into `out` (room for every tensor dim); their count.
std::size_t changed_tensor_dims(const Sharding& from, const Sharding& to, std::array<int, Sharding::kMaxTensorDims>& out) {
  std::size_t n = 0;
  for (int d = 0; d < from.tensor_ndim(); ++d)
    if (from.entries(d) != to.entries(d)) out[n++] = d;
  return n;
}

bool entries_unit_split(const Sharding& s, int d, std::span<const int> mesh_dims) {
  for (const auto& e : s.entries(d))
    if (std::find(mesh_dims.begin(), mesh_dims.end(), e.mesh_dim) != mesh_dims.end() && e.split_factor != 1)
      return false;
  return true;
}

// The collective's concatenated per-peer chunks are the local tensor in row-major order:
// one tensor dim `d` changes, splits are plain chunks, sizes are even, and every dim before
// `d` has at most one element locally.
bool contiguous_concat(const Geometry& g, const Sharding& whole, const Sharding& piece, int d,
                       std::span<const int> mesh_dims) {
  if (!entries_unit_split(piece, d, mesh_dims) || !entries_unit_split(whole, d, mesh_dims)) return false;
  const auto ps = g.dim_stats(d, piece.entries(d));
  if (ps.max != ps.min) return false;
  for (int k = 0; k < d; ++k)
    if (g.dim_stats(k, whole.entries(k)).max > 1) return false;
  return true;
}

Collective collective_of(StepKind k) {
  switch (k) {
    case StepKind::all_gather: return Collective::all_gather;
    case StepKind::reduce_scatter: return Collective::reduce_scatter;
    case StepKind::all_to_all: return Collective::all_to_all;
    case StepKind::all_reduce: return Collective::all_reduce;
    default: return Collective::send_recv;
  }
}

bool ops_mixable(const Sharding& s) {
  std::optional<ReduceOp> first;
  for (int m = 0; m < s.mesh_ndim(); ++m) {
    auto p = s.partial(m);
    if (!p) continue;
    if (!first) first = p;
    else if (*first != *p && !((*first == ReduceOp::sum || *first == ReduceOp::avg) &&
                               (*p == ReduceOp::sum || *p == ReduceOp::avg)))
      return false;
  }
  return true;
}

}  // namespace

BufferGeometry step_buffers(const Geometry& g, StepKind kind, std::span<const int> mesh_dims,
                         std::span<const int> tensor_dims, const Sharding& from, const Sharding& to,
                         const Geometry::DirectStats* direct) {
  BufferGeometry b;
  const auto F = g.numel_stats(from, true);
  const auto T = g.numel_stats(to);
  b.from_max = F.max;
  b.from_min = F.min;
  b.to_max = T.max;
  b.to_min = T.min;
  b.group_size = group_size(g.mesh_shape(), mesh_dims);
  const auto n = b.group_size;
  switch (kind) {
    case StepKind::all_gather:
      b.chunk = F.max;
      b.pad_send = F.max != F.min;
      // Every rank must hold exactly `chunk` elements (the collective's count is global).
      b.zero_copy = F.max == F.min && tensor_dims.size() == 1 && contiguous_concat(g, to, from, tensor_dims[0], mesh_dims);
      if (!b.zero_copy) {
        b.recv_elems = n * b.chunk;
        b.send_elems = b.pad_send ? b.chunk : 0;
      }
      break;
    case StepKind::reduce_scatter:
      b.chunk = T.max;
      b.zero_copy = T.max == T.min && tensor_dims.size() == 1 && contiguous_concat(g, from, to, tensor_dims[0], mesh_dims);
      if (!b.zero_copy) {
        b.send_elems = n * b.chunk;
        b.recv_elems = b.chunk;
      }
      break;
    case StepKind::all_reduce:
      b.chunk = F.max;
      b.zero_copy = true;
      break;
    case StepKind::all_to_all:
      b.chunk = g.all_to_all_chunk(from, to, mesh_dims[0]);
      b.send_elems = n * b.chunk;
      b.recv_elems = n * b.chunk;
      break;
    case StepKind::direct: {
      b.send_elems = direct ? direct->max_traffic : g.direct_stats(from, to).max_traffic;
      break;
    }
    case StepKind::local_chunk:
    case StepKind::local_fill:
    case StepKind::relabel:
      break;
  }
  return b;
}

std::int64_t step_peak_bytes(const Geometry& g, const BufferGeometry& b, bool from_is_input, bool to_is_output) {
  const auto s = g.itemsize();
  std::int64_t peak = 0;
  if (b.send_elems) peak += ws_round(b.send_elems * s);
  if (b.recv_elems) peak += ws_round(b.recv_elems * s);
  if (!from_is_input) peak += ws_round(b.from_max * s);
  if (!to_is_output) peak += ws_round(b.to_max * s);
  return peak;
}

std::vector<std::pair<std::int64_t, bool>> shard_kinds_of(const Sharding& src, const Sharding& dst) {
  // plain shards, and the strided split factors the source or the target use
  std::vector<std::pair<std::int64_t, bool>> shard_kinds{{1, false}};
  for (const Sharding* x : {&src, &dst}) {
    for (int t = 0; t < x->tensor_ndim(); ++t) {
      for (const auto& en : x->entries(t))
        if (en.strided && std::find(shard_kinds.begin(), shard_kinds.end(), std::pair{en.split_factor, true}) == shard_kinds.end())
          shard_kinds.push_back({en.split_factor, true});
    }
  }
  std::sort(shard_kinds.begin() + 1, shard_kinds.end());
  return shard_kinds;
}

GraphContext::GraphContext(const Layout& s, const Layout& d, const CostModel& c, EdgeSet e)
    : mesh(s.mesh()), shape(s.shape()), dtype(s.dtype()), cost(c), edges(e), src(s.sharding()),
      dst(d.sharding()), geo(s.mesh().shape(), s.shape(), static_cast<std::int64_t>(itemsize(s.dtype()))) {
  if (s.mesh() != d.mesh())
    throw InputError(fmt::format("source mesh {} and target mesh {} differ: a redistribution stays on one mesh",
                            s.mesh().str(), d.mesh().str()));
  if (s.shape() != d.shape())
    throw InputError(fmt::format("source shape {} and target shape {} differ", shape_str(s.shape()), shape_str(d.shape())));
  if (s.dtype() != d.dtype())
    throw InputError(fmt::format("source dtype {} and target dtype {} differ: redistribution does not convert",
                            to_string(s.dtype()), to_string(d.dtype())));
  if (mesh.ndim() > 31) throw InputError(fmt::format("mesh {} has more than 31 dims", mesh.str()));
  s.check_runs();  // the planner's geometry works on index lists
  d.check_runs();
  // A tensor dim plays a role when the source or target shards it, or when it has two or more
  // elements: sharding an otherwise untouched dim can make a cheaper path (reduce_scatter onto
  // it, then all_to_all; e.g. PP -> S(0)[0]S(0)[1]). Size 0/1 dims never help, except under the
  // PyTorch formula, whose byte count divides by every sharded mesh dim whatever the dim's size.
  const bool pytorch_bytes = c.prices_by_shard_count();
  for (int t = 0; t < static_cast<int>(shape.size()); ++t)
    if (pytorch_bytes || shape[static_cast<std::size_t>(t)] >= 2 || !src.entries(t).empty() || !dst.entries(t).empty())
      play_dims.push_back(t);
  shard_kinds = shard_kinds_of(src, dst);

  states.reserve(64);
  bounds.reserve(64);
  edge_list.reserve(64);
  edges_done.reserve(64);
  direct_at.reserve(64);
  state_ids.reserve(64);
  for (auto x : shape) numel *= static_cast<double>(x);
  empty_tensor_ = numel == 0;
  optimistic_ = cost;
  optimistic_.intra = cost.bound_link(false);
  optimistic_.inter = cost.bound_link(true);
  optimistic_.curves.clear();
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
  // The bound is a max over ranks, so any subset of ranks still gives a lower bound: use at
  // most 16 ranks, spread over the mesh (with the first and last), to keep it cheap.
  const std::int64_t R = mesh.num_ranks();
  const std::int64_t step = std::max<std::int64_t>(1, R / 16);
  for (std::int64_t p = 0; p < R; p += step) coords_.push_back(mesh.coord_at(p));
  if (R > 1 && (R - 1) % step != 0) coords_.push_back(mesh.coord_at(R - 1));
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    DimTable t;
    const auto es = dst.entries(d);
    for (const auto& set : geo.variant_sets(es, shape[static_cast<std::size_t>(d)])) t.need.push_back(set.size());
    for (const auto& c : coords_) t.variant.push_back(static_cast<std::int32_t>(geo.variant_of(es, c)));
    dst_tables_.push_back(std::move(t));
  }
}

// held[rank position] = how many of the target's elements along dim d the rank holds under `e`.
const std::vector<std::int64_t>& GraphContext::held_table(int d, Entries e) const {
  std::uint64_t key = static_cast<std::uint64_t>(d) * 0x9e3779b97f4a7c15ULL;
  for (const auto& x : e)
    key = (key ^ (static_cast<std::uint64_t>(x.mesh_dim) | (static_cast<std::uint64_t>(x.split_factor) << 8) |
                  (x.strided ? 1ULL << 7 : 0))) * 0x100000001b3ULL + 0x51;
  if (auto it = held_memo_.find(key); it != held_memo_.end() && it->second.first == std::vector<ShardEntry>(e.begin(), e.end()))
    return it->second.second;
  const auto& ms = mesh.shape();
  const auto len = shape[static_cast<std::size_t>(d)];
  const auto dst_e = dst.entries(d);
  std::vector<std::int64_t> held(coords_.size());
  std::unordered_map<std::int64_t, std::int64_t> cache;  // (variant pair) -> size
  for (std::size_t p = 0; p < coords_.size(); ++p) {
    const std::int64_t v = geo.variant_of(e, coords_[p]);
    const std::int64_t pair = v * 1000003 + dst_tables_[static_cast<std::size_t>(d)].variant[p];
    auto it = cache.find(pair);
    if (it == cache.end()) {
      const auto n = e == dst_e ? owned_indices(e, len, ms, coords_[p]).size()
                                : owned_indices(e, len, ms, coords_[p]).intersect(owned_indices(dst_e, len, ms, coords_[p])).size();
      it = cache.emplace(pair, n).first;
    }
    held[p] = it->second;
  }
  auto& slot = held_memo_[key];
  slot = {std::vector<ShardEntry>(e.begin(), e.end()), std::move(held)};
  return slot.second;
}

// Classes of a mesh dim's placement for the relaxed graph: 0 R, 1 Shard of the target's tensor
// dim, 2 Shard of another, 3 Partial of the target's op, 4 another Partial.
int GraphContext::class_of(const Sharding& s, int m) const noexcept {
  if (const auto p = s.partial(m)) return p == dst.partial(m) ? 3 : 4;
  const int a = s.shard_dim_of(m);
  if (a < 0) return 0;
  return a == dst.shard_dim_of(m) ? 1 : 2;
}

void GraphContext::build_abstraction() {
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
  std::vector<int> y(static_cast<std::size_t>(K)), x(static_cast<std::size_t>(K));
  while (!pq.empty()) {
    const auto [d_us, d_ps, d_steps, yi] = pq.top();
    pq.pop();
    const auto yu = static_cast<std::size_t>(yi);
    if (exact ? (d_ps != A.dist_ps[yu] || d_steps != A.steps[yu]) : d_us > A.dist[yu]) continue;
    digits(yi, y);
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
        x = y;
        x[static_cast<std::size_t>(k)] = v;
        double c = 0;
        if (kind) {
          double shards = 1;
          for (int j = 0; j < K; ++j)
            if (x[static_cast<std::size_t>(j)] == 1 || x[static_cast<std::size_t>(j)] == 2)
              shards *= static_cast<double>(mesh.size(A.dims[static_cast<std::size_t>(j)]));
          const std::int64_t n = mesh.size(m);
          const double nn = static_cast<double>(n);
          // The step as traffic, priced by the optimistic model: PyTorch's bytes are exact (they
          // depend on the shard count alone); for the ring formulas the collective's per-member
          // count is at least the average share of the state it reads (the source's shards;
          // reduce_scatter: the target's, one more split by n; all_to_all: a source shard split
          // n ways), and copies cost at least nothing.
          Traffic t;
          t.collective = collective_of(*kind);
          t.group = n;
          t.inter_host = cost.is_inter_host(mesh.shape(), m);
          t.shard_bytes = numel * s / shards;
          const bool split = *kind == StepKind::reduce_scatter || *kind == StepKind::all_to_all;
          const double chunk = std::ceil(numel / (split ? shards * nn : shards));
          t.bytes = (*kind == StepKind::all_reduce ? chunk : chunk * nn) * s;  // nccl-tests sizes
          c = optimistic_.time(t).total_us();
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

GraphContext::Bound GraphContext::lower_bound(const Sharding& s) const {
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
  bool reduce = false;
  for (int m = 0; m < mesh.ndim(); ++m) {
    if (mesh.size(m) == 1) continue;  // a Partial over one rank is already its value (relabel)
    const auto have = s.partial(m), want = dst.partial(m);
    if (want == ReduceOp::sum && have != ReduceOp::sum) return {std::max(relaxed, steps), 0};
    if (have && have != want) reduce = true;  // every needed element must still be reduced
  }
  // With a per-dim sum under the PyTorch formula, the missing count adds nothing: skip it.
  if (steps > 0 && cost.prices_by_shard_count()) return {steps, 1};
  const int nd = static_cast<int>(shape.size());
  std::vector<const std::vector<std::int64_t>*> held(static_cast<std::size_t>(nd));
  for (int d = 0; d < nd; ++d) held[static_cast<std::size_t>(d)] = &held_table(d, s.entries(d));
  // The PyTorch formula's bound only asks whether anything is missing: stop at the first rank.
  const bool any_only = cost.prices_by_shard_count();
  std::int64_t worst = 0;
  for (std::size_t p = 0; p < coords_.size(); ++p) {
    std::int64_t need = 1, have = 1;
    for (int d = 0; d < nd; ++d) {
      need *= dst_tables_[static_cast<std::size_t>(d)].need[static_cast<std::size_t>(dst_tables_[static_cast<std::size_t>(d)].variant[p])];
      have *= (*held[static_cast<std::size_t>(d)])[p];
    }
    worst = std::max(worst, reduce ? need : need - have);
    if (any_only && worst > 0) break;
  }
  if (worst == 0) return {std::max(relaxed, steps), 0};
  // optimistic_ holds bound_link's constants and no curves: no per-call scan of the curves
  const double wire = optimistic_.wire_floor_us(static_cast<double>(worst * geo.itemsize()));
  const double alpha = std::min(optimistic_.intra.alpha_us, optimistic_.inter.alpha_us);
  return {std::max(relaxed, std::max(steps, alpha) + wire), worst};
}

namespace {

std::string describe_group(const Mesh& mesh, const std::vector<int>& dims) {
  // fmt rather than string concatenation: GCC 12's -Wrestrict misfires on `"..." + std::string`
  if (dims.size() == 1) return fmt::format("mesh dim {}", mesh.describe_dim(dims[0]));
  return fmt::format("flattened mesh dims {}", fmt::join(dims, ","));
}

std::string why_of(const GraphContext& ctx, StepKind kind, const std::vector<int>& mesh_dims, const Sharding& from,
                   const Sharding& to) {
  const auto& dst = ctx.dst;
  std::string target_note;
  for (int m : mesh_dims) {
    if (to.placement(m) == dst.placement(m) && to.position_of(m) == dst.position_of(m))
      target_note += fmt::format("; mesh dim {} reaches its target {}", m, dst.placement(m).str());
    else if (from.placement(m) != dst.placement(m))
      target_note += fmt::format("; mesh dim {} is on its way from {} to {}", m, from.placement(m).str(),
                                 dst.placement(m).str());
  }
  const auto group = describe_group(ctx.mesh, mesh_dims);
  switch (kind) {
    case StepKind::all_gather:
      return fmt::format("un-shard over {} (the last split of its tensor dim, so the gather is exact){}", group, target_note);
    case StepKind::reduce_scatter:
      return fmt::format("reduce the Partial over {} and keep only this rank's shard{}", group, target_note);
    case StepKind::all_reduce:
      return fmt::format("reduce the Partial over {} to a full value{}", group, target_note);
    case StepKind::all_to_all:
      return fmt::format("move the split over {} from tensor dim {} to tensor dim {}{}", group,
                         from.shard_dim_of(mesh_dims[0]), to.shard_dim_of(mesh_dims[0]), target_note);
    case StepKind::local_chunk:
      return fmt::format("each rank keeps its chunk of replicated data over {} (no communication){}", group, target_note);
    case StepKind::local_fill:
      return fmt::format("make a Partial over {} locally: one rank keeps the value, the others the op's identity{}",
                         group, target_note);
    case StepKind::direct:
      return "one grouped send/recv moves exactly the elements each rank lacks for the target";
    case StepKind::relabel:
      return "the layouts are equivalent for this shape: every rank already holds its target data";
  }
  return "";
}

}  // namespace

Step make_step(const GraphContext& ctx, StepKind kind, std::span<const int> group, const Sharding& from,
               const Sharding& to, bool full) {
  const Geometry& g = ctx.geo;
  Step st;
  st.kind = kind;
  if (full) {
    st.from = from;
    st.to = to;
  }
  // no heap on the search's path: dims live in fixed arrays, copied into the record when full
  std::array<int, Sharding::kMaxTensorDims> td{};
  const std::span<const int> tensor_dims(td.data(), changed_tensor_dims(from, to, td));
  DimList dims(group);
  const auto s = g.itemsize();
  const auto& mesh_shape = ctx.mesh.shape();
  std::optional<Geometry::DirectStats> ds;
  if (kind == StepKind::direct) {  // its mesh dims are those some transfer crosses
    ds = g.direct_stats(from, to);
    for (int m = 0; m < ctx.mesh.ndim(); ++m)
      if (ds->crossed_mesh_dims & (1u << m)) dims.push(m);
  }
  const std::span<const int> mesh_dims = dims.span();
  const auto b = step_buffers(g, kind, mesh_dims, tensor_dims, from, to, ds ? &*ds : nullptr);
  for (int m : mesh_dims) st.inter_host = st.inter_host || ctx.cost.is_inter_host(mesh_shape, m);
  const auto n = b.group_size;
  // The step as traffic; the cost model turns it into time.
  Traffic t;
  t.inter_host = st.inter_host;
  t.group = n;
  // Bytes as PyTorch 2.15 counts them: numel * itemsize / (product of the sizes of the mesh dims
  // holding Shard or _StridedShard: its _is_shard_like)
  double num_shards = 1;
  for (int d = 0; d < from.tensor_ndim(); ++d)
    for (const auto& e : from.entries(d)) num_shards *= static_cast<double>(mesh_shape[static_cast<std::size_t>(e.mesh_dim)]);
  t.shard_bytes = ctx.numel * static_cast<double>(s) / num_shards;
  switch (kind) {
    case StepKind::all_gather:
    case StepKind::reduce_scatter:
    case StepKind::all_to_all: {
      st.bytes_sent = st.bytes_received = (n - 1) * b.chunk * s;
      const std::int64_t real = kind == StepKind::all_gather ? b.to_min : b.from_min;
      st.padding_bytes = n > 1 ? (n * b.chunk - real) * s : 0;
      st.peers = n - 1;
      t.collective = collective_of(kind);
      t.bytes = static_cast<double>(n * b.chunk * s);  // nccl-tests counts the whole buffer (n chunks)
      if (kind == StepKind::all_gather)
        st.copy_bytes = b.zero_copy ? 0 : (b.to_max + (b.pad_send ? b.chunk : 0)) * s;
      else if (kind == StepKind::reduce_scatter)
        st.copy_bytes = b.zero_copy ? 0 : (b.from_max + b.to_max) * s;
      else
        st.copy_bytes = (b.from_max + b.to_max) * s;
      break;
    }
    case StepKind::all_reduce: {
      const double nn = static_cast<double>(n);
      const double wire = n > 1 ? 2.0 * (nn - 1) / nn * static_cast<double>(b.chunk * s) : 0.0;
      st.bytes_sent = st.bytes_received = static_cast<std::int64_t>(std::ceil(wire));
      st.peers = n - 1;
      t.collective = Collective::all_reduce;
      t.bytes = static_cast<double>(b.chunk * s);
      break;
    }
    case StepKind::direct: {
      st.bytes_sent = ds->max_sent * s;
      st.bytes_received = ds->max_received * s;
      st.peers = ds->max_peers;
      st.copy_bytes = (ds->max_traffic + b.to_max) * s;
      t.kind = Traffic::Kind::direct;
      t.peers = ds->max_peers;
      t.bytes = static_cast<double>(std::max(st.bytes_sent, st.bytes_received));
      break;
    }
    case StepKind::local_chunk:
    case StepKind::local_fill:
      st.copy_bytes = b.to_max * s;
      t.kind = Traffic::Kind::local;
      break;
    case StepKind::relabel:
      st.copy_bytes = b.to_max * s;  // a plain memcpy where buffers differ; relabel is free
      t.kind = Traffic::Kind::free;
      break;
  }
  t.copy_bytes = static_cast<double>(st.copy_bytes);
  const StepTime time = ctx.cost.time(t);
  st.alpha_us = time.alpha_us;
  st.wire_us = time.wire_us;
  st.copy_us = time.copy_us;
  st.cost_us = st.alpha_us + st.wire_us + st.copy_us;
  st.peak_bytes = step_peak_bytes(g, b, from == ctx.src, to == ctx.dst);
  if (full) {
    st.mesh_dims.assign(mesh_dims.begin(), mesh_dims.end());
    st.tensor_dims.assign(tensor_dims.begin(), tensor_dims.end());
    st.why = why_of(ctx, kind, st.mesh_dims, from, to);
  }
  return st;
}

bool direct_allowed(const EdgeScope& sc, const Sharding& from) {
  // costing a direct step pairs every rank with every rank: meshes above 4096 ranks plan without it
  if (sc.edges != EdgeSet::all || from == sc.dst || sc.mesh.num_ranks() > 4096) return false;
  for (int m = 0; m < sc.mesh.ndim(); ++m)  // no Partial on a mesh dim whose placement changes
    if ((from.partial(m) || sc.dst.partial(m)) && from.placement(m) != sc.dst.placement(m)) return false;
  return true;
}

bool direct_allowed(const GraphContext& ctx, const Sharding& from) { return direct_allowed(ctx.scope(), from); }

namespace {

// Every edge out of `from`, in the planner's deterministic order, as emit(kind, group, to).
template <typename Emit>
void for_each_edge(const EdgeScope& sc, const Sharding& from, Emit&& emit_raw, bool with_direct) {
  const int md = sc.mesh.ndim();
  const bool all = sc.edges == EdgeSet::all;
  auto emit = [&](StepKind kind, DimList dims, const Sharding& to) {
    if (to == from || !ops_mixable(to)) return;
    emit_raw(kind, dims, to);
  };
  // relabel (equivalent layouts, e.g. orders of a size-1 dim): a transition PyTorch's planner
  // does not know, so only in the `all` edge set
  if (all && from != sc.dst && equivalent(from, sc.dst, sc.mesh.shape(), sc.shape))
    emit(StepKind::relabel, {}, sc.dst);

  for (int m = 0; m < md; ++m) {
    const int a = from.shard_dim_of(m);
    const auto op = from.partial(m);
    if (a < 0 && !op) {  // Replicate on m
      for (int d : sc.play_dims)
        for (const auto& [sf, strided] : sc.shard_kinds)
          emit(StepKind::local_chunk, {m}, from.with_shard_appended(d, {m, sf, strided}));
      if (auto target = sc.dst.partial(m)) emit(StepKind::local_fill, {m}, from.with_partial(m, *target));
    } else if (op) {
      emit(StepKind::all_reduce, {m}, from.with_replicate(m));
      for (int d : sc.play_dims)
        for (const auto& [sf, strided] : sc.shard_kinds)
          emit(StepKind::reduce_scatter, {m}, from.with_shard_appended(d, {m, sf, strided}));
    } else if (from.is_last_in_order(m)) {
      emit(StepKind::all_gather, {m}, from.with_replicate(m));
      const auto& entry = from.entries(a).back();
      for (int b : sc.play_dims) {
        for (const auto& [sf, strided] : sc.shard_kinds) {
          if (!all && (b == a || strided || entry.strided)) continue;  // PyTorch: plain S(a) -> S(b)
          emit(StepKind::all_to_all, {m}, from.with_shard_appended(b, {m, sf, strided}));
        }
      }
      // S(d) -> P(sum), only where the target holds P(sum) on m: both edge sets (torch 2.15's graph
      // planner has it: _get_shard_to_partial_target_states)
      if (!entry.strided && sc.dst.partial(m) == ReduceOp::sum)
        emit(StepKind::local_fill, {m}, from.with_partial(m, ReduceOp::sum));
    }
  }

  if (all && md >= 2) {
    // Flattened collectives over a group of mesh dims.
    for (std::uint32_t mask = 1; mask < (1u << md); ++mask) {
      if (__builtin_popcount(mask) < 2) continue;
      auto in = [&](int m) { return (mask >> m) & 1u; };
      // all_gather: the group's entries are a suffix of every tensor dim's order.
      bool ok = true;
      DimList group;
      for (int d = 0; d < from.tensor_ndim() && ok; ++d) {
        const auto es = from.entries(d);
        bool seen = false;
        for (const auto& e : es) {
          if (in(e.mesh_dim)) { seen = true; group.push(e.mesh_dim); }
          else if (seen) ok = false;
        }
      }
      if (ok && static_cast<int>(group.size()) == __builtin_popcount(mask)) {
        Sharding to = from;
        for (int m : group.span()) to = to.with_replicate(m);
        emit(StepKind::all_gather, group, to);
      }
      // all_reduce / reduce_scatter: every group dim Partial with one op.
      std::optional<ReduceOp> gop;
      bool same = true;
      DimList pdims;
      for (int m = 0; m < md; ++m) {
        if (!in(m)) continue;
        const auto p = from.partial(m);
        if (!p || (gop && *gop != *p)) { same = false; break; }
        gop = p;
        pdims.push(m);
      }
      if (!same) continue;
      {
        Sharding to = from;
        for (int m : pdims.span()) to = to.with_replicate(m);
        emit(StepKind::all_reduce, pdims, to);
      }
      DimList perm = pdims;
      do {
        for (int d : sc.play_dims) {
          Sharding to = from;
          for (int m : perm.span()) to = to.with_shard_appended(d, {m, 1, false});
          emit(StepKind::reduce_scatter, perm, to);
        }
      } while (std::next_permutation(perm.v.begin(), perm.v.begin() + perm.n));
    }
  }

  if (with_direct && direct_allowed(sc, from)) emit(StepKind::direct, {}, sc.dst);
}

}  // namespace

void enumerate_edges(const GraphContext& ctx, const Sharding& from, std::vector<Edge>& out, bool full,
                     bool with_direct) {
  out.clear();
  enumerate_edges(
      ctx, from,
      [&out](const Sharding& to, StepKind kind, const DimList& group, const Step& step) {
        out.push_back(Edge{to, kind, group, step});
      },
      full, with_direct);
}

void enumerate_edges(const GraphContext& ctx, const Sharding& from, const EdgeSink& sink, bool full,
                     bool with_direct) {
  for_each_edge(
      ctx.scope(), from,
      [&](StepKind kind, const DimList& dims, const Sharding& to) {
        sink(to, kind, dims, make_step(ctx, kind, dims.span(), from, to, full));
      },
      with_direct);
}

bool is_edge(const EdgeScope& scope, const Sharding& from, StepKind kind, std::span<const int> group, const Sharding& to) {
  bool found = false;
  for_each_edge(
      scope, from,
      [&](StepKind k, const DimList& dims, const Sharding& t) {
        found = found || (k == kind && t == to && std::equal(dims.span().begin(), dims.span().end(), group.begin(), group.end()));
      },
      false);
  return found;
}

}  // namespace dtensor

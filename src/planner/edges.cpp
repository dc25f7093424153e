// The edges of the redistribution graph (docs/planner.md) with their pre/post conditions, and the costed step record of each.
#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

#include <fmt/compile.h>

#include "dtensor/error.hpp"
#include "edges.hpp"
#include "lower.hpp"

namespace dtensor {
namespace {

// The tensor dims whose entries differ, into `out` (room for every tensor dim); their count.
std::size_t changed_tensor_dims(const Sharding& from, const Sharding& to, std::array<int, Sharding::kMaxTensorDims>& out) {
  std::size_t n = 0;
  for (int d = 0; d < from.tensor_ndim(); ++d)
    if (from.entries(d) != to.entries(d)) out[n++] = d;
  return n;
}

bool ops_mixable(const Sharding& s) {
  std::optional<ReduceOp> first;
  for (int m = 0; m < s.mesh_ndim(); ++m) {
    auto p = s.partial(m);
    if (!p) continue;
    if (!first) first = p;
    else if (!mixable(*first, *p))
      return false;
  }
  return true;
}

}  // namespace


namespace {

// Why a step is taken, in one buffer (a plan's records are built per query: no string per part).
std::string why_of(const GraphContext& ctx, StepKind kind, const std::vector<int>& mesh_dims, const Sharding& from,
                   const Sharding& to) {
  switch (kind) {
    case StepKind::direct:
      return "one grouped send/recv moves exactly the elements each rank lacks for the target";
    case StepKind::relabel:
      return "the layouts are equivalent for this shape: every rank already holds its target data";
    default:
      break;
  }
  // written in place: no temporary strings (the plan's and the runner-up's steps each get one)
  fmt::memory_buffer b;
  auto out = std::back_inserter(b);
  auto text = [&](std::string_view t) { b.append(t.data(), t.data() + t.size()); };
  auto group = [&] {
    if (mesh_dims.size() == 1) {
      text("mesh dim ");
      ctx.mesh.append_dim_to(b, mesh_dims[0]);
    } else {
      fmt::format_to(out, "flattened mesh dims {}", fmt::join(mesh_dims, ","));
    }
  };
  switch (kind) {
    case StepKind::all_gather:
      text("un-shard over "), group(), text(" (the last split of its tensor dim, so the gather is exact)");
      break;
    case StepKind::reduce_scatter:
      text("reduce the Partial over "), group(), text(" and keep only this rank's shard");
      break;
    case StepKind::all_reduce:
      text("reduce the Partial over "), group(), text(" to a full value");
      break;
    case StepKind::all_to_all:
      text("move the split over "), group();
      fmt::format_to(out, FMT_COMPILE(" from tensor dim {} to tensor dim {}"), from.shard_dim_of(mesh_dims[0]), to.shard_dim_of(mesh_dims[0]));
      break;
    case StepKind::local_chunk:
      text("each rank keeps its chunk of replicated data over "), group(), text(" (no communication)");
      break;
    case StepKind::local_fill:
      text("make a Partial over "), group(), text(" locally: one rank keeps the value, the others the op's identity");
      break;
    default:
      break;
  }
  const auto& dst = ctx.dst;
  for (int m : mesh_dims) {
    const Placement want = dst.placement(m);
    if (to.placement(m) == want && to.position_of(m) == dst.position_of(m)) {
      fmt::format_to(out, FMT_COMPILE("; mesh dim {} reaches its target "), m);
      want.append_to(b);
    } else if (const Placement have = from.placement(m); have != want) {
      fmt::format_to(out, FMT_COMPILE("; mesh dim {} is on its way from "), m);
      have.append_to(b);
      text(" to ");
      want.append_to(b);
    }
  }
  return fmt::to_string(b);
}

// What a full step record adds to a costed one: its states, mesh and tensor dims, and reason.
void fill_record(const GraphContext& ctx, Step& st, std::span<const int> mesh_dims, std::span<const int> tensor_dims,
                 const Sharding& from, const Sharding& to) {
  st.from = from;
  st.to = to;
  st.mesh_dims.assign(mesh_dims.begin(), mesh_dims.end());
  st.tensor_dims.assign(tensor_dims.begin(), tensor_dims.end());
  st.why = why_of(ctx, st.kind, st.mesh_dims, from, to);
}

}  // namespace

Step make_step(const GraphContext& ctx, StepKind kind, std::span<const int> group, const Sharding& from,
               const Sharding& to, bool full, DimList* crossed) {
  const Geometry& g = ctx.geo;
  Step st;
  st.kind = kind;
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
  // Bytes as PyTorch 2.15 counts them
  t.shard_bytes = shard_bytes(ctx.numel, s, mesh_shape, from);
  switch (kind) {
    case StepKind::all_gather:
    case StepKind::reduce_scatter:
    case StepKind::all_to_all: {
      st.bytes_sent = st.bytes_received = (n - 1) * b.chunk * s;
      const std::int64_t real = kind == StepKind::all_gather ? b.to_min : b.from_min;
      st.padding_bytes = n > 1 ? (n * b.chunk - real) * s : 0;
      st.peers = n - 1;
      t.collective = collective_of(kind).value();  // communication kinds only
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
  if (crossed && kind == StepKind::direct) *crossed = dims;
  if (full) fill_record(ctx, st, mesh_dims, tensor_dims, from, to);
  return st;
}

Step complete_direct_step(const GraphContext& ctx, Step st, const DimList& crossed, const Sharding& from,
                          const Sharding& to) {
  std::array<int, Sharding::kMaxTensorDims> td{};
  fill_record(ctx, st, crossed.span(), std::span<const int>(td.data(), changed_tensor_dims(from, to, td)), from, to);
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

bool all_gather_group(const Sharding& from, std::uint32_t mask, DimList& group) {
  group = DimList{};
  for (int d = 0; d < from.tensor_ndim(); ++d) {
    bool seen = false;
    for (const auto& e : from.entries(d)) {
      if ((mask >> e.mesh_dim) & 1u) {
        seen = true;
        group.push(e.mesh_dim);
      } else if (seen) {
        return false;  // an entry of the mask below one that is not: no gather removes it
      }
    }
  }
  return true;
}

Sharding Move::apply(const Sharding& from, const Sharding& dst, const DimList& group) const {
  switch (op) {
    case Op::target: return dst;
    case Op::append: return from.with_shard_appended(d, entry);
    case Op::partial: return from.with_partial(m, rop);
    case Op::replicate: return from.with_replicate(m);
    case Op::replicated: return from.with_replicated(mask);
    case Op::scatter: {
      Sharding to = from;
      for (int x : group.span()) to = to.with_shard_appended(d, {x, 1, false});
      return to;
    }
  }
  return from;
}

namespace {

// Every move out of `from`, in the planner's deterministic order, as on_move(kind, group, move):
// the edges before two checks that are the caller's (the next layout is not `from`, and its
// Partial ops mix).
template <typename OnMove>
void for_each_move(const EdgeScope& sc, const Sharding& from, OnMove&& on_move, bool with_direct) {
  const int md = sc.mesh.ndim();
  const bool all = sc.edges == EdgeSet::all;
  auto move = [](Move::Op op, int m, int d) {
    Move mv;
    mv.op = op;
    mv.m = static_cast<std::int8_t>(m);
    mv.d = static_cast<std::int8_t>(d);
    return mv;
  };
  // relabel (equivalent layouts, e.g. orders of a size-1 dim): a transition PyTorch's planner
  // does not know, so only in the `all` edge set
  if (all && from != sc.dst && equivalent(from, sc.dst, sc.mesh.shape(), sc.shape))
    on_move(StepKind::relabel, DimList{}, Move{});

  auto append = [&](StepKind kind, int m, int d, std::size_t k) {
    Move mv = move(Move::Op::append, m, d);
    mv.entry = {m, sc.shard_kinds[k].first, sc.shard_kinds[k].second};
    mv.kind = static_cast<std::uint8_t>(k);
    on_move(kind, DimList{m}, mv);
  };
  const std::size_t kinds = sc.shard_kinds.size();
  auto partial = [&](int m, ReduceOp op) {
    Move mv = move(Move::Op::partial, m, 0);
    mv.rop = op;
    on_move(StepKind::local_fill, DimList{m}, mv);
  };
  for (int m = 0; m < md; ++m) {
    const int a = from.shard_dim_of(m);
    const auto op = from.partial(m);
    if (a < 0 && !op) {  // Replicate on m
      for (int d : sc.play_dims)
        for (std::size_t k = 0; k < kinds; ++k) append(StepKind::local_chunk, m, d, k);
      if (auto target = sc.dst.partial(m)) partial(m, *target);
    } else if (op) {
      on_move(StepKind::all_reduce, DimList{m}, move(Move::Op::replicate, m, 0));
      for (int d : sc.play_dims)
        for (std::size_t k = 0; k < kinds; ++k) append(StepKind::reduce_scatter, m, d, k);
    } else if (from.is_last_in_order(m)) {
      on_move(StepKind::all_gather, DimList{m}, move(Move::Op::replicate, m, 0));
      const auto& entry = from.entries(a).back();
      for (int b : sc.play_dims) {
        for (std::size_t k = 0; k < kinds; ++k) {
          if (!all && (b == a || sc.shard_kinds[k].second || entry.strided)) continue;  // PyTorch: plain S(a) -> S(b)
          append(StepKind::all_to_all, m, b, k);
        }
      }
      // S(d) -> P(sum), only where the target holds P(sum) on m: both edge sets (torch 2.15's graph
      // planner has it: _get_shard_to_partial_target_states)
      if (!entry.strided && sc.dst.partial(m) == ReduceOp::sum) partial(m, ReduceOp::sum);
    }
  }

  if (all && md >= 2) {
    // Flattened collectives over a group of mesh dims: a gather's dims all shard, a reduction's
    // are all Partial (a mask with another dim has neither).
    std::uint32_t sharding = 0, partial = 0;
    for (int m = 0; m < md; ++m) {
      if (from.partial(m)) partial |= 1u << m;
      else if (from.shard_dim_of(m) >= 0) sharding |= 1u << m;
    }
    for (std::uint32_t mask = 1; mask < (1u << md); ++mask) {
      if ((mask & (mask - 1)) == 0) continue;  // a group of two or more mesh dims
      if ((mask & sharding) != mask && (mask & partial) != mask) continue;
      int dims_in_mask = 0;  // (counted here: without -mpopcnt, __builtin_popcount is a library call)
      for (std::uint32_t rest = mask; rest != 0; rest &= rest - 1) ++dims_in_mask;
      auto in = [&](int m) { return (mask >> m) & 1u; };
      Move all_of = move(Move::Op::replicated, 0, 0);
      all_of.mask = mask;
      // all_gather: the group's entries are a suffix of every tensor dim's order.
      DimList group;
      if (all_gather_group(from, mask, group) && static_cast<int>(group.size()) == dims_in_mask)
        on_move(StepKind::all_gather, group, all_of);
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
      on_move(StepKind::all_reduce, pdims, all_of);  // (pdims: every dim of the mask)
      DimList perm = pdims;
      do {
        for (int d : sc.play_dims) on_move(StepKind::reduce_scatter, perm, move(Move::Op::scatter, 0, d));
      } while (std::next_permutation(perm.v.begin(), perm.v.begin() + perm.n));
    }
  }

  if (with_direct && direct_allowed(sc, from)) on_move(StepKind::direct, DimList{}, Move{});
}

// Every edge out of `from`, in the planner's deterministic order, as emit(kind, group, to).
template <typename Emit>
void for_each_edge(const EdgeScope& sc, const Sharding& from, Emit&& emit, bool with_direct) {
  for_each_move(
      sc, from,
      [&](StepKind kind, const DimList& dims, const Move& mv) {
        const Sharding to = mv.apply(from, sc.dst, dims);
        if (to == from || !ops_mixable(to)) return;
        emit(kind, dims, to);
      },
      with_direct);
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

void enumerate_moves(const GraphContext& ctx, const Sharding& from, MoveSink sink) {
  for_each_move(ctx.scope(), from, [&](StepKind kind, const DimList& dims, const Move& mv) { sink(kind, dims, mv); }, false);
}

bool move_keeps_ops_mixable(const Sharding& from, const Move& mv) {
  if (mv.op != Move::Op::partial) return true;  // only a new Partial can make them unmixable
  for (int m = 0; m < from.mesh_ndim(); ++m) {
    const auto p = m == mv.m ? std::optional<ReduceOp>(mv.rop) : from.partial(m);
    if (p && !mixable(*p, mv.rop)) return false;
  }
  return true;
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

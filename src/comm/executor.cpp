// Executor: one rank's part of a plan. Every index set, box copy and transfer is computed when it
// is prepared, from the plan alone (the buffer records the planner lowered); `execute` only walks
// those actions and issues the collectives.
#include "dtensor/executor.hpp"

#include <algorithm>
#include <optional>

#include "dtensor/error.hpp"
#include "dtensor/scalar.hpp"
#include "executor_impl.hpp"
#include "placement/groups.hpp"

namespace dtensor {
using namespace detail;
namespace {

std::vector<std::int64_t> row_major_strides(const std::vector<IndexSet>& sets, std::int64_t itemsize) {
  std::vector<std::int64_t> st(sets.size());
  std::int64_t s = itemsize;
  for (std::size_t d = sets.size(); d-- > 0;) {
    st[d] = s;
    s *= sets[d].size();
  }
  return st;
}

// Segments of `box` (subset of both `src` and `dst`) along one dim: (src_pos, dst_pos, len) runs
// contiguous on both sides.
struct Seg {
  std::int64_t src_pos, dst_pos, len;
};
std::vector<Seg> segments(const IndexSet& box, const IndexSet& src, const IndexSet& dst) {
  std::vector<Seg> out;
  for (const auto& r : box.runs()) {
    std::int64_t x = r.start;
    while (x < r.stop) {
      // extend while contiguous in both src and dst
      std::int64_t stop = r.stop;
      for (const auto& s : src.runs())
        if (s.start <= x && x < s.stop) stop = std::min(stop, s.stop);
      for (const auto& s : dst.runs())
        if (s.start <= x && x < s.stop) stop = std::min(stop, s.stop);
      out.push_back({src.position_of(x), dst.position_of(x), stop - x});
      x = stop;
    }
  }
  return out;
}

}  // namespace

// Copies of the elements of `box` from a local tensor with index sets `src` into one with `dst`.
void detail::add_box_copies(std::vector<Action>& out, Ref dst_ref, const std::vector<IndexSet>& dst, Ref src_ref,
                    const std::vector<IndexSet>& src, const std::vector<IndexSet>& box, std::int64_t itemsize) {
  const std::size_t nd = box.size();
  if (box_numel(box) == 0) return;
  // A safety net behind validate_plan: every copied element must lie in both tensors.
  for (std::size_t d = 0; d < nd; ++d)
    if (box[d].intersect(src[d]).size() != box[d].size() || box[d].intersect(dst[d]).size() != box[d].size())
      throw InputError(fmt::format("a copy of tensor dim {} reaches outside its source or target (the plan's lowering is inconsistent)", d));
  const auto ds = row_major_strides(dst, itemsize);
  const auto ss = row_major_strides(src, itemsize);
  if (nd == 0) {
    out.push_back({Action::copy, dst_ref, src_ref, itemsize, 0, {}});
    return;
  }
  std::vector<std::vector<Seg>> segs(nd);
  for (std::size_t d = 0; d < nd; ++d) segs[d] = segments(box[d], src[d], dst[d]);
  // Trailing dims covered whole on both sides with one segment fold into the contiguous run.
  std::size_t inner = nd - 1;
  std::int64_t run_elems = 1;
  while (inner > 0 && segs[inner].size() == 1 && segs[inner][0].len == src[inner].size() &&
         segs[inner][0].len == dst[inner].size()) {
    run_elems *= segs[inner][0].len;
    --inner;
  }
  // Cartesian product of segment choices over dims [0, inner].
  std::vector<std::size_t> pick(inner + 1, 0);
  while (true) {
    BoxCopy bc;
    bc.dst = dst_ref;
    bc.src = src_ref;
    for (std::size_t d = 0; d <= inner; ++d) {
      const Seg& s = segs[d][pick[d]];
      bc.dst.offset += s.dst_pos * ds[d];
      bc.src.offset += s.src_pos * ss[d];
      if (d < inner) {
        bc.count.push_back(s.len);
        bc.dst_stride.push_back(ds[d]);
        bc.src_stride.push_back(ss[d]);
      } else {
        bc.run_bytes = s.len * run_elems * itemsize;
      }
    }
    // drop unit counts
    for (std::size_t k = bc.count.size(); k-- > 0;)
      if (bc.count[k] == 1) {
        bc.count.erase(bc.count.begin() + static_cast<std::ptrdiff_t>(k));
        bc.dst_stride.erase(bc.dst_stride.begin() + static_cast<std::ptrdiff_t>(k));
        bc.src_stride.erase(bc.src_stride.begin() + static_cast<std::ptrdiff_t>(k));
      }
    Action a{Action::box, bc.dst, bc.src, 0, 0, std::move(bc)};
    out.push_back(std::move(a));
    if (!detail::next_digits(
            inner + 1, [&](std::size_t d) -> auto& { return pick[d]; }, [&](std::size_t d) { return segs[d].size(); }))
      break;
  }
}

namespace {

// Fuses runs of equally shaped box copies whose offsets step evenly (one per peer, say) into
// one copy with an extra innermost dimension: a gather along a non-leading dim then writes each
// output row once, sequentially, instead of sweeping the output once per peer.
void fuse_box_copies(std::vector<Action>& actions) {
  std::vector<Action> out;
  std::size_t i = 0;
  while (i < actions.size()) {
    const Action& a = actions[i];
    std::size_t j = i + 1;
    if (a.kind == Action::box && a.box_copy.count.size() < 14 && i + 1 < actions.size()) {
      const BoxCopy& b0 = a.box_copy;
      const Action& n1 = actions[i + 1];
      const std::int64_t dd = n1.box_copy.dst.offset - b0.dst.offset, ds = n1.box_copy.src.offset - b0.src.offset;
      auto same_shape = [&](const Action& x, std::size_t k) {
        const BoxCopy& b = x.box_copy;
        return x.kind == Action::box && b.dst.buf == b0.dst.buf && b.src.buf == b0.src.buf &&
               b.run_bytes == b0.run_bytes && b.count == b0.count && b.dst_stride == b0.dst_stride &&
               b.src_stride == b0.src_stride && b.dst.offset == b0.dst.offset + static_cast<std::int64_t>(k) * dd &&
               b.src.offset == b0.src.offset + static_cast<std::int64_t>(k) * ds;
      };
      while (j < actions.size() && same_shape(actions[j], j - i)) ++j;
    }
    if (j - i >= 2) {
      Action f = a;
      f.box_copy.count.push_back(static_cast<std::int64_t>(j - i));
      f.box_copy.dst_stride.push_back(actions[i + 1].box_copy.dst.offset - a.box_copy.dst.offset);
      f.box_copy.src_stride.push_back(actions[i + 1].box_copy.src.offset - a.box_copy.src.offset);
      out.push_back(std::move(f));
      i = j;
    } else {
      out.push_back(std::move(actions[i]));
      ++i;
    }
  }
  actions = std::move(out);
}

}  // namespace

std::vector<IndexSet> detail::intersect(const std::vector<IndexSet>& a, const std::vector<IndexSet>& b) {
  std::vector<IndexSet> out;
  for (std::size_t d = 0; d < a.size(); ++d) out.push_back(a[d].intersect(b[d]));
  return out;
}

namespace {

using detail::group_members;



}  // namespace


namespace {

// What one step's lowering sees of this rank.
struct StepContext {
  const Mesh& mesh;
  const Step& st;
  std::size_t k;
  std::int64_t rank;
  std::vector<std::int64_t> coord;
  Layout from, to;
  std::vector<IndexSet> Xs, Ys;  // this rank's index sets before / after
  std::int64_t x_elems, y_elems, s;
  Ref x, y, send, recv;
  std::int64_t group_size;

  [[nodiscard]] Ref at(Ref base, std::int64_t elems) const { return Ref{base.buf, base.offset + elems * s}; }
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("plan step {} ({} over mesh dims {}) on rank {}: {}", k, to_string(st.kind),
                                 fmt::join(st.mesh_dims, ","), rank, what));
  }
  void need(bool ok, const std::string& what) const {
    if (!ok) fail(what);
  }
};

void lower_all_gather(const StepContext& c, RankStep& rs) {
  const StepBuffers& b = c.st.buffers;
  const auto mem = group_members(c.mesh, c.coord, c.st.mesh_dims);
  const auto n = static_cast<std::int64_t>(mem.size());
  rs.comm.count = b.chunk;
  if (b.zero_copy) {
    c.need(c.x_elems == b.chunk && c.y_elems == n * b.chunk,
           fmt::format("in-place all_gather of {} elements per member, but the rank holds {} before and {} after",
                       b.chunk, c.x_elems, c.y_elems));
    rs.comm.send = c.x;
    rs.comm.recv = c.y;
    return;
  }
  c.need(b.recv_elems >= n * b.chunk, fmt::format("receive region of {} elements for {} members of {}", b.recv_elems, n, b.chunk));
  rs.comm.recv = c.recv;
  if (b.pad_send) {
    c.need(b.send_elems >= b.chunk, fmt::format("send region of {} elements for a chunk of {}", b.send_elems, b.chunk));
    rs.pre.push_back({Action::fill, c.send, {}, b.chunk, 0, {}});
    rs.pre.push_back({Action::copy, c.send, c.x, c.x_elems * c.s, 0, {}});
    rs.comm.send = c.send;
  } else {
    c.need(c.x_elems == b.chunk, fmt::format("unpadded all_gather of {} elements, the rank holds {}", b.chunk, c.x_elems));
    rs.comm.send = c.x;
  }
  for (std::size_t q = 0; q < mem.size(); ++q) {
    const auto Xq = c.from.indices(mem[q]);
    c.need(box_numel(Xq) <= b.chunk, fmt::format("member {} holds {} elements, above the chunk {}", q, box_numel(Xq), b.chunk));
    add_box_copies(rs.post, c.y, c.Ys, c.at(c.recv, static_cast<std::int64_t>(q) * b.chunk), Xq, Xq, c.s);
  }
}

void lower_reduce_scatter(const StepContext& c, RankStep& rs) {
  const StepBuffers& b = c.st.buffers;
  const auto mem = group_members(c.mesh, c.coord, c.st.mesh_dims);
  const auto n = static_cast<std::int64_t>(mem.size());
  rs.comm.count = b.chunk;
  if (b.zero_copy) {
    c.need(c.y_elems == b.chunk && c.x_elems == n * b.chunk,
           fmt::format("in-place reduce_scatter of {} elements per member, but the rank holds {} before and {} after",
                       b.chunk, c.x_elems, c.y_elems));
    rs.comm.send = c.x;
    rs.comm.recv = c.y;
    return;
  }
  c.need(b.send_elems >= n * b.chunk && b.recv_elems >= b.chunk && c.y_elems <= b.chunk,
         fmt::format("scratch of {}/{} elements for {} members of {}", b.send_elems, b.recv_elems, n, b.chunk));
  rs.pre.push_back({Action::fill, c.send, {}, n * b.chunk, 0, {}});
  for (std::size_t q = 0; q < mem.size(); ++q) {
    const auto Yq = c.to.indices(mem[q]);
    c.need(box_numel(Yq) <= b.chunk, fmt::format("member {} needs {} elements, above the chunk {}", q, box_numel(Yq), b.chunk));
    add_box_copies(rs.pre, c.at(c.send, static_cast<std::int64_t>(q) * b.chunk), Yq, c.x, c.Xs, Yq, c.s);
  }
  rs.comm.send = c.send;
  rs.comm.recv = c.recv;
  rs.post.push_back({Action::copy, c.y, c.recv, c.y_elems * c.s, 0, {}});
}

void lower_all_reduce(const StepContext& c, RankStep& rs) {
  c.need(c.x_elems == c.y_elems, fmt::format("all_reduce from {} to {} elements", c.x_elems, c.y_elems));
  rs.comm.send = c.x;
  rs.comm.recv = c.y;
  rs.comm.count = c.x_elems;
}

void lower_all_to_all(const StepContext& c, RankStep& rs) {
  const StepBuffers& b = c.st.buffers;
  const auto mem = group_members(c.mesh, c.coord, c.st.mesh_dims);
  const auto n = static_cast<std::int64_t>(mem.size());
  c.need(b.send_elems >= n * b.chunk && b.recv_elems >= n * b.chunk,
         fmt::format("scratch of {}/{} elements for {} members of {}", b.send_elems, b.recv_elems, n, b.chunk));
  rs.comm.count = b.chunk;
  rs.pre.push_back({Action::fill, c.send, {}, n * b.chunk, 0, {}});
  for (std::size_t q = 0; q < mem.size(); ++q) {
    const auto box = intersect(c.Xs, c.to.indices(mem[q]));
    const auto back = intersect(c.from.indices(mem[q]), c.Ys);
    c.need(box_numel(box) <= b.chunk && box_numel(back) <= b.chunk,
           fmt::format("member {} exchanges {}/{} elements, above the chunk {}", q, box_numel(box), box_numel(back), b.chunk));
    add_box_copies(rs.pre, c.at(c.send, static_cast<std::int64_t>(q) * b.chunk), box, c.x, c.Xs, box, c.s);
    add_box_copies(rs.post, c.y, c.Ys, c.at(c.recv, static_cast<std::int64_t>(q) * b.chunk), back, back, c.s);
  }
  rs.comm.send = c.send;
  rs.comm.recv = c.recv;
}

void lower_local_chunk(const StepContext& c, RankStep& rs) { add_box_copies(rs.pre, c.y, c.Ys, c.x, c.Xs, c.Ys, c.s); }

void lower_local_fill(const StepContext& c, RankStep& rs) {
  const int m = c.st.mesh_dims.at(0);
  const auto fop = c.st.to.partial(m);
  c.need(fop.has_value(), "a local fill must end in Partial on its mesh dim");
  if (c.st.from.shard_dim_of(m) >= 0) {  // S(d) -> P(sum): the shard in a zero tensor
    rs.pre.push_back({Action::fill, c.y, {}, c.y_elems, 0, {}});
    add_box_copies(rs.pre, c.y, c.Ys, c.x, c.Xs, c.Xs, c.s);
    return;
  }
  c.need(c.x_elems == c.y_elems, fmt::format("local fill from {} to {} elements", c.x_elems, c.y_elems));
  if (c.coord[static_cast<std::size_t>(m)] == 0 || *fop == ReduceOp::avg || *fop == ReduceOp::max ||
      *fop == ReduceOp::min)
    rs.pre.push_back({Action::copy, c.y, c.x, c.y_elems * c.s, 0, {}});
  else
    rs.pre.push_back({Action::fill, c.y, {}, c.y_elems, identity_of(*fop), {}});
}

void lower_relabel(const StepContext& c, RankStep& rs) {
  c.need(c.x_elems == c.y_elems, fmt::format("relabel from {} to {} elements", c.x_elems, c.y_elems));
  rs.pre.push_back({Action::copy, c.y, c.x, c.y_elems * c.s, 0, {}});
}

}  // namespace

std::optional<Ref> detail::run_in_place(Ref base, const std::vector<IndexSet>& local, const std::vector<IndexSet>& box,
                                std::int64_t s, bool reading) {
  std::vector<Action> probe;
  const Ref packed{Buf::ws, 0};
  if (reading)
    add_box_copies(probe, packed, box, base, local, box, s);
  else
    add_box_copies(probe, base, local, packed, box, box, s);
  if (probe.size() != 1) return std::nullopt;
  const Action& a = probe[0];
  const Ref from = a.kind == Action::box ? a.box_copy.src : a.src, to = a.kind == Action::box ? a.box_copy.dst : a.dst;
  const std::int64_t bytes = a.kind == Action::box ? a.box_copy.run_bytes : a.bytes_or_count;
  if ((a.kind == Action::box && !a.box_copy.count.empty()) || bytes != box_numel(box) * s) return std::nullopt;
  if ((reading ? to : from).offset != 0) return std::nullopt;
  return reading ? from : to;
}

namespace {

void lower_direct(const StepContext& c, RankStep& rs) {
  const StepBuffers& b = c.st.buffers;
  std::vector<int> sharded;
  for (int d = 0; d < c.st.from.tensor_ndim(); ++d)
    for (const auto& e : c.st.from.entries(d)) sharded.push_back(e.mesh_dim);
  std::sort(sharded.begin(), sharded.end());
  const auto peers = group_members(c.mesh, c.coord, sharded);
  std::int64_t send_off = 0;
  std::vector<std::pair<std::int64_t, std::vector<IndexSet>>> incoming;
  for (const auto& pc : peers) {
    const auto peer = c.mesh.rank_at(pc);
    if (peer == c.rank) {
      add_box_copies(rs.pre, c.y, c.Ys, c.x, c.Xs, intersect(c.Xs, c.Ys), c.s);
      continue;
    }
    const auto out_box = intersect(c.Xs, c.to.indices(pc));  // what the peer needs from me
    if (const auto n = box_numel(out_box); n > 0) {
      if (const auto in_place = run_in_place(c.x, c.Xs, out_box, c.s, true)) {
        rs.comm.sends.push_back({peer, *in_place, n});  // one run of the source: sent as it lies
      } else {
        add_box_copies(rs.pre, c.at(c.send, send_off), out_box, c.x, c.Xs, out_box, c.s);
        rs.comm.sends.push_back({peer, c.at(c.send, send_off), n});
        send_off += n;
      }
    }
    auto in_box = intersect(c.from.indices(pc), c.Ys);  // what I need from the peer
    if (box_numel(in_box) > 0) incoming.emplace_back(peer, std::move(in_box));
  }
  std::int64_t recv_off = send_off;
  for (auto& [peer, box] : incoming) {
    const auto n = box_numel(box);
    if (const auto in_place = run_in_place(c.y, c.Ys, box, c.s, false)) {
      rs.comm.recvs.push_back({peer, *in_place, n});  // one run of the target: received where it goes
      continue;
    }
    rs.comm.recvs.push_back({peer, c.at(c.send, recv_off), n});
    add_box_copies(rs.post, c.y, c.Ys, c.at(c.send, recv_off), box, box, c.s);
    recv_off += n;
  }
  c.need(recv_off <= b.send_elems, fmt::format("needs {} scratch elements, the plan sized {}", recv_off, b.send_elems));
}

using Lowering = void (*)(const StepContext&, RankStep&);
Lowering lowering_of(StepKind k) {
  switch (k) {
    case StepKind::all_gather: return lower_all_gather;
    case StepKind::reduce_scatter: return lower_reduce_scatter;
    case StepKind::all_reduce: return lower_all_reduce;
    case StepKind::all_to_all: return lower_all_to_all;
    case StepKind::local_chunk: return lower_local_chunk;
    case StepKind::local_fill: return lower_local_fill;
    case StepKind::relabel: return lower_relabel;
    case StepKind::direct: return lower_direct;
  }
  return lower_relabel;
}

// The regions a step touches must lie inside the workspace and not overlap one another.
void check_regions(const StepContext& c, std::int64_t workspace) {
  struct Region {
    const char* name;
    std::int64_t offset, bytes;
  };
  const StepBuffers& b = c.st.buffers;
  std::vector<Region> rs;
  if (c.x.buf == Buf::ws) rs.push_back({"source state", c.x.offset, c.x_elems * c.s});
  if (c.y.buf == Buf::ws) rs.push_back({"target state", c.y.offset, c.y_elems * c.s});
  rs.push_back({"send scratch", b.send_offset, b.send_elems * c.s});
  rs.push_back({"receive scratch", b.recv_offset, b.recv_elems * c.s});
  for (const auto& r : rs)
    if (r.bytes > 0 && (r.offset < 0 || r.offset > workspace || r.bytes > workspace - r.offset))
      c.fail(fmt::format("its {} [{}, +{}) lies outside the {}-byte workspace", r.name, r.offset, r.bytes, workspace));
  for (std::size_t i = 0; i < rs.size(); ++i)
    for (std::size_t j = i + 1; j < rs.size(); ++j) {
      const auto& a = rs[i];
      const auto& o = rs[j];
      if (a.bytes > 0 && o.bytes > 0 && a.offset < o.offset + o.bytes && o.offset < a.offset + a.bytes)
        c.fail(fmt::format("its {} and {} overlap", a.name, o.name));
    }
}

}  // namespace

Executor::Executor(const Plan& plan, Communicator& comm, ExecutorOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& I = *impl_;
  const Mesh& mesh = plan.mesh();
  if (comm.mesh() != mesh)
    throw InputError(fmt::format("the communicator's mesh {} is not the plan's mesh {}", comm.mesh().str(), mesh.str()));
  // The plan is untrusted: it must be exactly one the planner produces (every step, group and
  // buffer record re-derived), which is what makes every copy derived below stay in bounds.
  // (once per plan in this process: the ranks of an in-process world share it)
  validate_plan_once(plan, options.max_workspace_bytes);
  I.comm = &comm;
  I.dtype = plan.dtype();
  I.rank = comm.rank();
  I.workspace = plan.peak_bytes;
  const std::int64_t s = static_cast<std::int64_t>(itemsize(plan.dtype()));
  const std::size_t S = plan.steps.size();
  const auto c = mesh.coord_of_rank(I.rank);
  I.input_bytes = plan.src.local_numel(c) * s;
  I.output_bytes = plan.dst.local_numel(c) * s;
  for (std::size_t k = 0; k < S; ++k) {
    const Step& st = plan.steps[k];
    const StepBuffers& b = st.buffers;
    Layout from(mesh, plan.shape(), plan.dtype(), st.from), to(mesh, plan.shape(), plan.dtype(), st.to);
    auto Xs = from.indices(c), Ys = to.indices(c);
    const std::int64_t xe = box_numel(Xs), ye = box_numel(Ys);
    const Ref x = k == 0 ? Ref{Buf::input, 0} : Ref{Buf::ws, b.from_offset};
    const Ref y = k + 1 == S ? Ref{Buf::output, 0} : Ref{Buf::ws, b.to_offset};
    const StepContext ctx{mesh, st, k, I.rank, c, std::move(from), std::move(to), std::move(Xs), std::move(Ys), xe, ye, s,
                          x, y, Ref{Buf::ws, b.send_offset}, Ref{Buf::ws, b.recv_offset}, 0};
    if (b.chunk < 0 || b.send_elems < 0 || b.recv_elems < 0 || b.chunk > (INT64_MAX / 16) / s ||
        b.send_elems > (INT64_MAX / 16) / s || b.recv_elems > (INT64_MAX / 16) / s)
      ctx.fail(fmt::format("its buffer record has impossible sizes (chunk {}, send {}, recv {})", b.chunk, b.send_elems,
                           b.recv_elems));
    check_regions(ctx, I.workspace);
    // the backend's abilities, checked before any communication
    RankStep rs;
    rs.comm.collective = collective_of(st.kind);
    std::optional<ReduceOp> op;
    for (int m : st.mesh_dims)
      if (auto p = st.from.partial(m)) op = p;
    rs.comm.op = op.value_or(ReduceOp::sum);
    if (rs.comm.collective && !comm.supports(*rs.comm.collective, plan.dtype(), rs.comm.op))
      throw InputError(fmt::format("this backend cannot run step {} ({} over mesh dims {}) on {}{}", k, to_string(st.kind),
                                   fmt::join(st.mesh_dims, ","), to_string(plan.dtype()),
                                   op ? fmt::format(" with op {}", to_string(*op)) : std::string()));
    lowering_of(st.kind)(ctx, rs);
    fuse_box_copies(rs.pre);
    fuse_box_copies(rs.post);
    I.send_list.reserve(std::max(I.send_list.capacity(), rs.comm.sends.size()));
    I.recv_list.reserve(std::max(I.recv_list.capacity(), rs.comm.recvs.size()));
    I.steps.push_back(std::move(rs));
    I.groups.push_back(Group{st.mesh_dims});
  }
  // Collective part: the plans agree, then the backend prepares its groups.
  I.plan_hash = plan.hash();
  I.check_every_call = options.check_plans_every_call && mesh.num_ranks() > 1;
  if (options.check_plans_agree && !I.check_every_call) check_plans_agree(comm, I.plan_hash);
  // the backend learns groups, never plans: the distinct groups of the plan's collectives
  std::vector<Group> groups;
  for (const Step& st : plan.steps)
    if (is_communication(st.kind) && st.kind != StepKind::direct &&
        std::find(groups.begin(), groups.end(), Group{st.mesh_dims}) == groups.end())
      groups.push_back(Group{st.mesh_dims});
  comm.prepare(groups);
}

Executor::~Executor() = default;
Executor::Executor(Executor&&) noexcept = default;
Executor& Executor::operator=(Executor&&) noexcept = default;

std::int64_t Executor::rank() const noexcept { return impl_->rank; }
std::int64_t Executor::workspace_bytes() const noexcept { return impl_->workspace; }
std::int64_t Executor::input_bytes() const noexcept { return impl_->input_bytes; }
std::int64_t Executor::output_bytes() const noexcept { return impl_->output_bytes; }

void Executor::Impl::check(const Buffers& b) const {
  if (static_cast<std::int64_t>(b.input.size()) != input_bytes)
    throw InputError(fmt::format("rank {}: input buffer has {} bytes, the source layout needs {}", rank, b.input.size(),
                                 input_bytes));
  if (static_cast<std::int64_t>(b.output.size()) != output_bytes)
    throw InputError(fmt::format("rank {}: output buffer has {} bytes, the target layout needs {}", rank,
                                 b.output.size(), output_bytes));
  if (static_cast<std::int64_t>(b.workspace.size()) < workspace)
    throw InputError(fmt::format("rank {}: workspace has {} bytes, the plan needs {}", rank, b.workspace.size(), workspace));
}

std::byte* detail::buffer_ptr(const Buffers& b, Ref r) noexcept {
  switch (r.buf) {
    case Buf::input: return const_cast<std::byte*>(b.input.data()) + r.offset;  // only ever read
    case Buf::output: return b.output.data() + r.offset;
    case Buf::ws: return b.workspace.data() + r.offset;
  }
  return nullptr;
}

void detail::run_actions(Communicator& comm, DType dtype, const Buffers& b, std::span<const Action> actions) {
  for (const auto& a : actions) {
    switch (a.kind) {
      case Action::fill: comm.fill(buffer_ptr(b, a.dst), dtype, a.bytes_or_count, a.value); break;
      case Action::copy: comm.copy(buffer_ptr(b, a.dst), buffer_ptr(b, a.src), a.bytes_or_count); break;
      case Action::box:
        comm.copy_strided(buffer_ptr(b, a.box_copy.dst), buffer_ptr(b, a.box_copy.src), a.box_copy.run_bytes,
                          a.box_copy.count, a.box_copy.dst_stride, a.box_copy.src_stride);
        break;
    }
  }
}

void detail::run_send_recv(Communicator& comm, DType dtype, const Buffers& b, const std::vector<CommCall::P2P>& sends,
                           const std::vector<CommCall::P2P>& recvs, std::vector<Transfer>& send_list,
                           std::vector<Transfer>& recv_list) {
  send_list.clear();
  recv_list.clear();
  for (const auto& t : sends) send_list.push_back({t.peer, buffer_ptr(b, t.buffer), t.count});
  for (const auto& t : recvs) recv_list.push_back({t.peer, buffer_ptr(b, t.buffer), t.count});
  comm.send_recv(send_list, recv_list, dtype);
  comm.synchronize();
}

std::byte* Executor::Impl::ptr(const Buffers& b, Ref r) const { return buffer_ptr(b, r); }

void Executor::Impl::run(const Buffers& b, const std::vector<Action>& actions) const {
  run_actions(*comm, dtype, b, actions);
}

void issue_collective(Communicator& comm, Collective c, const Group& g, const void* send, void* recv, std::int64_t count,
                      DType dtype, ReduceOp op) {
  switch (c) {
    case Collective::all_gather: comm.all_gather(g, send, recv, count, dtype); break;
    case Collective::reduce_scatter: comm.reduce_scatter(g, send, recv, count, dtype, op); break;
    case Collective::all_reduce: comm.all_reduce(g, send, recv, count, dtype, op); break;
    case Collective::all_to_all: comm.all_to_all(g, send, recv, count, dtype); break;
    case Collective::send_recv: throw InputError("issue_collective: a grouped send/recv takes transfer lists");
  }
}

void Executor::Impl::append_transfers(const Buffers& b, std::size_t k, std::vector<Transfer>& sends,
                                      std::vector<Transfer>& recvs) const {
  const auto& cc = steps[k].comm;
  for (const auto& t : cc.sends) sends.push_back({t.peer, ptr(b, t.buffer), t.count});
  for (const auto& t : cc.recvs) recvs.push_back({t.peer, ptr(b, t.buffer), t.count});
}

void Executor::Impl::issue(const Buffers& b, std::size_t k) const {
  const auto& cc = steps[k].comm;
  if (!cc.collective) return;
  if (*cc.collective != Collective::send_recv) {
    issue_collective(*comm, *cc.collective, groups[k], ptr(b, cc.send), ptr(b, cc.recv), cc.count, dtype, cc.op);
    return;
  }
  send_list.clear();
  recv_list.clear();
  append_transfers(b, k, send_list, recv_list);
  comm->send_recv(send_list, recv_list, dtype);
}

std::int64_t Executor::collectives() const noexcept {
  std::int64_t n = 0;
  for (const auto& st : impl_->steps) n += st.comm.collective ? 1 : 0;
  return n;
}

bool Executor::ends_with_collective() const noexcept {
  for (auto it = impl_->steps.rbegin(); it != impl_->steps.rend(); ++it) {
    if (it->comm.collective) return it->post.empty();
    if (!it->pre.empty() || !it->post.empty()) return false;
  }
  return false;
}

void Executor::execute(const Buffers& b) const {
  const Impl& I = *impl_;
  I.check(b);
  if (I.check_every_call) check_plans_agree(*I.comm, I.plan_hash);  // before anything moves
  if (I.steps.empty()) {  // source == target
    I.comm->copy(b.output.data(), b.input.data(), static_cast<std::int64_t>(b.input.size()));
    return;
  }
  for (std::size_t k = 0; k < I.steps.size(); ++k) {
    I.run(b, I.steps[k].pre);
    if (I.steps[k].comm.collective) {
      I.issue(b, k);
      I.comm->synchronize();
    }
    I.run(b, I.steps[k].post);
  }
}

}  // namespace dtensor

// Executor: every index set, box copy, buffer offset and transfer of a plan is computed when it
// is prepared; `execute` only walks those actions and issues the collectives.
#include "dtensor/executor.hpp"

#include <algorithm>

#include "../planner/graph.hpp"
#include "groups.hpp"
#include "dtensor/error.hpp"
#include "dtensor/scalar.hpp"

namespace dtensor {
namespace {

enum class Buf : std::uint8_t { input, output, ws };
struct Ref {
  Buf buf = Buf::ws;
  std::int64_t offset = 0;  // bytes
};

// A strided copy between two regions (offsets included in the refs).
struct BoxCopy {
  Ref dst, src;
  std::int64_t run_bytes = 0;
  std::vector<std::int64_t> count, dst_stride, src_stride;
};

struct Action {
  enum Kind : std::uint8_t { fill, copy, box } kind;
  Ref dst, src;
  std::int64_t bytes_or_count = 0;
  double value = 0;
  BoxCopy box_copy;
};

struct CommCall {
  enum Kind : std::uint8_t { none, all_gather, reduce_scatter, all_reduce, all_to_all, send_recv } kind = none;
  Ref send, recv;
  std::int64_t count = 0;
  ReduceOp op = ReduceOp::sum;
  struct P2P {
    std::int64_t peer;
    Ref buffer;
    std::int64_t count;
  };
  std::vector<P2P> sends, recvs;
};

struct RankStep {
  std::vector<Action> pre, post;
  CommCall comm;
};

struct RankProgram {
  std::int64_t rank = 0;
  std::int64_t input_bytes = 0, output_bytes = 0;
  std::vector<RankStep> steps;
};

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

// Copies of the elements of `box` from a local tensor with index sets `src` into one with `dst`.
void add_box_copies(std::vector<Action>& out, Ref dst_ref, const std::vector<IndexSet>& dst, Ref src_ref,
                    const std::vector<IndexSet>& src, const std::vector<IndexSet>& box, std::int64_t itemsize) {
  const std::size_t nd = box.size();
  if (box_numel(box) == 0) return;
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
    std::size_t d = inner + 1;
    bool done = true;
    while (d-- > 0) {
      if (++pick[d] < segs[d].size()) {
        done = false;
        break;
      }
      pick[d] = 0;
    }
    if (done) break;
  }
}

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

std::vector<IndexSet> intersect(const std::vector<IndexSet>& a, const std::vector<IndexSet>& b) {
  std::vector<IndexSet> out;
  for (std::size_t d = 0; d < a.size(); ++d) out.push_back(a[d].intersect(b[d]));
  return out;
}

using detail::group_members;

CommCall::Kind comm_kind(StepKind k) {
  switch (k) {
    case StepKind::all_gather: return CommCall::all_gather;
    case StepKind::reduce_scatter: return CommCall::reduce_scatter;
    case StepKind::all_reduce: return CommCall::all_reduce;
    case StepKind::all_to_all: return CommCall::all_to_all;
    case StepKind::direct: return CommCall::send_recv;
    default: return CommCall::none;
  }
}

}  // namespace

struct Executor::Impl {
  Mesh mesh;
  DType dtype;
  std::int64_t workspace = 0;
  std::vector<Group> groups;  // per step
  std::vector<RankProgram> programs;
  std::vector<std::int64_t> slot_of_rank;  // global rank -> program index or -1
};

Executor::Executor(const Plan& plan, const Communicator& comm, std::vector<std::int64_t> ranks)
    : impl_(std::make_unique<Impl>(Impl{plan.mesh, plan.dtype, plan.peak_bytes, {}, {}, {}})) {
  const Mesh& mesh = plan.mesh;
  if (comm.mesh() != mesh)
    throw Error(fmt::format("the communicator's mesh {} is not the plan's mesh {}", comm.mesh().str(), mesh.str()));
  if (plan.shape.size() > 15) throw Error(fmt::format("tensors of {} dims exceed the executor's 15", plan.shape.size()));
  const std::int64_t s = static_cast<std::int64_t>(itemsize(plan.dtype));
  const Geometry geo(mesh.shape(), plan.shape, s);
  // The state chain, and the backend's abilities, checked before any communication.
  std::vector<Sharding> states{plan.src};
  for (std::size_t k = 0; k < plan.steps.size(); ++k) {
    const Step& st = plan.steps[k];
    if (st.from != states.back())
      throw Error(fmt::format("plan step {} starts from {} but the previous state is {}", k, st.from.str(), states.back().str()));
    states.push_back(st.to);
    std::optional<ReduceOp> op;
    for (int m : st.mesh_dims)
      if (auto p = st.from.partial(m)) op = p;
    if (!comm.supports(st.kind, plan.dtype, op.value_or(ReduceOp::sum)))
      throw Error(fmt::format("this backend cannot run step {} ({} over mesh dims {}) on {}{}", k, to_string(st.kind),
                              fmt::join(st.mesh_dims, ","), to_string(plan.dtype),
                              op ? fmt::format(" with op {}", to_string(*op)) : std::string()));
  }
  if (states.back() != plan.dst)
    throw Error(fmt::format("plan steps end in {} but the target is {}", states.back().str(), plan.dst.str()));
  for (std::size_t k = 1; k + 1 < states.size(); ++k)
    if (states[k] == plan.src || states[k] == plan.dst)
      throw Error(fmt::format("plan revisits its source or target at step {}", k));

  // Workspace: odd intermediate states at the front, even ones at the back, scratch between.
  const std::size_t S = plan.steps.size();
  std::vector<std::int64_t> state_max(states.size());
  for (std::size_t k = 0; k < states.size(); ++k) state_max[k] = geo.numel_stats(states[k]).max;
  auto state_ref = [&](std::size_t k) -> Ref {
    if (k == 0) return {Buf::input, 0};
    if (k == S) return {Buf::output, 0};
    if (k % 2 == 1) return {Buf::ws, 0};
    return {Buf::ws, impl_->workspace - ws_round(state_max[k] * s)};
  };
  std::vector<StepBuffers> bufs;
  std::vector<std::int64_t> scratch_base;
  for (std::size_t k = 0; k < S; ++k) {
    const Step& st = plan.steps[k];
    bufs.push_back(step_buffers(geo, st.kind, st.mesh_dims, st.tensor_dims, st.from, st.to));
    const auto need = step_peak_bytes(geo, bufs.back(), k == 0, k + 1 == S);
    if (need > impl_->workspace)
      throw Error(fmt::format("plan's peak_bytes {} is below the {} bytes step {} needs", impl_->workspace, need, k));
    std::int64_t base = 0;
    if (k > 0 && k % 2 == 1) base = ws_round(state_max[k] * s);           // from-state at the front
    if (k + 1 < S && (k + 1) % 2 == 1) base = ws_round(state_max[k + 1] * s);  // to-state at the front
    scratch_base.push_back(base);
    impl_->groups.push_back(Group{st.mesh_dims});
  }

  if (ranks.empty())
    for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) ranks.push_back(r);
  impl_->slot_of_rank.assign(static_cast<std::size_t>(mesh.num_ranks()), -1);
  for (const auto r : ranks) {
    const auto c = mesh.coord_of_rank(r);
    if (impl_->slot_of_rank[static_cast<std::size_t>(r)] != -1) throw Error(fmt::format("rank {} is prepared twice", r));
    impl_->slot_of_rank[static_cast<std::size_t>(r)] = static_cast<std::int64_t>(impl_->programs.size());
    RankProgram prog;
    prog.rank = r;
    const Layout src_layout(mesh, plan.shape, plan.dtype, plan.src);
    const Layout dst_layout(mesh, plan.shape, plan.dtype, plan.dst);
    prog.input_bytes = src_layout.local_numel(c) * s;
    prog.output_bytes = dst_layout.local_numel(c) * s;
    for (std::size_t k = 0; k < S; ++k) {
      const Step& st = plan.steps[k];
      const StepBuffers& b = bufs[k];
      const Layout from(mesh, plan.shape, plan.dtype, st.from);
      const Layout to(mesh, plan.shape, plan.dtype, st.to);
      const auto Xs = from.indices(c);
      const auto Ys = to.indices(c);
      const Ref x = state_ref(k), y = state_ref(k + 1);
      const std::int64_t x_elems = box_numel(Xs), y_elems = box_numel(Ys);
      const Ref send{Buf::ws, scratch_base[k]};
      const Ref recv{Buf::ws, scratch_base[k] + ws_round(b.send_elems * s)};
      auto at = [&](Ref base, std::int64_t elems) { return Ref{base.buf, base.offset + elems * s}; };
      RankStep rs;
      rs.comm.kind = comm_kind(st.kind);
      std::optional<ReduceOp> op;
      for (int m : st.mesh_dims)
        if (auto p = st.from.partial(m)) op = p;
      rs.comm.op = op.value_or(ReduceOp::sum);
      switch (st.kind) {
        case StepKind::all_gather: {
          const auto mem = group_members(mesh, c, st.mesh_dims);
          rs.comm.count = b.chunk;
          if (b.zero_copy) {
            if (x_elems != b.chunk)
              throw Error(fmt::format("step {}: in-place all_gather needs {} elements on rank {}, it holds {}", k, b.chunk, r, x_elems));
            rs.comm.send = x;
            rs.comm.recv = y;
            break;
          }
          rs.comm.recv = recv;
          if (b.pad_send) {
            rs.pre.push_back({Action::fill, send, {}, b.chunk, 0, {}});
            rs.pre.push_back({Action::copy, send, x, x_elems * s, 0, {}});
            rs.comm.send = send;
          } else {
            rs.comm.send = x;
          }
          for (std::size_t q = 0; q < mem.size(); ++q) {
            const auto Xq = from.indices(mem[q]);
            add_box_copies(rs.post, y, Ys, at(recv, static_cast<std::int64_t>(q) * b.chunk), Xq, Xq, s);
          }
          break;
        }
        case StepKind::reduce_scatter: {
          const auto mem = group_members(mesh, c, st.mesh_dims);
          rs.comm.count = b.chunk;
          if (b.zero_copy) {
            if (y_elems != b.chunk)
              throw Error(fmt::format("step {}: in-place reduce_scatter needs {} elements on rank {}, it holds {}", k, b.chunk, r, y_elems));
            rs.comm.send = x;
            rs.comm.recv = y;
            break;
          }
          rs.pre.push_back({Action::fill, send, {}, b.send_elems, 0, {}});
          for (std::size_t q = 0; q < mem.size(); ++q) {
            const auto Yq = to.indices(mem[q]);
            add_box_copies(rs.pre, at(send, static_cast<std::int64_t>(q) * b.chunk), Yq, x, Xs, Yq, s);
          }
          rs.comm.send = send;
          rs.comm.recv = recv;
          rs.post.push_back({Action::copy, y, recv, y_elems * s, 0, {}});
          break;
        }
        case StepKind::all_reduce:
          rs.comm.send = x;
          rs.comm.recv = y;
          rs.comm.count = x_elems;
          break;
        case StepKind::all_to_all: {
          const auto mem = group_members(mesh, c, st.mesh_dims);
          rs.comm.count = b.chunk;
          rs.pre.push_back({Action::fill, send, {}, b.send_elems, 0, {}});
          for (std::size_t q = 0; q < mem.size(); ++q) {
            const auto box = intersect(Xs, to.indices(mem[q]));
            add_box_copies(rs.pre, at(send, static_cast<std::int64_t>(q) * b.chunk), box, x, Xs, box, s);
            const auto back = intersect(from.indices(mem[q]), Ys);
            add_box_copies(rs.post, y, Ys, at(recv, static_cast<std::int64_t>(q) * b.chunk), back, back, s);
          }
          rs.comm.send = send;
          rs.comm.recv = recv;
          break;
        }
        case StepKind::local_chunk:
          add_box_copies(rs.pre, y, Ys, x, Xs, Ys, s);
          break;
        case StepKind::local_fill: {
          const int m = st.mesh_dims.at(0);
          const ReduceOp fop = *st.to.partial(m);
          if (st.from.shard_dim_of(m) >= 0) {  // S(d) -> P(sum): the shard in a zero tensor
            rs.pre.push_back({Action::fill, y, {}, y_elems, 0, {}});
            add_box_copies(rs.pre, y, Ys, x, Xs, Xs, s);
          } else if (c[static_cast<std::size_t>(m)] == 0 || fop == ReduceOp::avg || fop == ReduceOp::max ||
                     fop == ReduceOp::min) {
            rs.pre.push_back({Action::copy, y, x, y_elems * s, 0, {}});
          } else {
            rs.pre.push_back({Action::fill, y, {}, y_elems, identity_of(fop), {}});
          }
          break;
        }
        case StepKind::relabel:
          rs.pre.push_back({Action::copy, y, x, y_elems * s, 0, {}});
          break;
        case StepKind::direct: {
          std::vector<int> sharded;
          for (int d = 0; d < st.from.tensor_ndim(); ++d)
            for (const auto& e : st.from.entries(d)) sharded.push_back(e.mesh_dim);
          std::sort(sharded.begin(), sharded.end());
          const auto peers = group_members(mesh, c, sharded);
          std::int64_t send_off = 0;
          std::vector<std::pair<std::int64_t, std::vector<IndexSet>>> incoming;
          for (const auto& pc : peers) {
            const auto peer = mesh.rank_at(pc);
            if (peer == r) {
              add_box_copies(rs.pre, y, Ys, x, Xs, intersect(Xs, Ys), s);
              continue;
            }
            const auto out_box = intersect(Xs, to.indices(pc));  // what the peer needs from me
            if (const auto n = box_numel(out_box); n > 0) {
              add_box_copies(rs.pre, at(send, send_off), out_box, x, Xs, out_box, s);
              rs.comm.sends.push_back({peer, at(send, send_off), n});
              send_off += n;
            }
            auto in_box = intersect(from.indices(pc), Ys);  // what I need from the peer
            if (box_numel(in_box) > 0) incoming.emplace_back(peer, std::move(in_box));
          }
          std::int64_t recv_off = send_off;
          for (auto& [peer, box] : incoming) {
            const auto n = box_numel(box);
            rs.comm.recvs.push_back({peer, at(send, recv_off), n});
            add_box_copies(rs.post, y, Ys, at(send, recv_off), box, box, s);
            recv_off += n;
          }
          if (recv_off > b.send_elems)
            throw Error(fmt::format("direct step {} needs {} scratch elements on rank {}, the plan sized {}", k,
                                    recv_off, r, b.send_elems));
          break;
        }
      }
      fuse_box_copies(rs.pre);
      fuse_box_copies(rs.post);
      prog.steps.push_back(std::move(rs));
    }
    impl_->programs.push_back(std::move(prog));
  }
}

Executor::~Executor() = default;
Executor::Executor(Executor&&) noexcept = default;
Executor& Executor::operator=(Executor&&) noexcept = default;

std::int64_t Executor::workspace_bytes() const noexcept { return impl_->workspace; }

std::int64_t Executor::input_bytes(std::int64_t rank) const {
  if (rank < 0 || rank >= static_cast<std::int64_t>(impl_->slot_of_rank.size()) ||
      impl_->slot_of_rank[static_cast<std::size_t>(rank)] < 0)
    throw Error(fmt::format("rank {} was not prepared by this executor", rank));
  return impl_->programs[static_cast<std::size_t>(impl_->slot_of_rank[static_cast<std::size_t>(rank)])].input_bytes;
}

std::int64_t Executor::output_bytes(std::int64_t rank) const {
  (void)input_bytes(rank);
  return impl_->programs[static_cast<std::size_t>(impl_->slot_of_rank[static_cast<std::size_t>(rank)])].output_bytes;
}

void Executor::execute(Communicator& comm, std::span<const RankBuffers> buffers) const {
  const Impl& I = *impl_;
  if (buffers.size() != I.programs.size())
    throw Error(fmt::format("execute got buffers for {} rank(s); the executor was prepared for {}", buffers.size(),
                            I.programs.size()));
  std::vector<const RankProgram*> progs;
  for (const auto& b : buffers) {
    const auto in = input_bytes(b.rank);
    const RankProgram& p = I.programs[static_cast<std::size_t>(I.slot_of_rank[static_cast<std::size_t>(b.rank)])];
    for (const auto* q : progs)
      if (q == &p) throw Error(fmt::format("rank {} appears twice in execute", b.rank));
    if (static_cast<std::int64_t>(b.input.size()) != in)
      throw Error(fmt::format("rank {}: input buffer has {} bytes, the source layout needs {}", b.rank, b.input.size(), in));
    if (static_cast<std::int64_t>(b.output.size()) != p.output_bytes)
      throw Error(fmt::format("rank {}: output buffer has {} bytes, the target layout needs {}", b.rank,
                              b.output.size(), p.output_bytes));
    if (static_cast<std::int64_t>(b.workspace.size()) < I.workspace)
      throw Error(fmt::format("rank {}: workspace has {} bytes, the plan needs {}", b.rank, b.workspace.size(), I.workspace));
    progs.push_back(&p);
  }
  auto ptr = [&](const RankBuffers& b, Ref r) -> std::byte* {
    switch (r.buf) {
      case Buf::input: return const_cast<std::byte*>(b.input.data()) + r.offset;  // only ever read
      case Buf::output: return b.output.data() + r.offset;
      case Buf::ws: return b.workspace.data() + r.offset;
    }
    return nullptr;
  };
  auto run = [&](const RankBuffers& b, const std::vector<Action>& actions) {
    for (const auto& a : actions) {
      switch (a.kind) {
        case Action::fill: comm.fill(ptr(b, a.dst), I.dtype, a.bytes_or_count, a.value); break;
        case Action::copy: comm.copy(ptr(b, a.dst), ptr(b, a.src), a.bytes_or_count); break;
        case Action::box:
          comm.copy_strided(ptr(b, a.box_copy.dst), ptr(b, a.box_copy.src), a.box_copy.run_bytes, a.box_copy.count,
                            a.box_copy.dst_stride, a.box_copy.src_stride);
          break;
      }
    }
  };
  if (!progs.empty() && progs[0]->steps.empty()) {  // source == target
    for (const auto& b : buffers) comm.copy(b.output.data(), b.input.data(), static_cast<std::int64_t>(b.input.size()));
    return;
  }
  const std::size_t S = progs.empty() ? 0 : progs[0]->steps.size();
  std::vector<Transfer> sends, recvs;
  for (std::size_t k = 0; k < S; ++k) {
    bool any_comm = false;
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      const auto& b = buffers[i];
      const RankStep& rs = progs[i]->steps[k];
      run(b, rs.pre);
      const auto& cc = rs.comm;
      const Group& g = I.groups[k];
      switch (cc.kind) {
        case CommCall::none: break;
        case CommCall::all_gather: comm.all_gather(b.rank, g, ptr(b, cc.send), ptr(b, cc.recv), cc.count, I.dtype); break;
        case CommCall::reduce_scatter:
          comm.reduce_scatter(b.rank, g, ptr(b, cc.send), ptr(b, cc.recv), cc.count, I.dtype, cc.op);
          break;
        case CommCall::all_reduce:
          comm.all_reduce(b.rank, g, ptr(b, cc.send), ptr(b, cc.recv), cc.count, I.dtype, cc.op);
          break;
        case CommCall::all_to_all: comm.all_to_all(b.rank, g, ptr(b, cc.send), ptr(b, cc.recv), cc.count, I.dtype); break;
        case CommCall::send_recv:
          sends.clear();
          recvs.clear();
          for (const auto& t : cc.sends) sends.push_back({t.peer, ptr(b, t.buffer), t.count});
          for (const auto& t : cc.recvs) recvs.push_back({t.peer, ptr(b, t.buffer), t.count});
          comm.send_recv(b.rank, sends, recvs, I.dtype);
          break;
      }
      any_comm = any_comm || cc.kind != CommCall::none;
    }
    if (any_comm) comm.synchronize();
    for (std::size_t i = 0; i < buffers.size(); ++i) run(buffers[i], progs[i]->steps[k].post);
  }
}

}  // namespace dtensor

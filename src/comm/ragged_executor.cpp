// The ragged executor (ragged_executor.hpp). Workspace: one region per intermediate state, then
// one shared region for the stages' own scratch (an ordinary stage's workspace, or an exchange's
// packing scratch: sends, then receives).
#include "dtensor/ragged_executor.hpp"

#include <algorithm>
#include <optional>

#include "dtensor/error.hpp"
#include "executor_impl.hpp"
#include "placement/ragged_exchange.hpp"

namespace dtensor {
using namespace detail;
namespace {

constexpr std::int64_t kAlign = 64;
std::int64_t align_up(std::int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// The bytes a local action reads and writes, as [lowest, end) of each side.
void check_action_bounds(const Action& a, std::int64_t s, const std::int64_t (&sizes)[3]) {
  auto check = [&](Ref r, std::int64_t span) {
    const auto size = sizes[static_cast<int>(r.buf)];
    if (r.offset < 0 || span > size - r.offset)
      throw InputError(fmt::format("a ragged exchange's copy reaches [{}, +{}) outside its {}-byte buffer", r.offset, span, size));
  };
  if (a.kind == Action::box) {
    std::int64_t ext_d = a.box_copy.run_bytes, ext_s = a.box_copy.run_bytes;
    for (std::size_t k = 0; k < a.box_copy.count.size(); ++k) {
      ext_d += (a.box_copy.count[k] - 1) * a.box_copy.dst_stride[k];
      ext_s += (a.box_copy.count[k] - 1) * a.box_copy.src_stride[k];
    }
    check(a.box_copy.dst, ext_d);
    check(a.box_copy.src, ext_s);
  } else {
    check(a.dst, a.kind == Action::copy ? a.bytes_or_count : a.bytes_or_count * s);
    if (a.kind == Action::copy) check(a.src, a.bytes_or_count);
  }
}

}  // namespace

struct RaggedExecutor::Impl {
  Communicator* comm = nullptr;
  DType dtype = DType::f32;
  std::int64_t input_bytes = 0, output_bytes = 0, workspace = 0, copy_bytes = 0;
  struct Stage {
    std::optional<Executor> executor;  // an ordinary stage
    Ref in, out;                       // its source and target states
    std::int64_t in_bytes = 0, out_bytes = 0;
    std::vector<Action> own, pre, post;  // an exchange: its own part, packing, unpacking
    std::vector<CommCall::P2P> sends, recvs;
  };
  std::vector<Stage> stages;
  std::int64_t scratch_offset = 0, scratch_bytes = 0;
  mutable std::vector<Transfer> send_list, recv_list;
};

RaggedExecutor::RaggedExecutor(const RaggedPlan& plan, Communicator& comm, ExecutorOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& I = *impl_;
  const Mesh& mesh = plan.src.mesh();
  if (comm.mesh() != mesh)
    throw InputError(fmt::format("the communicator's mesh {} is not the ragged plan's mesh {}", comm.mesh().str(), mesh.str()));
  check_chain(plan);  // every stage one kind, chained from the source to the target
  const std::size_t S = plan.stages.size();
  I.comm = &comm;
  I.dtype = plan.src.dtype();
  const std::int64_t s = static_cast<std::int64_t>(itemsize(I.dtype));
  const std::int64_t rank = comm.rank();
  const auto c = mesh.coord_of_rank(rank);
  I.input_bytes = plan.src.local_numel(c) * s;
  I.output_bytes = plan.dst.local_numel(c) * s;
  // intermediate states, then the shared scratch
  std::int64_t off = 0;
  std::vector<Ref> state(S + 1);
  std::vector<std::int64_t> state_bytes(S + 1);
  state[0] = {Buf::input, 0};
  state_bytes[0] = I.input_bytes;
  for (std::size_t k = 1; k <= S; ++k) {
    const RaggedLayout l = plan.stages[k - 1].to();
    state_bytes[k] = l.local_numel(c) * s;
    if (k == S) {
      state[k] = {Buf::output, 0};
    } else {
      state[k] = {Buf::ws, off};
      off = align_up(off + state_bytes[k]);
    }
  }
  I.scratch_offset = off;
  ExecutorOptions inner = options;
  inner.check_plans_agree = false;
  inner.check_plans_every_call = false;
  for (std::size_t k = 0; k < S; ++k) {
    const auto& st = plan.stages[k];
    Impl::Stage out;
    out.in = state[k];
    out.out = state[k + 1];
    out.in_bytes = state_bytes[k];
    out.out_bytes = state_bytes[k + 1];
    if (st.plan) {
      out.executor.emplace(*st.plan, comm, inner);
      I.scratch_bytes = std::max(I.scratch_bytes, out.executor->workspace_bytes());
    } else {
      const auto& ex = *st.exchange;
      const auto from_block = ex.from.base().indices(c), to_block = ex.to.base().indices(c);
      const auto from_start = ex.from.piece(c).start, to_start = ex.to.piece(c).start;
      const Ref x{out.in.buf, out.in.offset - from_start * s}, y{out.out.buf, out.out.offset - to_start * s};
      std::int64_t scratch = 0;
      // where a transfer of part p lies: as one run of the piece (`block` at `base`) in place, else
      // in scratch, packed from the piece before (sending) or unpacked into it after (receiving)
      auto transfer_at = [&](const ExchangePart& p, const std::vector<IndexSet>& block, Ref base, bool sending) {
        if (contiguous_in(p.box, p.lo, p.hi, block)) return Ref{base.buf, base.offset + position_in(p.box, p.lo, block) * s};
        const Ref at{Buf::ws, I.scratch_offset + scratch * s};
        std::int64_t packed = 0;
        for (const auto& b : range_boxes(p.box, p.lo, p.hi)) {
          const Ref slot{Buf::ws, at.offset + packed * s};
          if (sending) add_box_copies(out.pre, slot, b, base, block, b, s);
          else add_box_copies(out.post, base, block, slot, b, b, s);
          packed += box_numel(b);
        }
        scratch += p.count();
        I.copy_bytes += p.count() * s;
        return at;
      };
      for (const auto& p : exchange_sends(ex.from, ex.to, c)) {
        if (p.peer == rank) {  // my own part: straight from my source piece into my target piece
          for (const auto& b : range_boxes(p.box, p.lo, p.hi)) add_box_copies(out.own, y, to_block, x, from_block, b, s);
          I.copy_bytes += p.count() * s;
          continue;
        }
        out.sends.push_back({p.peer, transfer_at(p, from_block, x, true), p.count()});
      }
      for (const auto& p : exchange_recvs(ex.from, ex.to, c))
        if (p.peer != rank) out.recvs.push_back({p.peer, transfer_at(p, to_block, y, false), p.count()});
      I.scratch_bytes = std::max(I.scratch_bytes, scratch * s);
    }
    I.stages.push_back(std::move(out));
  }
  I.workspace = I.scratch_offset + I.scratch_bytes;
  // every copy and transfer stays inside its buffer (a safety net behind the algebra)
  for (const auto& st : I.stages) {
    const std::int64_t sizes[3] = {I.input_bytes, I.output_bytes, I.workspace};
    for (const auto* list : {&st.own, &st.pre, &st.post})
      for (const auto& a : *list) check_action_bounds(a, s, sizes);
    for (const auto* list : {&st.sends, &st.recvs})
      for (const auto& t : *list)
        check_action_bounds(Action{Action::copy, t.buffer, t.buffer, t.count * s, 0, {}}, s, sizes);
  }
  if (options.check_plans_agree) check_plans_agree(comm, plan.hash());
  std::size_t most = 0;
  for (const auto& st : I.stages) most = std::max({most, st.sends.size(), st.recvs.size()});
  I.send_list.reserve(most);
  I.recv_list.reserve(most);
}

RaggedExecutor::~RaggedExecutor() = default;
RaggedExecutor::RaggedExecutor(RaggedExecutor&&) noexcept = default;
RaggedExecutor& RaggedExecutor::operator=(RaggedExecutor&&) noexcept = default;
std::int64_t RaggedExecutor::input_bytes() const noexcept { return impl_->input_bytes; }
std::int64_t RaggedExecutor::output_bytes() const noexcept { return impl_->output_bytes; }
std::int64_t RaggedExecutor::workspace_bytes() const noexcept { return impl_->workspace; }
std::int64_t RaggedExecutor::exchange_copy_bytes() const noexcept { return impl_->copy_bytes; }
std::int64_t RaggedExecutor::collectives() const noexcept {
  std::int64_t n = 0;
  for (const auto& st : impl_->stages) n += st.executor ? st.executor->collectives() : 1;
  return n;
}

void RaggedExecutor::execute(const Buffers& b) const {
  const Impl& I = *impl_;
  const auto rank = I.comm->rank();
  if (static_cast<std::int64_t>(b.input.size()) != I.input_bytes)
    throw InputError(fmt::format("rank {}: input buffer has {} bytes, the source layout needs {}", rank, b.input.size(), I.input_bytes));
  if (static_cast<std::int64_t>(b.output.size()) != I.output_bytes)
    throw InputError(fmt::format("rank {}: output buffer has {} bytes, the target layout needs {}", rank, b.output.size(), I.output_bytes));
  if (static_cast<std::int64_t>(b.workspace.size()) < I.workspace)
    throw InputError(fmt::format("rank {}: workspace has {} bytes, the ragged plan needs {}", rank, b.workspace.size(), I.workspace));
  if (I.stages.empty()) {
    I.comm->copy(b.output.data(), b.input.data(), static_cast<std::int64_t>(b.input.size()));
    return;
  }
  for (const auto& st : I.stages) {
    if (st.executor) {
      const Buffers sub{std::span<const std::byte>(buffer_ptr(b, st.in), static_cast<std::size_t>(st.in_bytes)),
                        std::span<std::byte>(buffer_ptr(b, st.out), static_cast<std::size_t>(st.out_bytes)),
                        b.workspace.subspan(static_cast<std::size_t>(I.scratch_offset),
                                            static_cast<std::size_t>(st.executor->workspace_bytes()))};
      st.executor->execute(sub);
      continue;
    }
    // the own part, unless source and target alias there (a local bucket viewing the gathered one)
    for (const auto& a : st.own) {
      const Ref src = a.kind == Action::box ? a.box_copy.src : a.src, dst = a.kind == Action::box ? a.box_copy.dst : a.dst;
      const bool same = buffer_ptr(b, src) == buffer_ptr(b, dst) &&
                        (a.kind != Action::box || a.box_copy.src_stride == a.box_copy.dst_stride);
      if (!same) run_actions(*I.comm, I.dtype, b, std::span<const Action>(&a, 1));
    }
    run_actions(*I.comm, I.dtype, b, st.pre);
    run_send_recv(*I.comm, I.dtype, b, st.sends, st.recvs, I.send_list, I.recv_list);
    run_actions(*I.comm, I.dtype, b, st.post);
  }
}

}  // namespace dtensor

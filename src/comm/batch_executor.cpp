// Runs a batch plan (docs/batch.md): every tensor's steps through its own prepared Executor, a
// coalesced stage as one collective over the members' chunks packed into the staging buffer
// (strided copies on the backend's memory) and unpacked from it, a grouped stage as the members'
// own collectives between Communicator::group_begin and group_end.
#include <algorithm>

#include <fmt/format.h>

#include "dtensor/batch_executor.hpp"
#include "dtensor/error.hpp"
#include "executor_impl.hpp"
#include "placement/workspace.hpp"

namespace dtensor {

struct BatchExecutor::Impl {
  Communicator* comm = nullptr;
  std::vector<Executor> executors;
  struct Stage {
    bool coalesced = false;
    bool grouped = false;
    Collective collective = Collective::all_reduce;
    Group group;
    ReduceOp op = ReduceOp::sum;
    DType dtype = DType::f32;
    std::int64_t n = 1;        // group size
    std::int64_t total = 0;    // C: the members' per-member counts summed
    std::vector<BatchStage::Member> members;
    std::vector<std::int64_t> offset, count;  // per member, elements
    std::int64_t recv_at = 0;                 // bytes: where the receive region starts in staging
  };
  std::vector<Stage> stages;
  std::vector<std::size_t> empty_plans;  // tensors whose source is their target
  std::int64_t staging = 0;
  // Scratch of execute(), sized when prepared so that it does not allocate (one executor serves
  // one rank: execute is not called concurrently on it).
  struct Span {
    const std::byte* lo;
    const std::byte* hi;
    std::size_t tensor;  // == the batch's size: the staging buffer
    const char* what;
    bool written;  // outputs, workspaces and the staging buffer; inputs are only read
  };
  mutable std::vector<Span> spans;
  mutable std::vector<Transfer> sends, recvs;
};

BatchExecutor::BatchExecutor(const BatchPlan& batch, Communicator& comm, ExecutorOptions options)
    : impl_(std::make_unique<Impl>()) {
  validate_batch_plan(batch);
  if (batch.plan(0).mesh() != comm.mesh())
    throw InputError(fmt::format("batch plan is for mesh {}, the communicator's mesh is {}", batch.plan(0).mesh().str(),
                                 comm.mesh().str()));
  Impl& I = *impl_;
  I.comm = &comm;
  if (options.check_plans_agree || options.check_plans_every_call) check_plans_agree(comm, batch.hash());
  ExecutorOptions each = options;
  each.check_plans_agree = false;  // the batch's hash covers every plan
  each.check_plans_every_call = false;
  for (std::size_t t = 0; t < batch.size(); ++t) {
    const Plan& p = batch.plan(t);
    I.executors.emplace_back(p, comm, each);
    if (p.steps.empty()) I.empty_plans.push_back(I.executors.size() - 1);
  }
  for (const auto& st : batch.stages) {
    Impl::Stage s;
    s.coalesced = st.coalesced;
    s.grouped = st.grouped;
    s.members = st.members;
    if (st.coalesced) {
      const ExecutorSteps first(I.executors[static_cast<std::size_t>(st.members.front().tensor)]);
      const auto& cc0 = first.call(static_cast<std::size_t>(st.members.front().step));
      s.collective = *cc0.collective;
      s.group = first.group(static_cast<std::size_t>(st.members.front().step));
      s.op = cc0.op;
      s.dtype = first.dtype();
      for (int m : s.group.mesh_dims) s.n *= comm.mesh().size(m);
      for (const auto& m : st.members) {
        const ExecutorSteps e(I.executors[static_cast<std::size_t>(m.tensor)]);
        const auto& cc = e.call(static_cast<std::size_t>(m.step));
        if (!cc.collective || *cc.collective != s.collective || cc.op != s.op || e.dtype() != s.dtype)
          throw InputError(fmt::format("batch stage members disagree on their collective (tensor {})", m.tensor));
        s.offset.push_back(s.total);
        s.count.push_back(cc.count);
        s.total += cc.count;
      }
      if (s.collective == Collective::send_recv) {  // one grouped send/recv in place: no staging
        I.stages.push_back(std::move(s));
        continue;
      }
      const auto layout = staging_layout(s.collective, s.n, s.total, static_cast<std::int64_t>(itemsize(s.dtype)));
      s.recv_at = layout.recv_at;
      I.staging = std::max(I.staging, layout.bytes);
    }
    I.stages.push_back(std::move(s));
  }
  I.spans.reserve(3 * I.executors.size() + 1);
  std::size_t transfers = 0;
  for (const auto& st : I.stages) {
    if (!st.coalesced || st.collective != Collective::send_recv) continue;
    std::size_t n = 0;
    for (const auto& m : st.members) {
      const auto& cc = ExecutorSteps(I.executors[static_cast<std::size_t>(m.tensor)]).call(static_cast<std::size_t>(m.step));
      n += cc.sends.size() + cc.recvs.size();
    }
    transfers = std::max(transfers, n);
  }
  I.sends.reserve(transfers);
  I.recvs.reserve(transfers);
}

BatchExecutor::~BatchExecutor() = default;
BatchExecutor::BatchExecutor(BatchExecutor&&) noexcept = default;
BatchExecutor& BatchExecutor::operator=(BatchExecutor&&) noexcept = default;
std::size_t BatchExecutor::size() const noexcept { return impl_->executors.size(); }
std::int64_t BatchExecutor::staging_bytes() const noexcept { return impl_->staging; }
const Executor& BatchExecutor::executor(std::size_t tensor) const { return impl_->executors.at(tensor); }

void BatchExecutor::execute(std::span<const Buffers> buffers, std::span<std::byte> staging) const {
  const Impl& I = *impl_;
  if (buffers.size() != I.executors.size())
    throw InputError(fmt::format("batch of {} tensors given {} buffer sets", I.executors.size(), buffers.size()));
  if (static_cast<std::int64_t>(staging.size()) < I.staging)
    throw InputError(fmt::format("staging buffer of {} bytes, the batch needs {}", staging.size(), I.staging));
  // No buffer the batch writes (an output, a workspace, the staging buffer) may overlap another
  // buffer of the batch: the results would depend on the order of stages. Sorted by start, a
  // span overlaps an earlier one exactly when it starts before the furthest end among them; so
  // each span is checked against the earlier span reaching furthest (a written one when the
  // span is only read).
  auto& spans = I.spans;
  spans.clear();
  for (std::size_t t = 0; t < buffers.size(); ++t) {
    const auto& b = buffers[t];
    if (!b.input.empty()) spans.push_back({b.input.data(), b.input.data() + b.input.size(), t, "input", false});
    if (!b.output.empty()) spans.push_back({b.output.data(), b.output.data() + b.output.size(), t, "output", true});
    if (!b.workspace.empty()) spans.push_back({b.workspace.data(), b.workspace.data() + b.workspace.size(), t, "workspace", true});
  }
  if (!staging.empty()) spans.push_back({staging.data(), staging.data() + staging.size(), buffers.size(), "staging", true});
  std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) { return a.lo < b.lo; });
  auto owner = [&](std::size_t t) { return t == buffers.size() ? std::string("the batch") : fmt::format("tensor {}", t); };
  const Impl::Span* furthest = nullptr;          // among all earlier spans
  const Impl::Span* furthest_written = nullptr;  // among the earlier written ones
  for (const auto& sp : spans) {
    const Impl::Span* other = sp.written ? furthest : furthest_written;
    if (other && sp.lo < other->hi)
      throw InputError(fmt::format("batch buffers overlap: the {} of {} and the {} of {}", other->what, owner(other->tensor),
                                   sp.what, owner(sp.tensor)));
    if (!furthest || sp.hi > furthest->hi) furthest = &sp;
    if (sp.written && (!furthest_written || sp.hi > furthest_written->hi)) furthest_written = &sp;
  }
  auto steps_of = [&](std::int32_t t) { return ExecutorSteps(I.executors[static_cast<std::size_t>(t)]); };
  for (std::size_t t = 0; t < buffers.size(); ++t) steps_of(static_cast<std::int32_t>(t)).check(buffers[t]);
  for (auto t : I.empty_plans) I.comm->copy(buffers[t].output.data(), buffers[t].input.data(), static_cast<std::int64_t>(buffers[t].input.size()));
  for (const auto& st : I.stages) {
    for (const auto& m : st.members) steps_of(m.tensor).before(buffers[static_cast<std::size_t>(m.tensor)], static_cast<std::size_t>(m.step));
    if (st.coalesced && st.collective == Collective::send_recv) {
      // the members' transfer lists joined: transfers between one pair of ranks are matched in
      // the order listed, which is the same (member order) on both sides
      I.sends.clear();
      I.recvs.clear();
      for (const auto& m : st.members)
        steps_of(m.tensor).append_transfers(buffers[static_cast<std::size_t>(m.tensor)], static_cast<std::size_t>(m.step), I.sends,
                                           I.recvs);
      I.comm->send_recv(I.sends, I.recvs, st.dtype);
      I.comm->synchronize();
    } else if (st.coalesced) {
      const auto item = static_cast<std::int64_t>(itemsize(st.dtype));
      std::byte* send = staging.data();
      std::byte* recv = staging.data() + st.recv_at;
      const std::int64_t C = st.total;
      // Each member's chunks between its own region and the staging buffer, one strided copy:
      // the member's side holds `runs` chunks of c elements back to back, the staging side the
      // same chunks strided by the combined count C. Sending: all_gather / all_reduce one run,
      // reduce_scatter / all_to_all one per group member; receiving: all_gather / all_to_all n.
      auto move_chunks = [&](bool pack) {
        for (std::size_t i = 0; i < st.members.size(); ++i) {
          const auto& m = st.members[i];
          const ExecutorSteps e = steps_of(m.tensor);
          const auto& cc = e.call(static_cast<std::size_t>(m.step));
          const Buffers& b = buffers[static_cast<std::size_t>(m.tensor)];
          const std::int64_t c = st.count[i], o = st.offset[i];
          if (c == 0) continue;
          const bool per_member = pack ? (st.collective == Collective::reduce_scatter || st.collective == Collective::all_to_all)
                                       : (st.collective == Collective::all_gather || st.collective == Collective::all_to_all);
          const std::int64_t count[1] = {per_member ? st.n : 1}, staged[1] = {C * item}, own[1] = {c * item};
          if (pack) I.comm->copy_strided(send + o * item, e.at(b, cc.send), c * item, count, staged, own);
          else I.comm->copy_strided(e.at(b, cc.recv), recv + o * item, c * item, count, own, staged);
        }
      };
      move_chunks(true);
      issue_collective(*I.comm, st.collective, st.group, send, recv, C, st.dtype, st.op);
      I.comm->synchronize();
      move_chunks(false);
    } else {
      // a grouped stage: every member's pre-step copies ran above, so nothing but the members'
      // collectives sits between group_begin and group_end
      if (st.grouped) I.comm->group_begin();
      bool issued = false;
      try {
        for (const auto& m : st.members) {
          const ExecutorSteps e = steps_of(m.tensor);
          if (!e.communicates(static_cast<std::size_t>(m.step))) continue;
          e.issue(buffers[static_cast<std::size_t>(m.tensor)], static_cast<std::size_t>(m.step));
          issued = true;
        }
      } catch (...) {
        if (st.grouped) {  // close the group (NCCL's is per thread) before the error leaves
          try {
            I.comm->group_end();
          } catch (...) {  // the first error is the one to report
          }
        }
        throw;
      }
      if (st.grouped) I.comm->group_end();
      if (issued) I.comm->synchronize();
    }
    for (const auto& m : st.members) steps_of(m.tensor).after(buffers[static_cast<std::size_t>(m.tensor)], static_cast<std::size_t>(m.step));
  }
}

}  // namespace dtensor

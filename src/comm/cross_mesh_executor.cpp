// Runs one world rank's part of a cross-mesh plan (docs/cross-mesh.md): the plan inside A on A's
// communicator, the transfer as one grouped send/recv over the world (boxes packed and unpacked by
// strided copies, read or written in place when a box is one run), the plan inside B on B's.
#include <algorithm>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "dtensor/cross_mesh_executor.hpp"
#include "dtensor/error.hpp"
#include "executor_impl.hpp"

namespace dtensor {
using namespace detail;

struct CrossMeshExecutor::Impl {
  Communicator* world = nullptr;
  DType dtype = DType::f32;
  std::optional<Executor> pre, post;
  std::int64_t input_bytes = 0, output_bytes = 0, workspace = 0;
  // Workspace: A's intermediate part (when A runs steps), B's (when B does), then one scratch
  // region that the plan inside A, the transfer's staging and the plan inside B use in turn.
  std::int64_t mid_a_off = -1, mid_a_bytes = 0, mid_b_off = -1, mid_b_bytes = 0, scratch_off = 0;
  std::int64_t pre_ws = 0, post_ws = 0, staging = 0;
  // Transfer actions on the view {input: A's intermediate part, output: B's, ws: staging}.
  std::vector<Action> pack, unpack;
  std::vector<CommCall::P2P> sends, recvs;
  bool exchanges = false;  // some message crosses between world ranks (every rank then calls send_recv)
  mutable std::vector<Transfer> send_list, recv_list;

  [[nodiscard]] Buffers transfer_view(const Buffers& b) const {
    Buffers v;
    v.input = mid_a_off >= 0 ? std::span<const std::byte>(b.workspace.subspan(static_cast<std::size_t>(mid_a_off),
                                                                              static_cast<std::size_t>(mid_a_bytes)))
                             : b.input;
    v.output = mid_b_off >= 0
                   ? b.workspace.subspan(static_cast<std::size_t>(mid_b_off), static_cast<std::size_t>(mid_b_bytes))
                   : b.output;
    v.workspace = b.workspace.subspan(static_cast<std::size_t>(scratch_off));
    return v;
  }
};

namespace {
std::int64_t index_of(const std::vector<std::int64_t>& ranks, std::int64_t w) {
  const auto it = std::find(ranks.begin(), ranks.end(), w);
  return it == ranks.end() ? -1 : static_cast<std::int64_t>(it - ranks.begin());
}
}  // namespace

CrossMeshExecutor::CrossMeshExecutor(const CrossMeshPlan& plan, Communicator& world, Communicator* on_src,
                                     Communicator* on_dst, ExecutorOptions options)
    : impl_(std::make_unique<Impl>()) {
  validate_cross_mesh_plan_once(plan);  // (once per plan in this process)
  Impl& I = *impl_;
  I.world = &world;
  I.dtype = plan.src.dtype();
  const std::int64_t w = world.rank();
  if (world.mesh().num_ranks() != plan.world_size)
    throw InputError(fmt::format("the world communicator has {} ranks, the cross-mesh plan's world {}",
                                 world.mesh().num_ranks(), plan.world_size));
  const std::int64_t ra = index_of(plan.src_ranks, w), rb = index_of(plan.dst_ranks, w);
  auto check_side = [&](const char* which, std::int64_t r, Communicator* c, const Mesh& mesh) {
    if ((r >= 0) != (c != nullptr))
      throw InputError(fmt::format("world rank {} is {}on the {} mesh but was given {} communicator for it", w,
                                   r >= 0 ? "" : "not ", which, c ? "a" : "no"));
    if (c && c->mesh() != mesh)
      throw InputError(fmt::format("the {} communicator's mesh {} is not the plan's {}", which, c->mesh().str(), mesh.str()));
    if (c && c->rank() != r)
      throw InputError(fmt::format("world rank {} is {} rank {}, but its {} communicator serves rank {}", w, which, r,
                                   which, c->rank()));
  };
  check_side("source", ra, on_src, plan.src.mesh());
  check_side("target", rb, on_dst, plan.dst.mesh());
  const auto s = static_cast<std::int64_t>(itemsize(plan.src.dtype()));
  ExecutorOptions inner = options;
  inner.check_plans_agree = false;  // the cross-mesh hash covers both plans
  inner.check_plans_every_call = false;
  // this rank's side of one mesh: its index sets in that mesh's intermediate layout, its local
  // bytes of the outer (source or target) layout, and the plan inside the mesh when it has steps
  auto side = [&](std::int64_t r, const Layout& outer, const Plan& part, const Layout& mid, Communicator* comm,
                  std::int64_t& bytes, std::optional<Executor>& ex, std::int64_t& ws, std::int64_t& mid_bytes) {
    std::vector<IndexSet> sets;
    if (r < 0) return sets;
    const auto c = outer.mesh().coord_of_rank(r);
    bytes = outer.local_numel(c) * s;
    sets = mid.indices(c);
    if (!part.steps.empty()) {
      ex.emplace(part, *comm, inner);
      ws = ex->workspace_bytes();
      mid_bytes = box_numel(sets) * s;
    }
    return sets;
  };
  const auto hold = side(ra, plan.src, plan.pre, plan.pre.dst, on_src, I.input_bytes, I.pre, I.pre_ws, I.mid_a_bytes);
  const auto need = side(rb, plan.dst, plan.post, plan.post.src, on_dst, I.output_bytes, I.post, I.post_ws, I.mid_b_bytes);
  std::int64_t at = 0;
  if (I.pre) I.mid_a_off = std::exchange(at, at + I.mid_a_bytes);
  if (I.post) I.mid_b_off = std::exchange(at, at + I.mid_b_bytes);
  I.scratch_off = at;
  // the transfer, lowered for this rank
  std::int64_t send_off = 0;
  std::vector<std::pair<std::int64_t, std::vector<IndexSet>>> incoming;
  for (const auto& m : plan.messages) {
    const auto wa = plan.world_rank_of_src(m.from), wb = plan.world_rank_of_dst(m.to);
    if (wa != wb) I.exchanges = true;
    if (wa == w && wb == w) {
      add_box_copies(I.unpack, Ref{Buf::output, 0}, need, Ref{Buf::input, 0}, hold, message_box(plan, m), s);
    } else if (wa == w) {
      const auto box = message_box(plan, m);
      const auto n = box_numel(box);
      if (const auto in_place = run_in_place(Ref{Buf::input, 0}, hold, box, s, true)) {
        I.sends.push_back({wb, *in_place, n});
      } else {
        add_box_copies(I.pack, Ref{Buf::ws, send_off * s}, box, Ref{Buf::input, 0}, hold, box, s);
        I.sends.push_back({wb, Ref{Buf::ws, send_off * s}, n});
        send_off += n;
      }
    } else if (wb == w) {
      incoming.emplace_back(wa, message_box(plan, m));
    }
  }
  std::int64_t recv_off = send_off;
  for (auto& [peer, box] : incoming) {
    const auto n = box_numel(box);
    if (const auto in_place = run_in_place(Ref{Buf::output, 0}, need, box, s, false)) {
      I.recvs.push_back({peer, *in_place, n});
      continue;
    }
    I.recvs.push_back({peer, Ref{Buf::ws, recv_off * s}, n});
    add_box_copies(I.unpack, Ref{Buf::output, 0}, need, Ref{Buf::ws, recv_off * s}, box, box, s);
    recv_off += n;
  }
  I.staging = recv_off * s;
  I.workspace = I.scratch_off + std::max({I.pre_ws, I.post_ws, I.staging});
  I.send_list.reserve(I.sends.size());
  I.recv_list.reserve(I.recvs.size());
  if (options.check_plans_agree || options.check_plans_every_call) check_plans_agree(world, plan.hash());
}

CrossMeshExecutor::~CrossMeshExecutor() = default;
CrossMeshExecutor::CrossMeshExecutor(CrossMeshExecutor&&) noexcept = default;
CrossMeshExecutor& CrossMeshExecutor::operator=(CrossMeshExecutor&&) noexcept = default;
std::int64_t CrossMeshExecutor::input_bytes() const noexcept { return impl_->input_bytes; }
std::int64_t CrossMeshExecutor::output_bytes() const noexcept { return impl_->output_bytes; }
std::int64_t CrossMeshExecutor::workspace_bytes() const noexcept { return impl_->workspace; }

void CrossMeshExecutor::execute(const Buffers& b) const {
  const Impl& I = *impl_;
  const auto w = I.world->rank();
  if (static_cast<std::int64_t>(b.input.size()) != I.input_bytes)
    throw InputError(fmt::format("world rank {}: input buffer has {} bytes, the source layout needs {}", w, b.input.size(),
                                 I.input_bytes));
  if (static_cast<std::int64_t>(b.output.size()) != I.output_bytes)
    throw InputError(fmt::format("world rank {}: output buffer has {} bytes, the target layout needs {}", w,
                                 b.output.size(), I.output_bytes));
  if (static_cast<std::int64_t>(b.workspace.size()) < I.workspace)
    throw InputError(fmt::format("world rank {}: workspace has {} bytes, the plan needs {}", w, b.workspace.size(),
                                 I.workspace));
  const Buffers v = I.transfer_view(b);
  const auto scratch = b.workspace.subspan(static_cast<std::size_t>(I.scratch_off));
  if (I.pre)
    I.pre->execute(Buffers{b.input,
                           b.workspace.subspan(static_cast<std::size_t>(I.mid_a_off), static_cast<std::size_t>(I.mid_a_bytes)),
                           scratch.first(static_cast<std::size_t>(I.pre_ws))});
  run_actions(*I.world, I.dtype, v, I.pack);
  if (I.exchanges) run_send_recv(*I.world, I.dtype, v, I.sends, I.recvs, I.send_list, I.recv_list);
  run_actions(*I.world, I.dtype, v, I.unpack);
  if (I.post) I.post->execute(Buffers{v.output, b.output, scratch.first(static_cast<std::size_t>(I.post_ws))});
}

}  // namespace dtensor

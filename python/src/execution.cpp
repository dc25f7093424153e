// Bindings of execution through a Python communicator (dtensor.torch).
#include <algorithm>

#include <fmt/format.h>

#include "bindings.hpp"
#include "dtensor/ragged_executor.hpp"

namespace dtensor::python {
namespace {

// The buffers of the call running (dtensor.torch sets them before each execute, in the order it
// keeps their byte views): an address the executor hands over becomes (buffer index, offset),
// what the Python side indexes its views with (no search there).
class BufferTable {
 public:
  void set(const std::vector<std::pair<std::uintptr_t, std::int64_t>>& buffers) {
    std::vector<Region> regions;
    regions.reserve(buffers.size());
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      const auto [base, bytes] = buffers[i];
      if (bytes <= 0 || base == 0)
        throw InputError(fmt::format("buffer {}: {} bytes at {:#x} (the call's buffers are non-empty tensors)", i, bytes, base));
      regions.push_back({base, static_cast<std::uintptr_t>(bytes), static_cast<std::int64_t>(i)});
    }
    std::sort(regions.begin(), regions.end(), [](const Region& a, const Region& b) { return a.base < b.base; });
    regions_ = std::move(regions);
  }
  // The buffer holding [p, p + bytes) and p's offset in it; (-1, 0) for no bytes (nothing to view).
  [[nodiscard]] std::pair<std::int64_t, std::int64_t> at(const void* p, std::int64_t bytes) const {
    if (bytes == 0) return {-1, 0};
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    auto it = std::upper_bound(regions_.begin(), regions_.end(), a, [](std::uintptr_t x, const Region& r) { return x < r.base; });
    if (bytes > 0 && it != regions_.begin()) {
      --it;
      const std::uintptr_t off = a - it->base, n = static_cast<std::uintptr_t>(bytes);
      if (off <= it->bytes && n <= it->bytes - off) return {it->index, static_cast<std::int64_t>(off)};
    }
    throw BackendError(fmt::format("dtensor.torch: address {:#x} (+{} bytes) is in none of the call's buffers", a, bytes));
  }

 private:
  struct Region {
    std::uintptr_t base, bytes;
    std::int64_t index;
  };
  std::vector<Region> regions_;
};

// A Communicator whose collectives are Python calls (dtensor.torch runs them as torch.distributed
// collectives). Buffers travel as (buffer index, offset) into the buffers the Python side set for
// the call (BufferTable). Local copies run here on host memory when `host` is true (CPU tensors),
// else through Python too (device tensors).
class PyCommunicator final : public Communicator {
 public:
  PyCommunicator(Mesh mesh, std::int64_t rank, nb::object impl, bool host)
      : mesh_(std::move(mesh)), rank_(rank), impl_(std::move(impl)), host_(host) {
    if (rank_ < 0 || rank_ >= mesh_.num_ranks())
      throw InputError("rank " + std::to_string(rank_) + " is not on mesh " + mesh_.str());
  }
  ~PyCommunicator() override {
    nb::gil_scoped_acquire gil;
    impl_.reset();
  }
  [[nodiscard]] const Mesh& mesh() const override { return mesh_; }
  [[nodiscard]] std::int64_t rank() const override { return rank_; }
  [[nodiscard]] bool supports(Collective c, DType dtype, ReduceOp op) const override {
    nb::gil_scoped_acquire gil;
    return nb::cast<bool>(impl_.attr("supports")(to_string(c), to_string(dtype), to_string(op)));
  }
  [[nodiscard]] std::vector<std::uint64_t> exchange(std::uint64_t value) override {
    nb::gil_scoped_acquire gil;
    // as a signed 64-bit value (torch has no uint64 collectives); the bits are kept
    const auto out = nb::cast<std::vector<std::int64_t>>(impl_.attr("exchange")(static_cast<std::int64_t>(value)));
    if (static_cast<std::int64_t>(out.size()) != mesh_.num_ranks())
      throw BackendError("exchange: " + std::to_string(out.size()) + " values for " +
                         std::to_string(mesh_.num_ranks()) + " ranks");
    return {out.begin(), out.end()};
  }
  // Each group with its members (this rank's group over the mesh dims, as mesh ranks in member
  // order: src/comm/groups.hpp, the one rule every backend follows).
  void prepare(std::span<const Group> groups) override {
    std::vector<std::pair<std::vector<int>, std::vector<std::int64_t>>> list;
    const auto coord = mesh_.coord_of_rank(rank_);
    for (const Group& g : groups) {
      std::vector<std::int64_t> members;
      for (const auto& c : detail::group_members(mesh_, coord, g.mesh_dims)) members.push_back(mesh_.rank_at(c));
      list.emplace_back(g.mesh_dims, std::move(members));
    }
    nb::gil_scoped_acquire gil;
    impl_.attr("prepare")(list);
  }
  void all_gather(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype) override {
    nb::gil_scoped_acquire gil;
    const std::int64_t b = count * static_cast<std::int64_t>(itemsize(dtype));
    impl_.attr("all_gather")(g.mesh_dims, buffers_.at(send, b), buffers_.at(recv, b * group_size(g)), count, to_string(dtype));
  }
  void reduce_scatter(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype,
                      ReduceOp op) override {
    nb::gil_scoped_acquire gil;
    const std::int64_t b = count * static_cast<std::int64_t>(itemsize(dtype));
    impl_.attr("reduce_scatter")(g.mesh_dims, buffers_.at(send, b * group_size(g)), buffers_.at(recv, b), count, to_string(dtype),
                                 to_string(op));
  }
  void all_reduce(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype,
                  ReduceOp op) override {
    nb::gil_scoped_acquire gil;
    const std::int64_t b = count * static_cast<std::int64_t>(itemsize(dtype));
    impl_.attr("all_reduce")(g.mesh_dims, buffers_.at(send, b), buffers_.at(recv, b), count, to_string(dtype), to_string(op));
  }
  void all_to_all(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype) override {
    nb::gil_scoped_acquire gil;
    const std::int64_t b = count * static_cast<std::int64_t>(itemsize(dtype)) * group_size(g);
    impl_.attr("all_to_all")(g.mesh_dims, buffers_.at(send, b), buffers_.at(recv, b), count, to_string(dtype));
  }
  void send_recv(std::span<const Transfer> sends, std::span<const Transfer> recvs, DType dtype) override {
    nb::gil_scoped_acquire gil;
    const auto s = static_cast<std::int64_t>(itemsize(dtype));
    auto list = [&](std::span<const Transfer> ts) {
      std::vector<std::tuple<std::int64_t, std::pair<std::int64_t, std::int64_t>, std::int64_t>> out;
      for (const auto& t : ts) out.emplace_back(t.peer, buffers_.at(t.buffer, t.count * s), t.count);
      return out;
    };
    impl_.attr("send_recv")(list(sends), list(recvs), to_string(dtype));
  }
  void synchronize() override {
    nb::gil_scoped_acquire gil;
    impl_.attr("synchronize")();
  }
  // CPU tensors: host memory; device tensors: the Python side's copies (torch ops on its stream).
  Memory& memory() override { return host_ ? host_memory() : device_; }
  // The call's buffers as (address, bytes), in the order of the Python side's views.
  void set_buffers(const std::vector<std::pair<std::uintptr_t, std::int64_t>>& buffers) { buffers_.set(buffers); }

 private:
  [[nodiscard]] std::int64_t group_size(const Group& g) const noexcept {
    std::int64_t n = 1;
    for (int m : g.mesh_dims) n *= mesh_.size(m);
    return n;
  }
  BufferTable buffers_;
  Mesh mesh_;
  std::int64_t rank_;
  nb::object impl_;
  bool host_;
  // The executor's local operations as Python calls; storage and reductions are torch's.
  class PyMemory final : public Memory {
   public:
    PyMemory(const nb::object& impl, const BufferTable& buffers) : impl_(impl), buffers_(buffers) {}
    void* allocate(std::size_t) override { throw InputError("dtensor.torch allocates its buffers as torch tensors"); }
    void release(void*) noexcept override {}
    void upload(void*, const void*, std::size_t) override { throw InputError("dtensor.torch moves data with torch"); }
    void download(void*, const void*, std::size_t) override { throw InputError("dtensor.torch moves data with torch"); }
    void wait() override {}
    bool supports(Collective c, DType, ReduceOp) const override { return !reduces(c); }
    void reduce(DType, ReduceOp, void*, std::span<const void* const>, std::int64_t) override {
      throw InputError("dtensor.torch reduces through torch.distributed collectives, not locally");
    }
    void copy(void* dst, const void* src, std::int64_t bytes) override {
      nb::gil_scoped_acquire gil;
      impl_.attr("copy")(buffers_.at(dst, bytes), buffers_.at(src, bytes), bytes);
    }
    void fill(void* dst, DType dtype, std::int64_t count, double value) override {
      nb::gil_scoped_acquire gil;
      impl_.attr("fill")(buffers_.at(dst, count * static_cast<std::int64_t>(itemsize(dtype))), to_string(dtype), count, value);
    }
    void copy_strided(void* dst, const void* src, std::int64_t run_bytes, std::span<const std::int64_t> count,
                      std::span<const std::int64_t> dst_stride, std::span<const std::int64_t> src_stride) override {
      // (nothing to copy: nothing to locate; otherwise each side's first run is in its buffer, and
      // the Python side checks the whole extent against it)
      if (run_bytes == 0 || std::find(count.begin(), count.end(), 0) != count.end()) return;
      nb::gil_scoped_acquire gil;
      using V = std::vector<std::int64_t>;
      impl_.attr("copy_strided")(buffers_.at(dst, run_bytes), buffers_.at(src, run_bytes), run_bytes, V(count.begin(), count.end()),
                                 V(dst_stride.begin(), dst_stride.end()), V(src_stride.begin(), src_stride.end()));
    }

   private:
    const nb::object& impl_;
    const BufferTable& buffers_;
  };
  PyMemory device_{impl_, buffers_};
};

std::span<std::byte> span_at(std::uintptr_t address, std::int64_t bytes, const char* what) {
  if (bytes < 0) throw InputError(std::string(what) + ": negative size " + std::to_string(bytes));
  if (bytes > 0 && address == 0) throw InputError(std::string(what) + ": null address for " + std::to_string(bytes) + " bytes");
  return {reinterpret_cast<std::byte*>(address), static_cast<std::size_t>(bytes)};
}

// The sizes and execute() every executor class shares (one rank's input, output and workspace as
// (address, bytes) pairs).
template <class E>
void def_buffers_and_execute(nb::class_<E>& c) {
  c.def_prop_ro("workspace_bytes", &E::workspace_bytes)
      .def_prop_ro("input_bytes", &E::input_bytes)
      .def_prop_ro("output_bytes", &E::output_bytes)
      .def(
          "execute",
          [](const E& e, std::uintptr_t in, std::int64_t in_bytes, std::uintptr_t out, std::int64_t out_bytes,
             std::uintptr_t ws, std::int64_t ws_bytes) {
            const Buffers b{span_at(in, in_bytes, "input"), span_at(out, out_bytes, "output"),
                            span_at(ws, ws_bytes, "workspace")};
            nb::gil_scoped_release release;
            e.execute(b);
          },
          "input"_a, "input_bytes"_a, "output"_a, "output_bytes"_a, "workspace"_a, "workspace_bytes"_a);
}

}  // namespace

void bind_execution(nb::module_& m) {
  // ---- execution through a Python communicator (dtensor.torch) ----
  nb::class_<PyCommunicator>(m, "_PyCommunicator")
      .def(nb::init<Mesh, std::int64_t, nb::object, bool>(), "mesh"_a, "rank"_a, "impl"_a, "host"_a)
      .def_prop_ro("rank", &PyCommunicator::rank)
      .def("_set_buffers", &PyCommunicator::set_buffers, "buffers"_a,
           "The call's buffers as (address, bytes) pairs, in the order the Python side indexes them")
      .def(
          "check_plans_agree",
          [](PyCommunicator& c, std::uint64_t plan_hash) {
            nb::gil_scoped_release release;
            check_plans_agree(c, plan_hash);
          },
          "plan_hash"_a, "Exchanges plan hashes over the mesh; BackendError naming the ranks whose plan differs");
  nb::class_<Executor> executor(m, "_Executor");
  executor
      .def(
          "__init__",
          [](Executor* self, const Plan& plan, PyCommunicator& comm, bool check, bool every_call) {
            nb::gil_scoped_release release;
            new (self) Executor(plan, comm,
                                ExecutorOptions{.check_plans_agree = check, .max_workspace_bytes = {},
                                                .check_plans_every_call = every_call});
          },
          "plan"_a, "comm"_a, "check_plans_agree"_a = true, "check_plans_every_call"_a = false, nb::keep_alive<1, 3>())
      .def_prop_ro("collectives", &Executor::collectives, "Collectives this rank issues per execute()")
      .def_prop_ro("ends_with_collective", &Executor::ends_with_collective,
                   "Whether execute() ends with a collective (no local copy after it)");
  def_buffers_and_execute(executor);

  nb::class_<RaggedExecutor> ragged(m, "_RaggedExecutor");
  ragged
      .def(
          "__init__",
          [](RaggedExecutor* self, const RaggedPlan& plan, PyCommunicator& comm, bool check) {
            nb::gil_scoped_release release;
            new (self) RaggedExecutor(plan, comm, ExecutorOptions{.check_plans_agree = check});
          },
          "plan"_a, "comm"_a, "check_plans_agree"_a = true, nb::keep_alive<1, 3>())
      .def_prop_ro("collectives", &RaggedExecutor::collectives)
      .def_prop_ro("ends_with_collective", [](const RaggedExecutor&) { return false; });
  def_buffers_and_execute(ragged);

  nb::class_<BatchExecutor>(m, "_BatchExecutor")
      .def(
          "__init__",
          [](BatchExecutor* self, const BatchPlan& batch, PyCommunicator& comm) {
            nb::gil_scoped_release release;
            new (self) BatchExecutor(batch, comm);
          },
          "batch"_a, "comm"_a, nb::keep_alive<1, 3>())
      .def_prop_ro("staging_bytes", &BatchExecutor::staging_bytes)
      .def("__len__", &BatchExecutor::size)
      .def("workspace_bytes", [](const BatchExecutor& e, std::size_t i) { return e.executor(i).workspace_bytes(); }, "tensor"_a)
      .def("input_bytes", [](const BatchExecutor& e, std::size_t i) { return e.executor(i).input_bytes(); }, "tensor"_a)
      .def("output_bytes", [](const BatchExecutor& e, std::size_t i) { return e.executor(i).output_bytes(); }, "tensor"_a)
      .def(
          "execute",
          [](const BatchExecutor& e,
             const std::vector<std::tuple<std::uintptr_t, std::int64_t, std::uintptr_t, std::int64_t, std::uintptr_t, std::int64_t>>& bufs,
             std::uintptr_t staging, std::int64_t staging_bytes) {
            if (bufs.size() != e.size())
              throw InputError(fmt::format("{} buffer sets for a batch of {} tensors", bufs.size(), e.size()));
            std::vector<Buffers> b;
            for (const auto& [in, ib, out, ob, ws, wb] : bufs)
              b.push_back({span_at(in, ib, "input"), span_at(out, ob, "output"), span_at(ws, wb, "workspace")});
            const auto st = span_at(staging, staging_bytes, "staging");
            nb::gil_scoped_release release;
            e.execute(b, st);
          },
          "buffers"_a, "staging"_a, "staging_bytes"_a);

  nb::class_<CrossMeshExecutor> cross(m, "_CrossMeshExecutor");
  cross
      .def(
          "__init__",
          [](CrossMeshExecutor* self, const CrossMeshPlan& plan, PyCommunicator& world, PyCommunicator* on_src,
             PyCommunicator* on_dst) {
            nb::gil_scoped_release release;
            new (self) CrossMeshExecutor(plan, world, on_src, on_dst);
          },
          "plan"_a, "world"_a, "on_src"_a.none(), "on_dst"_a.none(), nb::keep_alive<1, 3>(), nb::keep_alive<1, 4>(),
          nb::keep_alive<1, 5>());
  def_buffers_and_execute(cross);
}

}  // namespace dtensor::python

#pragma once
// The Communicator whose collectives are Python calls (dtensor.torch's _TorchComm), shared by the
// execution bindings (execution.cpp) and tune's torch entry points (tune.cpp).
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "bindings.hpp"

namespace dtensor::python {

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
  // A buffer made for the C++ side (PyCommunicator::own_buffers), kept until removed.
  void add(std::uintptr_t base, std::int64_t bytes, std::int64_t index) {
    const Region r{base, static_cast<std::uintptr_t>(bytes), index};
    regions_.insert(std::upper_bound(regions_.begin(), regions_.end(), r, [](const Region& x, const Region& y) { return x.base < y.base; }), r);
  }
  // The index of the buffer at `base`, which is removed.
  std::int64_t remove(std::uintptr_t base) {
    for (auto it = regions_.begin(); it != regions_.end(); ++it)
      if (it->base == base) {
        const auto index = it->index;
        regions_.erase(it);
        return index;
      }
    throw BackendError(fmt::format("dtensor.torch: no buffer at {:#x} to release", base));
  }
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
  // order: src/placement/groups.hpp, the one rule every backend follows).
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
  // With own_buffers(): buffers the C++ side allocates as torch tensors (tune's measure and
  // validate, which allocate their own).
  Memory& memory() override {
    if (owned_) return owned_memory_;
    return host_ ? host_memory() : device_;
  }
  // From now on memory() allocates through the Python side (`allocate`, `release`, `upload`,
  // `download`, `wait` of the impl), each buffer a torch tensor located by the buffer table.
  void own_buffers() { owned_ = true; }
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
  // Buffers as torch tensors the Python side allocates for the C++ side; host tensors are used
  // through their addresses (host memory's operations), device tensors through PyMemory.
  class OwnedMemory final : public Memory {
   public:
    OwnedMemory(PyCommunicator& c) : c_(c) {}
    void* allocate(std::size_t bytes) override {
      if (bytes == 0) return nullptr;
      nb::gil_scoped_acquire gil;
      const auto [index, address] =
          nb::cast<std::pair<std::int64_t, std::uintptr_t>>(c_.impl_.attr("allocate")(static_cast<std::int64_t>(bytes)));
      c_.buffers_.add(address, static_cast<std::int64_t>(bytes), index);
      return reinterpret_cast<void*>(address);
    }
    void release(void* p) noexcept override {
      if (p == nullptr) return;
      try {
        nb::gil_scoped_acquire gil;
        c_.impl_.attr("release")(c_.buffers_.remove(reinterpret_cast<std::uintptr_t>(p)));
      } catch (...) {  // (release cannot fail; the tensor is freed with the impl)
      }
    }
    void upload(void* dst, const void* src, std::size_t bytes) override {
      if (c_.host_) return host_memory().upload(dst, src, bytes);
      if (bytes == 0) return;
      nb::gil_scoped_acquire gil;
      c_.impl_.attr("upload")(c_.buffers_.at(dst, static_cast<std::int64_t>(bytes)), reinterpret_cast<std::uintptr_t>(src),
                              static_cast<std::int64_t>(bytes));
    }
    void download(void* dst, const void* src, std::size_t bytes) override {
      if (c_.host_) return host_memory().download(dst, src, bytes);
      if (bytes == 0) return;
      nb::gil_scoped_acquire gil;
      // a host tensor holding the bytes, alive while they are copied out
      const nb::object t = c_.impl_.attr("download")(c_.buffers_.at(src, static_cast<std::int64_t>(bytes)), static_cast<std::int64_t>(bytes));
      std::memcpy(dst, reinterpret_cast<const void*>(nb::cast<std::uintptr_t>(t.attr("data_ptr")())), bytes);
    }
    void wait() override {
      if (c_.host_) return;
      nb::gil_scoped_acquire gil;
      c_.impl_.attr("wait")();
    }
    bool supports(Collective c, DType d, ReduceOp op) const override { return base().supports(c, d, op); }
    void copy(void* dst, const void* src, std::int64_t bytes) override { base().copy(dst, src, bytes); }
    void fill(void* dst, DType dtype, std::int64_t count, double value) override { base().fill(dst, dtype, count, value); }
    void copy_strided(void* dst, const void* src, std::int64_t run_bytes, std::span<const std::int64_t> count,
                      std::span<const std::int64_t> dst_stride, std::span<const std::int64_t> src_stride) override {
      base().copy_strided(dst, src, run_bytes, count, dst_stride, src_stride);
    }
    void reduce(DType dtype, ReduceOp op, void* out, std::span<const void* const> inputs, std::int64_t count) override {
      base().reduce(dtype, op, out, inputs, count);
    }

   private:
    [[nodiscard]] Memory& base() const { return c_.host_ ? host_memory() : c_.device_; }
    PyCommunicator& c_;
  };
  bool owned_ = false;
  OwnedMemory owned_memory_{*this};
};

}  // namespace dtensor::python

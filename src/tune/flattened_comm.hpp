#pragma once
// A communicator of a mesh whose dims flatten runs of consecutive dims of another communicator's
// mesh, over the same ranks in the same order (2x2x2 seen as 2x4 or 8): how `tune validate` runs a
// cross-mesh transfer between two shapes of one job's ranks on the one communicator it has. A
// group of the flat mesh is the group of the dims it flattens, members in the same row-major order.
#include <fmt/format.h>

#include "dtensor/comm.hpp"
#include "dtensor/error.hpp"

namespace dtensor::tune::detail {

class FlattenedCommunicator final : public Communicator {
 public:
  // Throws InputError unless `flat`'s dims are products of consecutive dims of base's mesh (in
  // order) with no explicit rank list of its own.
  FlattenedCommunicator(Communicator& base, Mesh flat)
      : base_(base), mesh_(std::move(flat)), dims_(flattened_dims(base.mesh(), mesh_)) {}
  // Per dim of `flat`, the dims of `base` it flattens; InputError when it flattens none.
  [[nodiscard]] static std::vector<std::vector<int>> flattened_dims(const Mesh& base, const Mesh& flat) {
    const auto refuse = [&] {
      return InputError(fmt::format("mesh {} does not flatten consecutive dims of mesh {}", flat.str(), base.str()));
    };
    if (flat.has_explicit_ranks() || base.has_explicit_ranks()) throw refuse();
    std::vector<std::vector<int>> out;
    int d = 0;
    for (int j = 0; j < flat.ndim(); ++j) {
      std::vector<int> run;
      std::int64_t n = 1;
      do {
        if (d >= base.ndim()) throw refuse();
        n *= base.size(d);
        run.push_back(d++);
      } while (n < flat.size(j));
      if (n != flat.size(j)) throw refuse();
      out.push_back(std::move(run));
    }
    if (d != base.ndim()) throw refuse();
    return out;
  }
  [[nodiscard]] static bool flattens(const Mesh& base, const Mesh& flat) {
    try {
      (void)flattened_dims(base, flat);
      return true;
    } catch (const InputError&) {
      return false;
    }
  }
  [[nodiscard]] const Mesh& mesh() const override { return mesh_; }
  [[nodiscard]] std::int64_t rank() const override { return base_.rank(); }
  [[nodiscard]] bool supports(Collective c, DType dtype, ReduceOp op) const override { return base_.supports(c, dtype, op); }
  [[nodiscard]] std::vector<std::uint64_t> exchange(std::uint64_t value) override { return base_.exchange(value); }
  void prepare(std::span<const Group> groups) override {
    std::vector<Group> g;
    for (const auto& x : groups) g.push_back(of(x));
    base_.prepare(g);
  }
  void all_gather(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype) override {
    base_.all_gather(of(g), send, recv, count, dtype);
  }
  void reduce_scatter(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype, ReduceOp op) override {
    base_.reduce_scatter(of(g), send, recv, count, dtype, op);
  }
  void all_reduce(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype, ReduceOp op) override {
    base_.all_reduce(of(g), send, recv, count, dtype, op);
  }
  void all_to_all(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype) override {
    base_.all_to_all(of(g), send, recv, count, dtype);
  }
  void send_recv(std::span<const Transfer> sends, std::span<const Transfer> recvs, DType dtype) override {
    base_.send_recv(sends, recvs, dtype);
  }
  void synchronize() override { base_.synchronize(); }
  void group_begin() override { base_.group_begin(); }
  void group_end() override { base_.group_end(); }
  Memory& memory() override { return base_.memory(); }

 private:
  [[nodiscard]] Group of(const Group& g) const {
    Group out;
    for (int j : g.mesh_dims)
      for (int d : dims_.at(static_cast<std::size_t>(j))) out.mesh_dims.push_back(d);
    return out;
  }
  Communicator& base_;
  Mesh mesh_;
  std::vector<std::vector<int>> dims_;  // flat dim -> the base dims it flattens
};

}  // namespace dtensor::tune::detail

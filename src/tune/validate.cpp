// `dtensor tune validate`: predicted (the plan's cost) against measured time of real
// redistributions run through a communicator.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>

#include <fmt/format.h>

#include "dtensor/error.hpp"
#include "dtensor/executor.hpp"
#include "dtensor/planner.hpp"
#include "dtensor/verify.hpp"
#include "dtensor/tune.hpp"
#include "buffer.hpp"

namespace dtensor::tune {
namespace {

// Every mesh dim shards tensor dim `dim`, in ascending (or descending) mesh-dim order.
std::string all_shard(int k, int dim, bool reversed) {
  std::string s;
  for (int m = 0; m < k; ++m) {
    s += fmt::format("S({})", dim);
    if (k > 1) s += fmt::format("[{}]", reversed ? k - 1 - m : m);
  }
  return s;
}

}  // namespace

std::vector<ValidateCase> validate_cases(const Mesh& mesh, const std::vector<std::int64_t>& shape, DType dtype) {
  if (shape.size() < 2)
    throw InputError(fmt::format("validate needs a tensor of two or more dims (the transpose case), not {}",
                                 shape_str(shape)));
  const int k = mesh.ndim();
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> specs;
  std::string unshard_dst;
  for (int m = 0; m + 1 < k; ++m) unshard_dst += "R";
  unshard_dst += "S(0)";
  specs.push_back({"fsdp-tp unshard", {k == 1 ? "S(0)" : all_shard(k, 0, true), k == 1 ? "R" : unshard_dst}});
  if (k > 1) specs.push_back({"shard-order change", {all_shard(k, 0, false), all_shard(k, 0, true)}});
  std::string partial;
  for (int m = 0; m < k; ++m) partial += "P(sum)";
  specs.push_back({"partial -> shard", {partial, all_shard(k, 0, false)}});
  specs.push_back({"transpose", {all_shard(k, 0, false), all_shard(k, 1, false)}});
  std::vector<ValidateCase> out;
  for (const auto& [name, p] : specs)
    out.push_back({name, Layout::parse(mesh, shape, dtype, p.first), Layout::parse(mesh, shape, dtype, p.second)});
  return out;
}

std::vector<Validation> validate(Communicator& comm, const CostModel& model, std::span<const ValidateCase> cases,
                                 const ValidateOptions& o, const std::function<double()>& now_us) {
  if (o.iters < 1 || o.warmup < 0) throw InputError("validate needs at least one iteration and no negative warm-up");
  const std::int64_t rank = comm.rank();
  std::vector<Validation> out;
  for (const auto& c : cases) {
    if (!(c.src.mesh() == comm.mesh()))
      throw InputError(fmt::format("validate case {}: mesh {} is not the communicator's {}", c.name, c.src.mesh().str(),
                                   comm.mesh().str()));
    PlanOptions po;
    po.runner_up = false;
    const Plan plan = plan_redistribution(c.src, c.dst, model, po);
    Executor ex(plan, comm);
    detail::Buffer input(comm.memory(), static_cast<std::size_t>(ex.input_bytes()));
    detail::Buffer output(comm.memory(), static_cast<std::size_t>(ex.output_bytes()));
    detail::Buffer workspace(comm.memory(), static_cast<std::size_t>(ex.workspace_bytes()));
    input.upload(seeded_input(c.src, rank));
    const Buffers b{{input.data(), input.size()}, {output.data(), output.size()}, {workspace.data(), workspace.size()}};
    auto settle = [&] {
      comm.synchronize();
      comm.memory().wait();
    };
    for (int i = 0; i < o.warmup; ++i) ex.execute(b);
    if (o.warmup == 0) ex.execute(b);  // one run is needed to verify
    settle();
    const bool ok = verify_rank_output(c.dst, rank, output.download()).empty();
    (void)comm.exchange(0);  // every rank starts the timed runs together
    const double t0 = now_us();
    for (int i = 0; i < o.iters; ++i) ex.execute(b);
    settle();
    const double mine = (now_us() - t0) / o.iters;
    const auto times = comm.exchange(std::bit_cast<std::uint64_t>(mine));
    const auto oks = comm.exchange(ok ? 1 : 0);
    Validation v;
    v.name = c.name;
    v.trace = plan.trace();
    v.predicted_us = plan.total_cost_us;
    for (auto t : times) v.measured_us = std::max(v.measured_us, std::bit_cast<double>(t));
    v.verified = std::all_of(oks.begin(), oks.end(), [](std::uint64_t x) { return x == 1; });
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace dtensor::tune

// FSDP + TP parameter resharding with the C++ API.
//
// A 2-D training job on dp=2 x tp=4 keeps a linear layer's weight [out=1000, in=512] fully
// sharded for the optimizer (FSDP: dim 0 split over both mesh dims, tp outermost), and needs
// it column-parallel for the forward pass (replicated over dp, dim 1 split over tp). We plan
// the redistribution, explain it, and run it SPMD-style: one thread per rank, each with its own
// communicator of the in-process backend, its own Executor and caller-owned buffers; then verify
// every rank. 1000 rows do not divide by 8: uneven shards.
#include <cstdio>
#include <vector>

#include "dtensor/executor.hpp"
#include "dtensor/planner.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/verify.hpp"

using namespace dtensor;

int main() {
  const Mesh mesh = Mesh::parse("dp=2,tp=4");
  const std::vector<std::int64_t> shape{1000, 512};
  const Layout fsdp = Layout::parse(mesh, shape, DType::f32, "S(0)[1]S(0)[0]");
  const Layout tp = Layout::parse(mesh, shape, DType::f32, "RS(1)");

  const Plan plan = plan_redistribution(fsdp, tp, CostModel::default_model());
  std::printf("%s\n", explain(plan).c_str());

  SimulatedWorld world(mesh);
  std::vector<std::vector<std::byte>> out(static_cast<std::size_t>(mesh.num_ranks()));
  std::int64_t workspace = 0;
  run_rank_threads(world, [&](std::int64_t rank, Communicator& comm) {
    const Executor exec(plan, comm);  // every index set and copy of this rank is prepared here
    const std::vector<std::byte> in = seeded_input(fsdp, rank);  // element value = its global linear index
    std::vector<std::byte> ws(static_cast<std::size_t>(exec.workspace_bytes()));
    auto& mine = out[static_cast<std::size_t>(rank)];
    mine.resize(static_cast<std::size_t>(exec.output_bytes()));
    exec.execute({in, mine, ws});
    if (rank == 0) workspace = exec.workspace_bytes();
  });

  const std::string err = verify_outputs(tp, out);
  std::printf("workspace per rank: %lld bytes; result: %s\n", static_cast<long long>(workspace),
              err.empty() ? "verified" : err.c_str());
  return err.empty() ? 0 : 1;
}

// FSDP + TP parameter resharding with the C++ API.
//
// A 2-D training job on dp=2 x tp=4 keeps a linear layer's weight [out=1000, in=512] fully
// sharded for the optimizer (FSDP: dim 0 split over both mesh dims, tp outermost), and needs
// it column-parallel for the forward pass (replicated over dp, dim 1 split over tp). We plan
// the redistribution, explain it, run it on the simulated mesh through the executor with
// caller-owned buffers, and verify every rank. 1000 rows do not divide by 8: uneven shards.
#include <cstdio>
#include <vector>

#include "dtensor/executor.hpp"
#include "dtensor/planner.hpp"
#include "dtensor/simulated.hpp"

using namespace dtensor;

int main() {
  const Mesh mesh = Mesh::parse("dp=2,tp=4");
  const std::vector<std::int64_t> shape{1000, 512};
  const Layout fsdp = Layout::parse(mesh, shape, DType::f32, "S(0)[1]S(0)[0]");
  const Layout tp = Layout::parse(mesh, shape, DType::f32, "RS(1)");

  const Plan plan = plan_redistribution(fsdp, tp, CostModel::default_model());
  std::printf("%s\n", explain(plan, CostModel::default_model()).c_str());

  SimulatedCommunicator comm(mesh);
  const Executor exec(plan, comm);  // every index set and copy is prepared here
  std::vector<std::vector<std::byte>> in, out, ws;
  std::vector<RankBuffers> bufs;
  for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) {
    in.push_back(seeded_input(fsdp, r));  // element value = its global linear index
    out.emplace_back(static_cast<std::size_t>(exec.output_bytes(r)));
    ws.emplace_back(static_cast<std::size_t>(exec.workspace_bytes()));
  }
  for (std::int64_t r = 0; r < mesh.num_ranks(); ++r)
    bufs.push_back({r, in[static_cast<std::size_t>(r)], out[static_cast<std::size_t>(r)], ws[static_cast<std::size_t>(r)]});
  exec.execute(comm, bufs);

  const std::string err = verify_outputs(tp, out);
  std::printf("workspace per rank: %lld bytes; result: %s\n", static_cast<long long>(exec.workspace_bytes()),
              err.empty() ? "verified" : err.c_str());
  return err.empty() ? 0 : 1;
}

#include "dtensor/comm.hpp"

#include <algorithm>
#include <map>

#include "dtensor/error.hpp"

namespace dtensor {

std::vector<std::uint64_t> Communicator::exchange(std::uint64_t value) {
  const Mesh& m = mesh();
  Group world;
  for (int d = 0; d < m.ndim(); ++d) world.mesh_dims.push_back(d);
  std::vector<std::uint64_t> by_position(static_cast<std::size_t>(m.num_ranks()));
  all_gather(world, &value, by_position.data(), 1, DType::i64);
  synchronize();
  // world-group members are in row-major coordinate order; report by global rank
  std::vector<std::uint64_t> by_rank(by_position.size());
  for (std::int64_t p = 0; p < m.num_ranks(); ++p)
    by_rank[static_cast<std::size_t>(m.rank_at(m.coord_at(p)))] = by_position[static_cast<std::size_t>(p)];
  return by_rank;
}

std::string describe(const Mesh& mesh, const Group& g) {
  if (g.mesh_dims.empty()) return "the world";
  std::string s = g.mesh_dims.size() == 1 ? "mesh dim " : "mesh dims ";
  for (std::size_t i = 0; i < g.mesh_dims.size(); ++i) s += (i ? " + " : "") + mesh.describe_dim(g.mesh_dims[i]);
  return s;
}

void check_plans_agree(Communicator& comm, std::uint64_t plan_hash) {
  std::vector<std::uint64_t> hashes;
  try {
    hashes = comm.exchange(plan_hash);
  } catch (const BackendError& e) {  // the backend names the exchange; this says what it was for
    throw BackendError(fmt::format("the plan-hash check on rank {}: {}", comm.rank(), e.what()));
  }
  std::map<std::uint64_t, std::vector<std::int64_t>> by_hash;
  for (std::size_t r = 0; r < hashes.size(); ++r) by_hash[hashes[r]].push_back(static_cast<std::int64_t>(r));
  if (by_hash.size() <= 1) return;
  std::string detail;
  for (const auto& [h, ranks] : by_hash) detail += fmt::format("{}{} {} {} plan {:016x}", detail.empty() ? "" : "; ", ranks.size() == 1 ? "rank" : "ranks",
                          rank_list(ranks), ranks.size() == 1 ? "has" : "have", h);
  const auto mine = hashes.empty() ? plan_hash : hashes[static_cast<std::size_t>(comm.rank())];
  throw BackendError(fmt::format("the ranks were given different plans (this is rank {}, plan {:016x}): {}; every "
                                 "rank must plan the same redistribution with the same cost model and options",
                                 comm.rank(), mine, detail));
}

}  // namespace dtensor

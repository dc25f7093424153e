// The redistribution graph for tools and tests (explore.hpp): its edges out of any state, and the
// explored part of it (for pictures): Dijkstra from the source over every edge, bounded by a cost
// and a number of states; ties broken by the state's text, so the result is deterministic.
#include <map>
#include <memory>
#include <queue>

#include "dtensor/explore.hpp"
#include "edges.hpp"

namespace dtensor {

RedistributionGraph::RedistributionGraph(const Layout& src, const Layout& dst, const CostModel& cost, EdgeSet edges)
    : cost_(std::make_unique<const CostModel>(cost)), ctx_(std::make_unique<GraphContext>(src, dst, *cost_, edges)) {}
RedistributionGraph::~RedistributionGraph() = default;
std::vector<GraphEdge> RedistributionGraph::edges(const Sharding& from, bool records) const {
  std::vector<Edge> raw;
  enumerate_edges(*ctx_, from, raw, records);
  std::vector<GraphEdge> out;
  for (auto& e : raw) {
    if (!records) {  // the light records still name their dims
      if (e.kind == StepKind::direct) {
        e.step = make_step(*ctx_, e.kind, {}, from, e.to, true);
      } else {
        e.step.mesh_dims = e.group.vec();
        for (int d = 0; d < from.tensor_ndim(); ++d)
          if (from.entries(d) != e.to.entries(d)) e.step.tensor_dims.push_back(d);
      }
    }
    out.push_back({std::move(e.to), std::move(e.step)});
  }
  return out;
}
const Sharding& RedistributionGraph::source() const { return ctx_->src; }
const Sharding& RedistributionGraph::target() const { return ctx_->dst; }


ExploredGraph explore(const Layout& src, const Layout& dst, const CostModel& cost, EdgeSet edges, double max_cost_us,
                      std::size_t max_states) {
  const RedistributionGraph g(src, dst, cost, edges);
  ExploredGraph out;
  std::map<std::string, std::size_t> node_of;
  std::vector<double> best;  // tentative cost per node
  std::vector<char> done;
  auto node = [&](const Sharding& s) {
    auto [it, fresh] = node_of.try_emplace(s.str(), out.nodes.size());
    if (fresh) {
      out.nodes.push_back({s, 0});
      best.push_back(std::numeric_limits<double>::infinity());
      done.push_back(0);
    }
    return it->second;
  };
  const double limit = max_cost_us * (1 + 1e-9) + 1e-9;
  using Item = std::tuple<double, std::string, std::size_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> pq;
  const std::size_t s0 = node(g.source());
  best[s0] = 0;
  pq.push({0.0, g.source().str(), s0});
  std::size_t settled = 0;
  while (!pq.empty() && settled < max_states) {
    const auto [d, key, u] = pq.top();
    pq.pop();
    if (done[u]) continue;
    done[u] = 1;
    out.nodes[u].cost_us = d;
    ++settled;
    const Sharding from = out.nodes[u].state;
    for (const auto& e : g.edges(from, false)) {
      const double nd = d + e.step.cost_us;
      if (nd > limit) continue;
      const std::size_t v = node(e.to);
      out.arcs.push_back({u, v, e.step.kind, e.step.mesh_dims, e.step.cost_us});
      if (nd < best[v]) {
        best[v] = nd;
        pq.push({nd, e.to.str(), v});
      }
    }
  }
  // nodes reached but never settled keep their tentative cost; drop those beyond the bound
  for (std::size_t k = 0; k < out.nodes.size(); ++k)
    if (!done[k]) out.nodes[k].cost_us = best[k];
  return out;
}

}  // namespace dtensor

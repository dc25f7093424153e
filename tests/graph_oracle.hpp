#pragma once
// The whole redistribution graph for the optimality and bound tests: every layout of small
// meshes, the closure of the graph's edges from them, and Bellman-Ford distances to a target
// (written here, independent of the planner's search).
#include <cmath>
#include <cstddef>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dtensor/layout.hpp"
#include "oracle.hpp"

namespace graph_oracle {

// Every layout from {R, P(sum), P(max), S(d)} with every shard order, valid ones only.
inline std::vector<dtensor::Sharding> all_layouts(const dtensor::Mesh& mesh, int tensor_ndim) {
  std::vector<oracle::Pl> options{{'R'}, {'P'}, {'M'}};
  for (int d = 0; d < tensor_ndim; ++d) options.push_back({'S', d, 1});
  std::vector<dtensor::Sharding> out;
  for (const auto& pls : oracle::layouts(mesh.ndim(), tensor_ndim, options))
    out.push_back(dtensor::Sharding::parse(oracle::text(pls), mesh.ndim(), tensor_ndim));
  return out;
}

struct Graph {
  std::vector<dtensor::Sharding> states;
  std::unordered_map<dtensor::Sharding, std::size_t> id;
  struct E {
    std::size_t u, v;
    double w;
  };
  std::vector<E> edges;
  std::size_t add(const dtensor::Sharding& s) {
    auto [it, ins] = id.try_emplace(s, states.size());
    if (ins) states.push_back(s);
    return it->second;
  }
};

// Breadth-first closure from `starts`; edges_of(state) returns (next state, cost) pairs.
template <class EdgesOf>
Graph closure(const std::vector<dtensor::Sharding>& starts, EdgesOf&& edges_of) {
  Graph G;
  for (const auto& s : starts) G.add(s);
  for (std::size_t u = 0; u < G.states.size(); ++u) {
    const dtensor::Sharding from = G.states[u];
    for (const auto& [to, w] : edges_of(from)) G.edges.push_back({u, G.add(to), w});
  }
  return G;
}

// Bellman-Ford: distance from every state to `target`.
inline std::vector<double> distances_to(const Graph& G, std::size_t target) {
  std::vector<double> dist(G.states.size(), INFINITY);
  dist[target] = 0;
  for (std::size_t round = 0; round + 1 < G.states.size(); ++round) {
    bool changed = false;
    for (const auto& e : G.edges)
      if (dist[e.v] + e.w < dist[e.u]) {
        dist[e.u] = dist[e.v] + e.w;
        changed = true;
      }
    if (!changed) break;
  }
  return dist;
}

}  // namespace graph_oracle

#pragma once
// The cost formulas shared by the planner's steps, its bounds and `dtensor tune predict`.
#include "dtensor/cost_model.hpp"
#include "dtensor/plan.hpp"

namespace dtensor {

// PyTorch 2.15's cost of one collective over a group of n ranks on link L (latency, wire time),
// with bytes_gb the tensor's bytes over its shard count in GiB. The one place this formula
// lives: steps and the pytorch-model lower bound both call it.
struct AlphaWire {
  double alpha, wire;
};
inline AlphaWire pytorch_collective(const LinkParams& L, StepKind kind, double n, double bytes_gb) {
  const double hops = n - 1;
  switch (kind) {
    case StepKind::all_reduce:
      return {L.alpha_us + 2 * hops * L.alpha_per_peer_us, (2 * bytes_gb * hops / n) / L.bw_GBps * 1e6};
    case StepKind::all_gather:
      return {L.alpha_us + hops * L.alpha_per_peer_us, (bytes_gb * n * hops / n) / L.bw_GBps * 1e6};
    case StepKind::all_to_all:
      return {L.alpha_us + hops * L.alpha_per_peer_us + 1.0, (bytes_gb * hops / n) / L.bw_GBps * 1e6};
    default:  // reduce_scatter
      return {L.alpha_us + hops * L.alpha_per_peer_us, (bytes_gb * hops / n) / L.bw_GBps * 1e6};
  }
}


}  // namespace dtensor

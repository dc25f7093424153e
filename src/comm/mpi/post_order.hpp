// The order in which a rank posts a direct exchange's messages (MpiCommunicator::send_recv).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "dtensor/comm.hpp"

namespace dtensor::mpi_order {

// Fills `order` with the indices of `transfers` in shifted order, as MPI's linear all-to-all posts
// them: sends to rank+1, rank+2, ... (wrapping at `world`) first; receives (`receives`) from
// rank-1, rank-2, ... first. Ties keep the given order. Posting in the given (ascending) order
// instead would have every rank send to the lowest peer first and the highest receive last.
inline void shifted(std::span<const Transfer> transfers, std::int64_t rank, std::int64_t world, bool receives,
                    std::vector<std::size_t>& order) {
  const auto distance = [&](std::int64_t peer) {
    const std::int64_t ahead = ((peer - rank) % world + world) % world;
    return receives ? (world - ahead) % world : ahead;
  };
  order.clear();
  for (std::size_t i = 0; i < transfers.size(); ++i) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return distance(transfers[a].peer) < distance(transfers[b].peer); });
}

}  // namespace dtensor::mpi_order

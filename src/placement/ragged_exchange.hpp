#pragma once
// The transfers of one ragged exchange, for one rank: what the planner costs and the executor
// runs are the same list (ragged_exchange.cpp).
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "dtensor/ragged.hpp"

namespace dtensor::detail {

// Elements [lo, hi) of `box` in its row-major order move between this rank and `peer` (a send:
// from this rank's source piece; a receive: into its target piece). `box` is the overlap of the
// two ranks' base blocks.
struct ExchangePart {
  std::int64_t peer = 0;
  std::vector<IndexSet> box;
  std::int64_t lo = 0, hi = 0;
  [[nodiscard]] std::int64_t count() const noexcept { return hi - lo; }
};

// The most (sender, receiver) pairs an exchange visits (its planner's time and memory follow them).
inline constexpr std::int64_t kMaxExchangePairs = std::int64_t{1} << 24;
// The most ranks a ragged exchange is planned on.
inline constexpr std::int64_t kMaxExchangeRanks = std::int64_t{1} << 16;

// The source group of an exchange: the mesh dims that shard or cut `from` (ascending).
[[nodiscard]] std::vector<int> exchange_group_dims(const RaggedLayout& from);
// The index of the exchange group of the rank at `coord`: its coordinates on the mesh dims outside
// `dims` (exchange_group_dims), row-major. Two ranks exchange only within one group.
[[nodiscard]] std::int64_t exchange_group_index(const Mesh& mesh, std::span<const std::int64_t> coord,
                                                const std::vector<int>& dims);
// The part one sender gives one receiver, from the two ranks' blocks (base index sets) and pieces
// (count 0 when none).
[[nodiscard]] ExchangePart exchange_part(const std::vector<IndexSet>& src_block, Interval src_piece,
                                         const std::vector<IndexSet>& dst_block, Interval dst_piece);
// What the rank at `coord` sends (to each peer of its group, itself included) and receives, in
// group order; parts with no elements left out.
[[nodiscard]] std::vector<ExchangePart> exchange_sends(const RaggedLayout& from, const RaggedLayout& to,
                                                       const std::vector<std::int64_t>& coord);
[[nodiscard]] std::vector<ExchangePart> exchange_recvs(const RaggedLayout& from, const RaggedLayout& to,
                                                       const std::vector<std::int64_t>& coord);
// The (sender, receiver) rank pairs of an exchange whose parts may hold elements: the pairs of one
// group whose pieces share an element id, found by one sweep over every rank's owned runs (global
// row-major ids) in O(runs log runs + overlapping runs), per sender ascending. Every pair whose
// exchange_part has a count is among them (a pair that shares no element has none), so pricing
// only these gives the same figures as every pair of every group. Empty (nullopt) when the runs
// are too many to list (over 2^20 on a rank or 2^24 in all): the caller walks the groups.
[[nodiscard]] std::optional<std::vector<std::vector<std::int64_t>>> exchange_candidates(const RaggedLayout& from,
                                                                                        const RaggedLayout& to);
// Calls f(sender, receiver) for every pair that may hold elements, senders ascending: the sweep's
// candidates, or, when exchange_candidates gives none, every pair of each group (the walk).
void for_each_exchange_pair(const RaggedLayout& from, const RaggedLayout& to,
                            const std::function<void(std::int64_t, std::int64_t)>& f);
// Whether box positions [lo, hi) of `sub` are one contiguous run of `block` (row-major).
[[nodiscard]] bool contiguous_in(const std::vector<IndexSet>& sub, std::int64_t lo, std::int64_t hi,
                                 const std::vector<IndexSet>& block);

}  // namespace dtensor::detail

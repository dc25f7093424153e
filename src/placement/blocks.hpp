#pragma once
// The distinct blocks of a layout and the blocks a box meets (blocks.cpp). Ranks holding equal
// index sets on every tensor dim share one block (replicas). A Shard/StridedShard layout's index
// set on a tensor dim depends only on the coordinates of the mesh dims that shard that dim, so
// the blocks are products of per-dim sets, each found once from those coordinates: building costs
// O(ranks · dims) plus the distinct per-dim sets, never a set per rank; a box's blocks are found
// by range queries over each dim's sets (binary search where they are single, disjoint runs).
// Used where plans intersect layouts at scale: checkpoint loads and cross-mesh transfers.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "dtensor/index_set.hpp"
#include "dtensor/layout.hpp"

namespace dtensor::detail {

class LayoutBlocks {
 public:
  // Throws what Layout::indices throws (too many runs per rank).
  explicit LayoutBlocks(const Layout& l);

  // Distinct blocks, numbered in order of their lowest mesh rank.
  [[nodiscard]] std::size_t size() const noexcept { return first_member_.size() - 1; }
  [[nodiscard]] std::size_t tensor_ndim() const noexcept { return sets_.size(); }
  [[nodiscard]] std::int32_t block_of(std::int64_t rank) const noexcept { return block_of_rank_[static_cast<std::size_t>(rank)]; }
  // The block's mesh ranks, ascending.
  [[nodiscard]] std::span<const std::int64_t> members(std::size_t b) const noexcept {
    return {members_.data() + first_member_[b], members_.data() + first_member_[b + 1]};
  }
  // The block's indices along tensor dim d.
  [[nodiscard]] const IndexSet& set(std::size_t b, std::size_t d) const noexcept {
    return sets_[d][static_cast<std::size_t>(tuples_[b * sets_.size() + d])];
  }
  [[nodiscard]] std::vector<IndexSet> box(std::size_t b) const;
  [[nodiscard]] std::int64_t numel(std::size_t b) const noexcept;

  // A block a box meets: its elements in common and, on the first tensor dim where the common
  // part is longer than 1, that length (1 when none is): the rows a message of it may be split by.
  struct Meet {
    std::int32_t block = 0;
    std::int64_t elements = 0;
    std::int64_t rows = 1;
  };
  // Every block sharing an element with `box` (one index set per tensor dim), appended to `out`
  // ascending by block. O(log sets + sets met) per dim, plus O(dims) per block met (O(log blocks)
  // when the blocks are not a full product). `scratch` is reused between calls.
  struct Scratch {
    std::vector<std::vector<std::pair<std::int32_t, std::int64_t>>> meets;  // per dim: (set, overlap)
    std::vector<std::size_t> at;
    std::vector<std::int32_t> tuple;
  };
  void meeting(std::span<const IndexSet> box, std::vector<Meet>& out, Scratch& scratch) const;
  void meeting(std::span<const IndexSet> box, std::vector<Meet>& out) const {
    Scratch scratch;
    meeting(box, out, scratch);
  }
  // Whether every combination of per-dim sets is a block (every Shard/StridedShard layout).
  [[nodiscard]] bool full_product() const noexcept;
  // The most blocks of this layout that one non-empty block of `other` (same tensor shape) meets:
  // per tensor dim, the most of this layout's sets one of other's sets meets, multiplied. Exact
  // when both are full products; 0 otherwise (unknown). O(sets · log sets) per dim.
  [[nodiscard]] std::int64_t most_met_by(const LayoutBlocks& other) const;

 private:
  [[nodiscard]] std::int32_t find(std::span<const std::int32_t> tuple) const noexcept;
  // The range of dim d's sets that may meet q (every set unless they are single disjoint runs).
  [[nodiscard]] std::pair<std::size_t, std::size_t> candidates(std::size_t d, const IndexSet& q) const noexcept;

  std::vector<std::vector<IndexSet>> sets_;  // per tensor dim, its distinct sets by first index
  std::vector<char> sorted_runs_;            // per dim: every set one run, disjoint (binary search)
  std::vector<std::int32_t> tuples_;         // per block, its set ids per dim (block-major)
  std::vector<std::int32_t> by_tuple_;       // block ids in lexicographic order of their tuples
  bool full_ = false;                        // by_tuple_ is every tuple: a tuple's mixed-radix index finds its block
  std::vector<std::int32_t> block_of_rank_;
  std::vector<std::int64_t> members_, first_member_;
};

}  // namespace dtensor::detail

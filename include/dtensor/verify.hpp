#pragma once
// Verification against an independent oracle (verify.cpp): seeded inputs whose global tensor is
// known element by element, and checks of every rank's output against it.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dtensor/layout.hpp"
#include "dtensor/ragged.hpp"

namespace dtensor {

// The local input of `rank` for `layout` when the global tensor's element i holds its linear
// index i (reduced modulo what narrow dtypes hold exactly); Partial mesh dims are seeded so that
// their reduction gives that tensor back exactly. Raw bytes of the layout's dtype.
[[nodiscard]] std::vector<std::byte> seeded_input(const Layout& layout, std::int64_t rank);

// Checks every rank's local data of `layout` (outputs by global rank) against that global tensor,
// reducing Partial mesh dims over the ranks that share the other coordinates, and checks that
// together the ranks hold every element of the tensor the number of times the layout implies.
// Returns "" when right, else the first mismatch. `seeded_ranks`: the rank count the inputs were
// seeded with (narrow dtypes' values depend on it), when another mesh's (cross-mesh); 0: this one's.
[[nodiscard]] std::string verify_outputs(const Layout& layout, const std::vector<std::vector<std::byte>>& outputs,
                                         std::int64_t seeded_ranks = 0);
// The same check for one rank's output.
[[nodiscard]] std::string verify_rank_output(const Layout& layout, std::int64_t rank, std::span<const std::byte> output,
                                             std::int64_t seeded_ranks = 0);

// The same for a layout that may hold a RaggedShard: a rank's local elements are its piece of its
// base block (row-major); without one, exactly the Layout forms. Partial layouts are never ragged.
[[nodiscard]] std::vector<std::byte> seeded_input(const RaggedLayout& layout, std::int64_t rank);
[[nodiscard]] std::string verify_rank_output(const RaggedLayout& layout, std::int64_t rank, std::span<const std::byte> output,
                                             std::int64_t seeded_ranks = 0);

}  // namespace dtensor

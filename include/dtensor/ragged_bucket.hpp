#pragma once
// FSDP buckets of ragged tensors (docs/ragged.md, "Buckets"): N tensors whose pieces are, on every
// rank, consecutive views of one flat local buffer, and whose ranks' buffers in coordinate order
// tile the tensors' concatenation (FSDP's flat parameter, veScale's ragged FSDP). Gathering the
// bucket is one exchange of the flat buffer; every tensor is then a view of the gathered buffer at
// its offset: no packing copy, and none at all when the local buffer is a view of the output.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "dtensor/ragged.hpp"

namespace dtensor {

struct RaggedBucket {
  RaggedLayout flat;                  // 1-d: every member's elements in order, cut by rank
  std::vector<std::int64_t> offsets;  // member i's first element in the flat bucket
  // Member i's first element in the rank's local buffer (the members' pieces, in order).
  [[nodiscard]] std::vector<std::int64_t> local_offsets(const std::vector<RaggedLayout>& members,
                                                        std::span<const std::int64_t> coord) const;
};

// The bucket `members` form, or nullopt: one mesh, one dtype, each member ragged on the same mesh
// dim with every other mesh dim Replicate, and on every rank the members' pieces (in member order)
// one run of their concatenation, the ranks' runs in coordinate order tiling it.
[[nodiscard]] std::optional<RaggedBucket> bucket_of(std::span<const RaggedLayout> members);

// FSDP's flat parameter as ragged layouts: the tensors of `shapes` concatenated and cut over
// `mesh_dim` as torch.chunk cuts a list (ceil(total / n) elements per coordinate, the last ones
// fewer or none), each member RaggedShard over all its dims. InputError for an empty tensor, a
// 0-d one, or a mesh dim out of range.
[[nodiscard]] std::vector<RaggedLayout> flat_bucket_layouts(const Mesh& mesh, int mesh_dim,
                                                            std::span<const std::vector<std::int64_t>> shapes, DType dtype);

// A batch file (the format of batch_pairs_from_json) whose placements may hold RaggedShard.
[[nodiscard]] std::vector<std::pair<RaggedLayout, RaggedLayout>> ragged_batch_pairs_from_json(std::string_view json);

}  // namespace dtensor

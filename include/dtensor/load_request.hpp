#pragma once
// A checkpoint load as a file (docs/checkpoint.md, `dtensor load-plan`): the saved tensors as DCP's
// metadata describes them and the layouts they load into.
//   {"tensors": [{"name": "w", "layout": {<layout JSON>}, "chunks": [[[0, 0], [4, 6]], ...]}, ...]}
// Each chunk is [offsets, sizes]; the layout's shape and dtype are the saved tensor's.
// dtensor.torch.checkpoint.request_json writes one from a state dict and a checkpoint.
#include <string>
#include <string_view>
#include <vector>

#include "dtensor/layout.hpp"
#include "dtensor/load_plan.hpp"

namespace dtensor {

struct LoadRequest {
  std::vector<SavedTensor> saved;
  std::vector<Layout> targets;

  // Validated as untrusted: every field of its type, names unique and non-empty, at most 2^20
  // tensors and 2^24 chunks in all, each chunk one offset and size per dim (check_saved's checks
  // follow in plan_load). Throws InputError naming the tensor and field.
  [[nodiscard]] static LoadRequest from_json(std::string_view json);
  [[nodiscard]] std::string to_json() const;
  // The index of the tensor named `name` (InputError listing a few names when there is none).
  [[nodiscard]] std::int32_t index_of(std::string_view name) const;
};

}  // namespace dtensor

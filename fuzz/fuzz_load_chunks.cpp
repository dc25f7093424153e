// libFuzzer: plan_load with fuzzed chunk metadata (docs/checkpoint.md): offsets and sizes near 0,
// the shape, 2^31, 2^62 and INT64_MAX, negatives, overlaps, gaps. Bad metadata must be refused with
// a dtensor::InputError; accepted metadata must tile the tensor exactly (checked here by marking
// every element) and plan every target rank exactly its elements, every chunk read once.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "dtensor/error.hpp"
#include "dtensor/load_plan.hpp"

namespace {

struct Reader {
  const std::uint8_t* data;
  std::size_t size, at = 0;
  std::uint8_t byte() { return at < size ? data[at++] : 0; }
  std::int64_t value(std::int64_t extent) {
    static constexpr std::int64_t edge[] = {-1, INT64_MIN, INT64_MAX, INT64_MAX - 1, std::int64_t{1} << 31, std::int64_t{1} << 62};
    const std::uint8_t b = byte();
    if (b < 200) return b % (extent + 2);
    return edge[b % (sizeof edge / sizeof edge[0])];
  }
};

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "FINDING: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dtensor;
  Reader in{data, size};
  const char* const meshes[] = {"1", "2", "3", "2x2"};
  const char* const placements1[] = {"S(0)", "R", "S(1)", "_S(0, 2)"};
  const char* const placements2[] = {"S(0)S(1)", "RS(0)", "S(1)R", "RR", "S(0)[1]S(0)[0]"};
  const Mesh mesh = Mesh::parse(meshes[in.byte() % 4]);
  const std::vector<std::int64_t> shape{in.byte() % 9, in.byte() % 7};
  const std::string pl = mesh.ndim() == 1 ? placements1[in.byte() % 4] : placements2[in.byte() % 5];
  std::optional<Layout> target;
  try {
    target = Layout::parse(mesh, shape, DType::f32, pl);
  } catch (const InputError&) {
    return 0;
  }
  SavedTensor t{"w", shape, DType::f32, {}};
  const int n = in.byte() % 12;
  for (int i = 0; i < n; ++i) {
    SavedChunk c;
    const int dims = in.byte() % 16 == 0 ? 1 : 2;  // sometimes the wrong number of dims
    for (int d = 0; d < dims; ++d) {
      c.offsets.push_back(in.value(shape[static_cast<std::size_t>(d)]));
      c.sizes.push_back(in.value(shape[static_cast<std::size_t>(d)]));
    }
    t.chunks.push_back(c);
  }
  LoadPlan plan;
  try {
    plan = plan_load(std::vector<SavedTensor>{t}, std::vector<Layout>{*target}, CostModel::default_model());
  } catch (const InputError&) {
    return 0;
  }
  // accepted: the chunks tile the tensor
  std::vector<int> marks(static_cast<std::size_t>(shape[0] * shape[1]), 0);
  for (const auto& c : t.chunks) {
    if (c.offsets.size() != 2) finding("a chunk of the wrong rank accepted");
    for (std::int64_t i = c.offsets[0]; i < c.offsets[0] + c.sizes[0]; ++i)
      for (std::int64_t j = c.offsets[1]; j < c.offsets[1] + c.sizes[1]; ++j) {
        if (i < 0 || i >= shape[0] || j < 0 || j >= shape[1]) finding("a chunk outside the tensor accepted");
        ++marks[static_cast<std::size_t>(i * shape[1] + j)];
      }
  }
  for (int m : marks)
    if (m != 1) finding("chunks that do not tile the tensor accepted");
  // every chunk with elements read once; every rank gets its elements
  std::vector<int> read(t.chunks.size(), 0);
  for (const auto& r : plan.reads) ++read.at(static_cast<std::size_t>(r.chunk));
  for (std::size_t c = 0; c < t.chunks.size(); ++c)
    if (read[c] != (t.chunks[c].sizes[0] * t.chunks[c].sizes[1] > 0 ? 1 : 0)) finding("a chunk not read exactly once");
  std::vector<std::int64_t> got(static_cast<std::size_t>(mesh.num_ranks()), 0);
  for (const auto& m : plan.messages) got.at(static_cast<std::size_t>(m.to)) += m.elements;
  for (std::int64_t r = 0; r < mesh.num_ranks(); ++r)
    if (got[static_cast<std::size_t>(r)] != target->local_numel(mesh.coord_of_rank(r))) finding("a rank planned other than its elements");
  return 0;
}

// libFuzzer: plan_cross_mesh with fuzzed world rank lists and world sizes (docs/cross-mesh.md):
// ids near and past 2^31 and 2^63, negatives, duplicates, ranks far apart. Bad lists must be
// refused with a dtensor::InputError before any arithmetic on the ids; accepted ones must plan
// in memory that follows the ranks used, validate, round-trip, and (few ranks, small tensor)
// simulate to the right result.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dtensor/cross_mesh_executor.hpp"
#include "dtensor/error.hpp"
#include "dtensor/simulate.hpp"

namespace {

struct Reader {
  const std::uint8_t* data;
  std::size_t size, at = 0;
  std::uint8_t byte() { return at < size ? data[at++] : 0; }
  std::int64_t raw() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | byte();
    return static_cast<std::int64_t>(v);
  }
  // a world rank: small ids, ids at the edges, or 8 raw bytes
  std::int64_t rank() {
    static constexpr std::int64_t edge[] = {dtensor::kMaxWorldSize - 2, dtensor::kMaxWorldSize - 1, dtensor::kMaxWorldSize,
                                            INT64_MAX, INT64_MAX - 1, -1, INT64_MIN, std::int64_t{1} << 32,
                                            std::int64_t{1} << 20, 30000};
    const std::uint8_t b = byte();
    if (b < 160) return b % 12;
    if (b < 250) return edge[b % (sizeof edge / sizeof edge[0])];
    return raw();
  }
};

const char* const kLayouts1[] = {"S(0)", "R", "P(sum)", "S(1)", "_S(0, 2)"};
const char* const kLayouts2[] = {"S(0)S(1)", "RS(0)", "P(sum)S(1)", "S(1)R", "RR", "S(0)[1]S(0)[0]"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in{data, size};
  const std::uint8_t shape_byte = in.byte(), mesh_byte = in.byte(), layout_byte = in.byte();
  const std::vector<std::int64_t> shape{1 + shape_byte % 9, 1 + (shape_byte >> 4) % 6};
  // mesh A: 1-4 ranks (1-d) or 2x2; mesh B: 1-4 ranks (1-d) or 2x2
  auto mesh_of = [](int code) { return code == 4 ? dtensor::Mesh::parse("2x2") : dtensor::Mesh::parse(std::to_string(1 + code)); };
  const dtensor::Mesh ma = mesh_of(mesh_byte % 5), mb = mesh_of((mesh_byte / 5) % 5);
  auto layout_of = [&](const dtensor::Mesh& m, int code) {
    const char* text = m.ndim() == 2 ? kLayouts2[code % 6] : kLayouts1[code % 5];
    return dtensor::Layout::parse(m, shape, dtensor::DType::f32, text);
  };
  std::vector<std::int64_t> ra, rb;
  for (std::int64_t i = 0; i < ma.num_ranks(); ++i) ra.push_back(in.rank());
  for (std::int64_t i = 0; i < mb.num_ranks(); ++i) rb.push_back(in.rank());
  dtensor::CrossMeshOptions o;
  if (const std::uint8_t w = in.byte(); w >= 200) o.world_size = w >= 250 ? in.raw() : in.rank();
  try {
    const auto src = layout_of(ma, layout_byte % 8), dst = layout_of(mb, layout_byte / 8);
    const auto p = dtensor::plan_cross_mesh(src, ra, dst, rb, dtensor::CostModel::default_model(), o);
    for (const auto* list : {&ra, &rb})
      for (auto r : *list)
        if (r < 0 || r >= dtensor::kMaxWorldSize) {
          std::fprintf(stderr, "FINDING: world rank %lld accepted\n", static_cast<long long>(r));
          std::abort();
        }
    dtensor::validate_cross_mesh_plan(p);
    if (!(dtensor::CrossMeshPlan::from_json(p.to_json()) == p)) {
      std::fprintf(stderr, "FINDING: cross-mesh plan JSON round trip\n");
      std::abort();
    }
    if (!dtensor::simulate(p).verified) {
      std::fprintf(stderr, "FINDING: a cross-mesh plan ran to a wrong result\n");
      std::abort();
    }
  } catch (const dtensor::Error&) {
  }
  return 0;
}

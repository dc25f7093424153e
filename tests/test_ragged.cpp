// RaggedShard: the layout algebra against the oracle (ragged_cases.hpp), text and JSON, bad input.
#include <catch2/catch.hpp>

#include <random>

#include "dtensor/error.hpp"
#include "dtensor/ragged.hpp"
#include "ragged_cases.hpp"

using namespace dtensor;
using ragged_cases::Case;

namespace {

const std::vector<std::vector<std::int64_t>> kMeshes{{2}, {3}, {2, 2}, {2, 3}, {2, 2, 2}};

// Every ragged case of `mesh` for an nd-d tensor: each ragged mesh dim, R or S(d) on each later
// mesh dim, every k, every units vector in {0, 1, 2}^n but the zero one.
template <class F>
void for_each_case(const std::vector<std::int64_t>& mesh, int nd, F&& f) {
  const int md = static_cast<int>(mesh.size());
  for (int r = 0; r < md; ++r) {
    const int free = md - r - 1;
    std::int64_t combos = 1;
    for (int i = 0; i < free; ++i) combos *= nd + 1;
    for (std::int64_t pick = 0; pick < combos; ++pick) {
      Case c;
      c.rdim = r;
      std::int64_t p = pick;
      for (int m = 0; m < md; ++m) {
        if (m <= r) {
          c.base.push_back({'R'});
          continue;
        }
        const int o = static_cast<int>(p % (nd + 1));
        p /= nd + 1;
        c.base.push_back(o == 0 ? oracle::Pl{'R'} : oracle::Pl{'S', o - 1, 1});
      }
      const auto n = mesh[static_cast<std::size_t>(r)];
      std::int64_t unit_combos = 1;
      for (std::int64_t i = 0; i < n; ++i) unit_combos *= 3;
      for (int k = 1; k <= nd; ++k)
        for (std::int64_t u = 1; u < unit_combos; ++u) {
          c.k = k;
          c.units.clear();
          for (std::int64_t i = 0, x = u; i < n; ++i, x /= 3) c.units.push_back(x % 3);
          f(c);
        }
    }
  }
}

std::vector<std::int64_t> expand(const std::vector<Interval>& runs) {
  std::vector<std::int64_t> out;
  for (const auto& r : runs)
    for (auto x = r.start; x < r.stop; ++x) out.push_back(x);
  return out;
}

}  // namespace

TEST_CASE("ragged layouts: pieces, local shapes and owned runs against the oracle", "[ragged]") {
  std::mt19937_64 rng(53);
  std::int64_t checked = 0, refused = 0;
  for (const auto& mesh_shape : kMeshes) {
    const Mesh mesh(mesh_shape);
    for (int nd = 1; nd <= 3; ++nd)
      for (int sample = 0; sample < 4; ++sample) {
        std::vector<std::int64_t> shape;
        for (int d = 0; d < nd; ++d) shape.push_back(static_cast<std::int64_t>(rng() % 7));
        for_each_case(mesh_shape, nd, [&](const Case& c) {
          const std::string text = ragged_cases::text(c);
          const bool ok = ragged_cases::valid(mesh_shape, shape, c);
          std::optional<RaggedLayout> l;
          try {
            l = RaggedLayout::parse(mesh, shape, DType::f32, text);
          } catch (const InputError& e) {
            INFO(mesh.str() << " " << shape_str(shape) << " " << text << ": " << e.what());
            CHECK(!ok);
            ++refused;
            return;
          }
          INFO(mesh.str() << " " << shape_str(shape) << " " << text);
          REQUIRE(ok);
          REQUIRE(l->is_ragged());
          // the canonical text (shard orders printed as [k] where a dim has two entries) reads back
          CHECK(RaggedLayout::parse(mesh, shape, DType::f32, l->placements_str()) == *l);
          CHECK(l->placements_str().find(l->ragged()->str()) != std::string::npos);
          CHECK(RaggedLayout::parse(l->str()) == *l);
          CHECK(ragged_layout_from_json(to_json(*l)) == *l);
          for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) {
            const auto coord = mesh.coord_of_rank(r);
            const auto want = ragged_cases::piece(mesh_shape, shape, c, coord);
            CHECK(l->local_numel(coord) == static_cast<std::int64_t>(want.size()));
            CHECK(expand(l->owned_runs(coord)) == want);
            // (rows, trailing...) holds the piece, its trailing extents the block's
            const auto ls = l->local_shape(coord);
            const auto block = l->base().local_shape(coord);
            REQUIRE(ls.size() == block.size() - static_cast<std::size_t>(c.k) + 1);
            std::int64_t n = 1;
            for (auto x : ls) n *= x;
            CHECK(n == static_cast<std::int64_t>(want.size()));
            for (std::size_t d = 1; d < ls.size(); ++d) CHECK(ls[d] == block[d - 1 + static_cast<std::size_t>(c.k)]);
          }
          ++checked;
        });
      }
  }
  INFO("checked " << checked << ", refused " << refused);
  CHECK(checked > 1000);
  CHECK(refused > 100);
}

TEST_CASE("ragged layouts: a single owner, the FSDP-by-memory cut, text forms", "[ragged]") {
  // all units on rank 2: rank 2 holds the whole 6x4 matrix, the others nothing
  const auto owner = RaggedLayout::parse("4 6x4 f32 RaggedShard((0,),(0,0,1,0))");
  CHECK(owner.local_numel(std::vector<std::int64_t>{2}) == 24);
  CHECK(owner.local_shape(std::vector<std::int64_t>{2}) == std::vector<std::int64_t>{6, 4});
  CHECK(owner.local_numel(std::vector<std::int64_t>{0}) == 0);
  // dims (0, 1): cuts may cross rows of dim 1 (whole elements of the 3x4 matrix's flat memory)
  const auto flat = RaggedLayout::parse("2 3x4 bf16 RaggedShard((0,1),(1,2))");
  CHECK(flat.piece(std::vector<std::int64_t>{1}).start == 4);
  CHECK(flat.local_shape(std::vector<std::int64_t>{1}) == std::vector<std::int64_t>{8});
  // veScale's keyword spelling and PyTorch's tuple form read the same
  CHECK(RaggedLayout::parse("2x2 4x4 f32 (RaggedShard(dims=(0,), local_units=(1, 1)), Shard(1))") ==
        RaggedLayout::parse("2x2 4x4 f32 RaggedShard((0,),(1,1))S(1)"));
  // on a 2-d mesh after a Replicate
  const auto second = RaggedLayout::parse("2x3 6x2 f32 RRaggedShard((0),(1,0,2))");
  CHECK(second.ragged()->mesh_dim == 1);
  CHECK(second.placements_str() == "RRaggedShard((0,),(1,0,2))");
  // not ragged: exactly the ordinary layout
  CHECK(RaggedLayout::parse("2 4 f32 S(0)").base() == Layout::parse("2 4 f32 S(0)"));
}

TEST_CASE("ragged layouts: bad input gets one clear error", "[ragged]") {
  const std::vector<std::pair<const char*, const char*>> bad{
      {"4 8 f32 RaggedShard((0,),(1,1,1))", "has 3 entries"},
      {"4 8 f32 RaggedShard((0,),(1,-1,1,1))", "must not be negative"},
      {"4 8 f32 RaggedShard((0,),(0,0,0,0))", "all zero"},
      {"4 9 f32 RaggedShard((0,),(1,1,1,1))", "does not divide"},
      {"2 3x4 f32 RaggedShard((0,),(1,4))", "does not divide"},
      {"2 2x4 f32 RaggedShard((0,),(1,7))", "trailing row"},
      {"2 4x4 f32 RaggedShard((1,),(1,1))", "leading run"},
      {"2 4x4 f32 RaggedShard((0,0),(1,1))", "repeated"},
      {"2 4x4 f32 RaggedShard((0,5),(1,1))", "out of range"},
      {"2 4x4 f32 RaggedShard((),(1,1))", "must not be empty"},
      {"2x2 4x4 f32 RaggedShard((0,),(1,1))RaggedShard((0,),(1,1))", "two RaggedShard"},
      {"2x2 4x4 f32 S(1)RaggedShard((0,),(1,1))", "before every other non-Replicate"},
      {"2x2 4x4 f32 RaggedShard((0,),(1,1))P", "Partial"},
      {"2 4 f32 RaggedShard((0,),(1,1)", "never closed"},
      {"2 4 f32 RaggedShard((0,),(1,99999999999999999))", "too large"},
      {"2 4 f32 RaggedShard((0,)(1,1))", "expected ','"},
  };
  for (const auto& [text, what] : bad) {
    INFO(text);
    CHECK_THROWS_WITH(RaggedLayout::parse(text), Catch::Contains(what));
  }
  // JSON whose 'ragged' record disagrees with its placements
  auto j = to_json(RaggedLayout::parse("4 8 f32 RaggedShard((0,),(1,1,1,1))"));
  const auto at = j.find("[1,1,1,1]");
  REQUIRE(at != std::string::npos);
  j.replace(at, 9, "[1,1,2,0]");
  CHECK_THROWS_WITH(ragged_layout_from_json(j), Catch::Contains("disagrees"));
}

// A layout's distinct blocks and the range queries over them (placement/blocks.hpp), against
// every rank's own index sets on random layouts: uneven and empty shards, strided splits, shard
// orders.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "dtensor/layout.hpp"
#include "placement/blocks.hpp"

using namespace dtensor;
using detail::LayoutBlocks;

namespace {

struct Rng {
  std::mt19937_64 g;
  std::int64_t operator()(std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(g); }
};

Layout random_layout(Rng& uni, const Mesh& mesh, const std::vector<std::int64_t>& shape) {
  const int mesh_ndim = mesh.ndim(), nd = static_cast<int>(shape.size());
  Sharding s = Sharding::replicated(mesh_ndim, nd);
  std::vector<int> dims(static_cast<std::size_t>(mesh_ndim));
  for (int m = 0; m < mesh_ndim; ++m) dims[static_cast<std::size_t>(m)] = m;
  std::shuffle(dims.begin(), dims.end(), uni.g);  // the order shards are appended: shard orders
  for (int m : dims) {
    const auto k = uni(0, 3);
    if (nd == 0 || k == 0) continue;
    const int d = static_cast<int>(uni(0, nd - 1));
    if (k == 3) s = s.with_shard_appended(d, ShardEntry{m, uni(1, 4), true});
    else s = s.with_shard_appended(d, ShardEntry{m, 1, false});
  }
  return Layout(mesh, shape, DType::f32, s);
}

IndexSet random_set(Rng& uni, std::int64_t length) {
  if (length == 0 || uni(0, 5) == 0) return {};
  std::vector<Interval> runs;
  const auto n = uni(1, 3);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto a = uni(0, length - 1);
    runs.push_back({a, uni(a + 1, length)});
  }
  return IndexSet::union_of(runs);
}

std::int64_t product_overlap(const std::vector<IndexSet>& x, const std::vector<IndexSet>& y, std::int64_t* rows) {
  std::int64_t n = 1;
  bool found = false;
  *rows = 1;
  for (std::size_t d = 0; d < x.size(); ++d) {
    const auto o = x[d].overlap(y[d]);
    n *= o;
    if (!found && o > 1) *rows = o, found = true;
  }
  return n;
}

}  // namespace

TEST_CASE("layout blocks: members, sets and range queries against every rank's index sets", "[blocks]") {
  Rng uni{std::mt19937_64(20261129)};
  int layouts = 0, queries = 0, met = 0;
  while (layouts < 1500) {
    const auto mesh_ndim = uni(1, 3);
    std::vector<std::int64_t> ms;
    for (std::int64_t m = 0; m < mesh_ndim; ++m) ms.push_back(uni(1, 5));
    const Mesh mesh(ms);
    if (mesh.num_ranks() > 40) continue;
    std::vector<std::int64_t> shape;
    const auto nd = uni(0, 3);
    for (std::int64_t d = 0; d < nd; ++d) shape.push_back(uni(0, 13));
    const Layout l = random_layout(uni, mesh, shape);
    const LayoutBlocks blocks(l);
    ++layouts;
    INFO(l.str());
    // every rank in exactly one block; a block's members hold its sets; blocks differ; ordered
    std::vector<std::vector<IndexSet>> boxes;
    for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) boxes.push_back(l.indices(mesh.coord_of_rank(r)));
    std::vector<int> seen(static_cast<std::size_t>(mesh.num_ranks()), 0);
    std::int64_t last_lowest = -1;
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      const auto mem = blocks.members(b);
      REQUIRE(!mem.empty());
      REQUIRE(std::is_sorted(mem.begin(), mem.end()));
      REQUIRE(mem.front() > last_lowest);
      last_lowest = mem.front();
      for (auto r : mem) {
        ++seen[static_cast<std::size_t>(r)];
        REQUIRE(blocks.block_of(r) == static_cast<std::int32_t>(b));
        REQUIRE(boxes[static_cast<std::size_t>(r)] == blocks.box(b));
      }
      for (std::size_t c = 0; c < b; ++c) REQUIRE(blocks.box(c) != blocks.box(b));
      std::int64_t n = 1;
      for (const auto& x : blocks.box(b)) n *= x.size();
      REQUIRE(blocks.numel(b) == n);
    }
    REQUIRE(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
    REQUIRE(blocks.full_product());
    // range queries: random boxes, and every block of another random layout
    for (int q = 0; q < 6; ++q) {
      std::vector<IndexSet> box;
      for (auto z : shape) box.push_back(random_set(uni, z));
      std::vector<LayoutBlocks::Meet> got;
      blocks.meeting(box, got);
      std::vector<LayoutBlocks::Meet> want;
      for (std::size_t b = 0; b < blocks.size(); ++b) {
        std::int64_t rows = 1;
        if (const auto n = product_overlap(blocks.box(b), box, &rows); n > 0)
          want.push_back({static_cast<std::int32_t>(b), n, rows});
      }
      REQUIRE(got.size() == want.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        REQUIRE(got[i].block == want[i].block);
        REQUIRE(got[i].elements == want[i].elements);
        REQUIRE(got[i].rows == want[i].rows);
      }
      ++queries;
      met += static_cast<int>(got.size());
    }
    const LayoutBlocks other(random_layout(uni, mesh, shape));
    std::int64_t most = 0;
    for (std::size_t j = 0; j < other.size(); ++j) {
      if (other.numel(j) == 0) continue;
      std::int64_t n = 0, rows = 0;
      for (std::size_t b = 0; b < blocks.size(); ++b) n += product_overlap(blocks.box(b), other.box(j), &rows) > 0 ? 1 : 0;
      most = std::max(most, n);
    }
    REQUIRE(blocks.most_met_by(other) == most);
  }
  INFO("queries " << queries << ", blocks met " << met);
  CHECK(met > 1000);
}

TEST_CASE("layout blocks: a 1024x8 layout is built from its per-dim sets, not a set per rank", "[blocks]") {
  const Layout l = Layout::parse(Mesh::parse("1024x8"), {16384, 8192}, DType::bf16, "S(0)S(1)");
  const LayoutBlocks blocks(l);
  CHECK(blocks.size() == 8192);
  std::vector<LayoutBlocks::Meet> got;
  blocks.meeting(std::vector<IndexSet>{IndexSet::range(100, 130), IndexSet::range(0, 8192)}, got);
  REQUIRE(got.size() == 3 * 8);  // rows 96-111, 112-127, 128-143 (16 rows per block), every column block
  CHECK(got.front().elements == 12 * 1024);
  const LayoutBlocks rs(Layout::parse(Mesh::parse("512x8"), {16384, 8192}, DType::bf16, "RS(1)"));
  CHECK(blocks.most_met_by(rs) == 1024);  // one RS(1) block: every row block of one column block
  CHECK(rs.most_met_by(blocks) == 1);
}

#include <catch2/catch.hpp>
#include <limits>
#include <random>

#include "dtensor/layout.hpp"
#include "dtensor/error.hpp"
#include "dtensor/ownership_map.hpp"
#include "oracle.hpp"

using namespace dtensor;

namespace {

struct Stats {
  std::int64_t layouts = 0, rank_checks = 0;
};

// Checks every rank of one layout against the oracle. Returns false on the first mismatch.
bool check_layout(const std::vector<std::int64_t>& mesh_shape, const std::vector<std::int64_t>& shape,
                  const std::vector<oracle::Pl>& pls, Stats& st) {
  const std::string text = oracle::text(pls);
  const Layout l = Layout::parse(Mesh(mesh_shape), shape, DType::f32, text);
  ++st.layouts;
  const Mesh& mesh = l.mesh();
  for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) {
    const auto coord = mesh.coord_of_rank(r);
    const auto want = oracle::owned(mesh_shape, shape, pls, coord);
    const auto got = l.indices(coord);
    const auto offset = l.global_offset(coord);
    const auto local = l.local_shape(coord);
    std::vector<oracle::List> got_lists;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      got_lists.push_back(got[d].materialize());
      const std::int64_t want_offset = want[d].empty() ? shape[d] : want[d].front();
      if (got_lists.back() != want[d] || offset[d] != want_offset ||
          local[d] != static_cast<std::int64_t>(want[d].size())) {
        FAIL_CHECK("mismatch: mesh " << mesh.str() << " shape " << shape_str(shape) << " placements " << text
                                     << " rank " << r << " dim " << d);
        return false;
      }
    }
    if (oracle::local_ids(shape, got_lists) != oracle::local_ids(shape, want)) {
      FAIL_CHECK("local tensor ids differ: " << text);
      return false;
    }
    ++st.rank_checks;
  }
  return true;
}

// Every placement from {R, P, S(d), _S(d, 2), _S(d, 3)} per mesh dim, with every shard order.
std::vector<std::vector<oracle::Pl>> all_layouts(int mesh_ndim, int tensor_ndim) {
  std::vector<oracle::Pl> options{{'R'}, {'P'}};
  for (int d = 0; d < tensor_ndim; ++d) {
    options.push_back({'S', d, 1});
    options.push_back({'T', d, 2});
    options.push_back({'T', d, 3});
  }
  return oracle::layouts(mesh_ndim, tensor_ndim, options);
}

// The shardings of all_layouts(3, 2) on a 2x3x2 mesh (every placement, every shard order): the
// inputs of the edge-building tests below.
std::vector<Sharding> every_3d_sharding() {
  std::vector<Sharding> out;
  for (const auto& pls : all_layouts(3, 2))
    out.push_back(Layout::parse(Mesh({2, 3, 2}), {12, 12}, DType::f32, oracle::text(pls)).sharding());
  return out;
}

}  // namespace

TEST_CASE("SPEC §2 examples", "[ownership]") {
  auto sizes_offsets = [](const char* mesh, std::vector<std::int64_t> shape, const char* pls) {
    const Layout l = Layout::parse(Mesh::parse(mesh), shape, DType::f32, pls);
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    for (std::int64_t r = 0; r < l.mesh().num_ranks(); ++r) {
      const auto c = l.mesh().coord_of_rank(r);
      out.push_back({l.local_shape(c)[0], l.global_offset(c)[0]});
    }
    return out;
  };
  using V = std::vector<std::pair<std::int64_t, std::int64_t>>;
  CHECK(sizes_offsets("2x2", {9, 5}, "S(0)S(0)") == V{{3, 0}, {2, 3}, {2, 5}, {2, 7}});
  CHECK(sizes_offsets("4x2", {13, 2}, "S(0)S(0)")[7] == std::pair<std::int64_t, std::int64_t>{0, 13});
  const auto s18 = sizes_offsets("4x2", {18, 2}, "_S(0, 2)S(0)");
  for (std::int64_t dp = 0; dp < 4; ++dp)
    for (std::int64_t tp = 0; tp < 2; ++tp) {
      const auto want = dp == 3 ? std::pair<std::int64_t, std::int64_t>{0, 18}
                                : std::pair<std::int64_t, std::int64_t>{3, 9 * tp + 3 * dp};
      CHECK(s18[static_cast<std::size_t>(dp * 2 + tp)] == want);
    }
  const auto s39 = sizes_offsets("4x2", {39, 2}, "_S(0, 3)_S(0, 4)");
  CHECK(s39[0] == std::pair<std::int64_t, std::int64_t>{8, 0});
  CHECK(s39[1] == std::pair<std::int64_t, std::int64_t>{4, 2});
  CHECK(s39[6] == std::pair<std::int64_t, std::int64_t>{3, 12});
  CHECK(s39[7] == std::pair<std::int64_t, std::int64_t>{0, 39});
  CHECK(sizes_offsets("4x2", {15, 5}, "_S(0, 2)S(0)") ==
        V{{2, 0}, {2, 8}, {2, 2}, {2, 10}, {2, 4}, {2, 12}, {2, 6}, {1, 14}});
  // arange(8).reshape(2, 4) on 2x2 with _S(1, 2)S(1)
  const Layout l = Layout::parse(Mesh::parse("2x2"), {2, 4}, DType::f32, "_S(1, 2)S(1)");
  const std::vector<std::vector<std::int64_t>> want{{0, 4}, {2, 6}, {1, 5}, {3, 7}};
  for (std::int64_t r = 0; r < 4; ++r) {
    const auto sets = l.indices(l.mesh().coord_of_rank(r));
    std::vector<oracle::List> lists{sets[0].materialize(), sets[1].materialize()};
    CHECK(oracle::local_ids({2, 4}, lists) == want[static_cast<std::size_t>(r)]);
  }
  // the strided rule: arange(9), sf=2, n=4
  const std::vector<ShardEntry> e{{0, 2, true}};
  const std::vector<std::int64_t> mesh{4};
  CHECK(owned_indices(e, 9, mesh, std::vector<std::int64_t>{0}).materialize() == oracle::List{0, 1, 5});
  CHECK(owned_indices(e, 9, mesh, std::vector<std::int64_t>{1}).materialize() == oracle::List{2, 3, 6});
  CHECK(owned_indices(e, 9, mesh, std::vector<std::int64_t>{2}).materialize() == oracle::List{4, 7});
  CHECK(owned_indices(e, 9, mesh, std::vector<std::int64_t>{3}).materialize() == oracle::List{8});
  // chunk rule
  CHECK(chunk_bounds(5, 4, 3).end - chunk_bounds(5, 4, 3).begin == 0);
  CHECK(chunk_bounds(6, 4, 2).end - chunk_bounds(6, 4, 2).begin == 2);
  CHECK(chunk_bounds(8, 16, 9).end - chunk_bounds(8, 16, 9).begin == 0);
  // the 64-bit path (i < n, length and n below 2^62) agrees with the 128-bit one everywhere,
  // at its edges included; past them chunk_bounds is the 128-bit one
  const std::int64_t big = std::int64_t{1} << 62, top = std::numeric_limits<std::int64_t>::max();
  std::int64_t compared = 0;
  for (std::int64_t len : {std::int64_t{0}, std::int64_t{1}, std::int64_t{7}, std::int64_t{8}, std::int64_t{1000003}, big - 1, big, top})
    for (std::int64_t n : {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{16}, std::int64_t{999983}, big - 1, big, top})
      for (std::int64_t i : {std::int64_t{0}, std::int64_t{1}, n / 2, n - 1, n, n == top ? n : n + 1, top}) {
        const auto a = chunk_bounds(len, n, i), b = chunk_bounds_wide(len, n, i);
        CHECK((a.begin == b.begin && a.end == b.end));
        INFO("length " << len << ", n " << n << ", i " << i << ": [" << a.begin << ", " << a.end << ")");
        CHECK((0 <= a.begin && a.begin <= a.end && a.end <= len));
        ++compared;
      }
  CHECK(compared == 8 * 8 * 7);
}

TEST_CASE("ownership matches the brute-force oracle: full set", "[ownership]") {
  const std::vector<std::vector<std::int64_t>> meshes{{2}, {3}, {4}, {2, 2}, {2, 3}, {3, 2}, {2, 2, 2}};
  const std::vector<std::int64_t> sizes12{0, 1, 2, 3, 4, 5, 7, 9};
  const std::vector<std::int64_t> sizes3{0, 1, 3, 5};
  Stats st;
  for (const auto& mesh : meshes) {
    for (int nd = 1; nd <= 3; ++nd) {
      bool ok = true;
      for (const auto& pls : all_layouts(static_cast<int>(mesh.size()), nd))
        oracle::for_each_shape(nd, nd == 3 ? sizes3 : sizes12, [&](const std::vector<std::int64_t>& shape) {
          if (ok) ok = check_layout(mesh, shape, pls, st);
        });
      REQUIRE(ok);
    }
  }
  INFO("layouts checked: " << st.layouts << ", rank checks: " << st.rank_checks);
  CHECK(st.layouts > 100000);
}

TEST_CASE("ownership matches the brute-force oracle: 10,000 seeded random cases", "[ownership]") {
  std::mt19937_64 rng(20261122);
  auto uni = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  Stats st;
  int done = 0;
  while (done < 10000) {
    const int mesh_ndim = static_cast<int>(uni(1, 3));
    std::vector<std::int64_t> mesh;
    std::int64_t ranks = 1;
    for (int m = 0; m < mesh_ndim; ++m) {
      mesh.push_back(uni(1, 4));
      ranks *= mesh.back();
    }
    if (ranks > 8) continue;
    const int nd = static_cast<int>(uni(1, 3));
    std::vector<std::int64_t> shape;
    for (int d = 0; d < nd; ++d) shape.push_back(uni(0, 17));
    std::vector<oracle::Pl> pls;
    for (int m = 0; m < mesh_ndim; ++m) {
      const auto k = uni(0, 3);
      if (k == 0) pls.push_back({'R'});
      else if (k == 1) pls.push_back({'P'});
      else if (k == 2) pls.push_back({'S', static_cast<int>(uni(0, nd - 1)), 1});
      else pls.push_back({'T', static_cast<int>(uni(0, nd - 1)), uni(1, 5)});
    }
    // random shard order for dims sharded twice or more
    for (int d = 0; d < nd; ++d) {
      std::vector<int> g;
      for (int m = 0; m < mesh_ndim; ++m)
        if (pls[static_cast<std::size_t>(m)].kind != 'R' && pls[static_cast<std::size_t>(m)].kind != 'P' &&
            pls[static_cast<std::size_t>(m)].dim == d)
          g.push_back(m);
      if (g.size() >= 2 && uni(0, 1)) {
        std::vector<int> perm(g.size());
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        for (std::size_t k = 0; k < g.size(); ++k) pls[static_cast<std::size_t>(g[k])].pos = perm[k];
      }
    }
    REQUIRE(check_layout(mesh, shape, pls, st));
    ++done;
  }
  CHECK(st.layouts == 10000);
}

TEST_CASE("ownership scales: 4096x4096 on 1024 ranks without materialising", "[ownership]") {
  const Layout l = Layout::parse(Mesh::parse("8x8x16"), {4096, 4096}, DType::f32, "S(0)_S(1, 3)S(0)");
  std::int64_t total = 0;
  for (std::int64_t r = 0; r < 1024; ++r) {
    const auto sets = l.indices(l.mesh().coord_of_rank(r));
    CHECK(sets[1].runs().size() <= 3);  // runs, not element lists
    total += sets[0].size() * sets[1].size();
  }
  CHECK(total == 4096 * 4096);  // the shards partition the tensor
}

TEST_CASE("ownership_map: every cell's owners against the oracle", "[ownership]") {
  const std::vector<std::pair<std::vector<std::int64_t>, std::vector<oracle::Pl>>> cases{
      {{2, 2}, {{'S', 0, 1}, {'S', 0, 1}}},
      {{4, 2}, {{'T', 0, 2}, {'S', 0, 1}}},
      {{2, 3}, {{'S', 1, 1}, {'T', 0, 3}}},
      {{2, 2}, {{'P'}, {'S', 1, 1}}},
      {{3}, {{'R'}}},
  };
  for (const auto& [mesh, pls] : cases) {
    for (const std::vector<std::int64_t>& shape : {std::vector<std::int64_t>{9, 5}, std::vector<std::int64_t>{7, 8},
                                                   std::vector<std::int64_t>{1, 3}}) {
      const Layout l = Layout::parse(Mesh(mesh), shape, DType::f32, oracle::text(pls));
      const OwnershipMap map = ownership_map(l, 0, 1);
      REQUIRE(map.row_cuts.front() == 0);
      REQUIRE(map.row_cuts.back() == shape[0]);
      for (std::size_t i = 0; i < map.rows(); ++i)
        for (std::size_t j = 0; j < map.cols(); ++j) {
          const auto r = map.row_cuts[i], c = map.col_cuts[j];
          std::vector<std::int64_t> want;
          const Mesh m(mesh);
          for (std::int64_t rank = 0; rank < m.num_ranks(); ++rank) {
            const auto sets = oracle::owned(mesh, shape, pls, m.coord_of_rank(rank));
            if (std::find(sets[0].begin(), sets[0].end(), r) != sets[0].end() &&
                std::find(sets[1].begin(), sets[1].end(), c) != sets[1].end())
              want.push_back(rank);
          }
          INFO(oracle::text(pls) << " cell " << r << "," << c);
          CHECK(map.at(i, j) == want);
        }
    }
  }
  CHECK_THROWS_AS(ownership_map(Layout::parse(Mesh::parse("2"), {9, 5}, DType::f32, "S(0)"), 0, 0), InputError);
  CHECK_THROWS_AS(ownership_map(Layout::parse(Mesh::parse("64"), {4096}, DType::f32, "_S(0, 64)"), 0, -1, 16), InputError);
}

TEST_CASE("closed-form counts and first indices equal the listed index sets", "[ownership]") {
  // every sequence of up to three splits (plain or strided, split factors 1-7) over mesh dims
  // of 1-4 ranks, every coordinate, lengths 0-40
  const std::vector<std::int64_t> mesh{3, 2, 4};
  std::int64_t cases = 0;
  std::vector<ShardEntry> kinds;
  for (int m = 0; m < 3; ++m) {
    kinds.push_back({m, 1, false});
    for (std::int64_t sf : {2, 3, 5, 7}) kinds.push_back({m, sf, true});
  }
  std::vector<std::vector<ShardEntry>> seqs{{}};
  for (const auto& a : kinds) {
    seqs.push_back({a});
    for (const auto& b : kinds) {
      if (b.mesh_dim == a.mesh_dim) continue;
      seqs.push_back({a, b});
      for (const auto& c : kinds)
        if (c.mesh_dim != a.mesh_dim && c.mesh_dim != b.mesh_dim && (c.split_factor + a.split_factor) % 3 == 0)
          seqs.push_back({a, b, c});  // a sample of the three-split sequences
    }
  }
  for (const auto& seq : seqs)
    for (std::int64_t len = 0; len <= 40; len += (len < 12 ? 1 : 7))
      for (std::int64_t c0 = 0; c0 < 3; ++c0)
        for (std::int64_t c1 = 0; c1 < 2; ++c1)
          for (std::int64_t c2 = 0; c2 < 4; ++c2) {
            const std::vector<std::int64_t> coord{c0, c1, c2};
            const auto set = owned_indices(seq, len, mesh, coord);
            const auto count = owned_count(seq, len, mesh, coord);
            const auto first = owned_first(seq, len, mesh, coord);
            if (count != set.size() || first.has_value() != !set.empty() || (first && *first != set.runs().front().start))
              FAIL_CHECK("len " << len << " coord " << c0 << c1 << c2 << " entries " << seq.size() << ": listed "
                                << set.size() << " from " << set.first_or(-1) << ", closed form " << count << " from "
                                << first.value_or(-1));
            ++cases;
          }
  CHECK(cases > 100000);
}

TEST_CASE("with_replicated over a set of mesh dims equals with_replicate over each, in any order", "[ownership]") {
  // every placement of {R, P, S(d), _S(d, 2), _S(d, 3)} on 3 mesh dims over 2 tensor dims, every
  // shard order, every set of mesh dims (the planner's flattened gathers and reductions use it)
  std::int64_t checked = 0;
  for (const Sharding& s : every_3d_sharding()) {
    for (std::uint32_t mask = 0; mask < 8u; ++mask) {
      Sharding forward = s, backward = s;
      for (int m = 0; m < 3; ++m)
        if ((mask >> m) & 1u) forward = forward.with_replicate(m);
      for (int m = 2; m >= 0; --m)
        if ((mask >> m) & 1u) backward = backward.with_replicate(m);
      const Sharding got = s.with_replicated(mask);
      REQUIRE(got == forward);
      REQUIRE(got == backward);
      REQUIRE(got.hash() == forward.hash());
      REQUIRE(got.str() == forward.str());
      for (int m = 0; m < 3; ++m) {
        const bool cleared = (mask >> m) & 1u;
        REQUIRE((!cleared || (got.shard_dim_of(m) < 0 && !got.partial(m))));
        if (!cleared) REQUIRE(got.shard_dim_of(m) == s.shard_dim_of(m));
      }
      ++checked;
    }
  }
  CHECK(checked > 1000);
}

TEST_CASE("with_shard_appended equals with_replicate, then the entry after the tensor dim's last", "[ownership]") {
  // every layout of 3 mesh dims over 2 tensor dims, every mesh dim appended to every tensor dim
  // as a plain or strided shard: against the sharding built entry by entry
  std::int64_t checked = 0;
  for (const Sharding& s : every_3d_sharding()) {
    for (int m = 0; m < 3; ++m) {
      const Sharding r = s.with_replicate(m);
      for (int d = 0; d < 2; ++d)
        for (const ShardEntry e : {ShardEntry{m, 1, false}, ShardEntry{m, 2, true}}) {
          std::vector<std::vector<ShardEntry>> dims;
          for (int t = 0; t < 2; ++t) {
            const auto es = r.entries(t);
            dims.emplace_back(es.begin(), es.end());
          }
          dims[static_cast<std::size_t>(d)].push_back(e);
          std::vector<std::optional<ReduceOp>> partial;
          for (int k = 0; k < 3; ++k) partial.push_back(r.partial(k));
          const Sharding want(3, dims, partial);
          const Sharding got = s.with_shard_appended(d, e);
          REQUIRE(got == want);
          REQUIRE(got.hash() == want.hash());
          REQUIRE(got.str() == want.str());
          ++checked;
        }
    }
  }
  CHECK(checked > 1000);
}

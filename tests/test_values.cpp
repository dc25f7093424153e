#include <sstream>
#include <catch2/catch.hpp>
#include <unordered_set>

#include "dtensor/error.hpp"
#include "test_util.hpp"
#include "dtensor/layout.hpp"
#include "dtensor/scalar.hpp"
#include "comm/scalar_reference.hpp"
#include "comm/reduce_math.hpp"
#include "dtensor/simulated.hpp"
#include <cstring>
#include <cmath>
#include <random>

using namespace dtensor;

namespace {
std::string roundtrip(const std::string& text, int mesh_ndim, int tensor_ndim) {
  return Sharding::parse(text, mesh_ndim, tensor_ndim).str();
}
}  // namespace

TEST_CASE("placement text: golden print strings", "[values]") {
  CHECK(Placement::Shard(0).str() == "S(0)");
  CHECK(Placement::StridedShard(0, 3).str() == "_S(0, 3)");
  CHECK(Placement::Replicate().str() == "R");
  CHECK(Placement::Partial(ReduceOp::avg).str() == "P(avg)");
  CHECK(Placement::Partial().str() == "P(sum)");
  CHECK(fmt::format("{}", Placement::StridedShard(1, 2)) == "_S(1, 2)");
}

TEST_CASE("sharding text: golden round trips", "[values]") {
  CHECK(roundtrip("S(0)[1]S(0)[0]R", 3, 2) == "S(0)[1]S(0)[0]R");
  CHECK(roundtrip("S(0)S(0)", 2, 2) == "S(0)[0]S(0)[1]");  // printed whenever >= 2 mesh dims shard a dim
  CHECK(roundtrip("S(0)S(1)", 2, 2) == "S(0)S(1)");
  CHECK(roundtrip("_S(0,3)", 1, 1) == "_S(0, 3)");
  CHECK(roundtrip("SS(0,3)", 1, 1) == "_S(0, 3)");
  CHECK(roundtrip("S(0)[0]S(0)[1]_S(0, 3)[2]", 3, 1) == "S(0)[0]S(0)[1]_S(0, 3)[2]");
  CHECK(roundtrip("P", 1, 1) == "P(sum)");
  CHECK(roundtrip("P(avg), P(sum)", 2, 1) == "P(avg)P(sum)");
  CHECK(roundtrip("R, S(-1)", 2, 3) == "RS(2)");  // negative dims normalise like PyTorch
  CHECK(roundtrip("Shard(1), Replicate(), Partial(max)", 3, 2) == "S(1)RP(max)");
  CHECK(roundtrip("_StridedShard(0, split_factor=2) Shard(0)", 2, 1) == "_S(0, 2)[0]S(0)[1]");
  CHECK(roundtrip("_S(0, 2)[1]S(0)[0]", 2, 1) == "_S(0, 2)[1]S(0)[0]");
  // every printed form parses back to itself
  const std::vector<std::pair<const char*, int>> printed{
      {"S(0)[1]S(0)[0]R", 3}, {"RP(min)", 2}, {"_S(1, 2)[0]S(1)[1]", 2}, {"P(product)R", 2}, {"S(1)S(0)", 2}};
  for (const auto& [t, md] : printed) CHECK(roundtrip(t, md, 2) == t);
}

TEST_CASE("placement errors name the offending value", "[values]") {
  using Catch::Matchers::Contains;
  CHECK_THAT(error_of([] { (void)parse_placements("S(0"); }), Contains("character 4") && Contains("')'"));
  CHECK_THAT(error_of([] { (void)parse_placements("Q"); }), Contains("character 1"));
  CHECK_THAT(error_of([] { (void)parse_placements(""); }), Contains("expected a placement"));
  CHECK_THAT(error_of([] { (void)parse_placements("S(x)"); }), Contains("an integer at character 3"));
  CHECK_THAT(error_of([] { (void)parse_placements("P(mean)"); }), Contains("Partial op"));
  CHECK_THAT(error_of([] { (void)parse_placements("R,"); }), Contains("after ','"));
  CHECK_THAT(error_of([] { (void)Sharding::parse("S(2)", 1, 2); }), Contains("tensor dim 2") && Contains("2-d tensor"));
  CHECK_THAT(error_of([] { (void)Sharding::parse("S(-3)", 1, 2); }), Contains("tensor dim -3"));
  CHECK_THAT(error_of([] { (void)Sharding::parse("S(0)", 2, 2); }), Contains("1 mesh dim(s) but the mesh has 2"));
  CHECK_THAT(error_of([] { (void)Sharding::parse("_S(0, 0)", 1, 1); }), Contains("split_factor 0"));
  CHECK_THAT(error_of([] { (void)Sharding::parse("P(max)P(sum)", 2, 1); }), Contains("cannot be mixed"));
  CHECK_NOTHROW(Sharding::parse("P(avg)P(sum)", 2, 1));
  CHECK_THAT(error_of([] { (void)Sharding::parse("S(0)[0]S(0)[0]", 2, 1); }), Contains("[0] is given twice"));
  CHECK_THAT(error_of([] { (void)Sharding::parse("S(0)[0]S(0)", 2, 1); }), Contains("missing"));
  CHECK_THAT(error_of([] { (void)Sharding::parse("S(0)[2]S(0)[0]", 2, 1); }), Contains("[2]") && Contains("out of range"));
  CHECK_THAT(error_of([] { (void)Sharding::parse("R[0]", 1, 1); }), Contains("not a shard"));
  CHECK_THAT(error_of([] { (void)Mesh::parse("2x0"); }), Contains("mesh size 0"));
  CHECK_THAT(error_of([] { (void)Mesh::parse("2xx"); }), Contains("character 3"));
  CHECK_THAT(error_of([] { (void)Mesh::parse("dp=2,4"); }), Contains("all mesh dims named or none"));
  CHECK_THAT(error_of([] { (void)parse_shape("9x-1"); }), Contains("-1") && Contains("negative"));
  CHECK_THAT(error_of([] { (void)parse_dtype("f128"); }), Contains("f128"));
  CHECK_THAT(error_of([] { (void)Mesh(std::vector<std::int64_t>{2, 2}, {}, {0, 1, 1, 3}); }), Contains("rank 1 twice"));
  CHECK(parse_shape("0x3") == std::vector<std::int64_t>{0, 3});
  CHECK_THAT(error_of([] { (void)Layout::parse(Mesh::parse("2"), {std::int64_t{1} << 40, std::int64_t{1} << 40}, DType::f32, "S(0)"); }),
             Contains("more than 2^53 elements"));
  // a split factor far beyond the dim's length: empty pieces, answered at once
  const Layout huge_sf = Layout::parse(Mesh::parse("2"), {9}, DType::f32, "_S(0, 99999999999)");
  CHECK(huge_sf.local_shape(std::vector<std::int64_t>{0})[0] == 9);
  CHECK(parse_shape("9,5") == std::vector<std::int64_t>{9, 5});
  // runs of bare letters: a length cap, a placement-count cap, and a linear scan (the cursor never
  // steps back into a word it read: 80,000 R's took 6-10 s)
  CHECK_THAT(error_of([] { (void)parse_placements(std::string(80000, 'R')); }), Contains("80000 characters") && Contains("limit"));
  CHECK_THAT(error_of([] { (void)parse_placements(std::string(4000, 'R')); }), Contains("more than 8 mesh dims"));
  CHECK(parse_placements("RRRRRRRR").placements.size() == 8);
  CHECK(parse_placements("RReplicate").placements == std::vector<Placement>{Placement::Replicate(), Placement::Replicate()});
  CHECK(parse_placements("PRS(0)").placements.size() == 3);
  CHECK_THAT(error_of([] { (void)parse_placements("PartialR"); }), Contains("character 1"));
}

TEST_CASE("Partial(avg) needs a floating dtype", "[values]") {
  using Catch::Matchers::Contains;
  for (DType t : {DType::i8, DType::u8, DType::i32, DType::i64, DType::boolean})
    CHECK_THAT(error_of([&] { (void)Layout::parse(Mesh::parse("3"), {8, 7}, t, "P(avg)"); }),
               Contains("Partial(avg) on mesh dim 0") && Contains(std::string(to_string(t))));
  for (DType t : {DType::f32, DType::bf16, DType::f8e4m3}) CHECK_NOTHROW(Layout::parse(Mesh::parse("3"), {8, 7}, t, "P(avg)"));
  CHECK_NOTHROW(Layout::parse(Mesh::parse("3"), {8, 7}, DType::i8, "P(sum)"));
}

TEST_CASE("mesh: names, explicit ranks, coordinates", "[values]") {
  const Mesh m = Mesh::parse("dp=2,tp=4");
  CHECK(m.str() == "dp=2,tp=4");
  CHECK(m.num_ranks() == 8);
  CHECK(m.coord_of_rank(5) == std::vector<std::int64_t>{1, 1});
  CHECK(m.describe_dim(1) == "1 (tp, size 4)");
  const Mesh p(std::vector<std::int64_t>{2, 2}, {}, {3, 2, 1, 0});
  CHECK(p.rank_at(std::vector<std::int64_t>{0, 0}) == 3);
  CHECK(p.coord_of_rank(3) == std::vector<std::int64_t>{0, 0});
  CHECK(Mesh(std::vector<std::int64_t>{2, 2}, {}, {0, 1, 2, 3}) == Mesh::parse("2x2"));  // identity is canonical
  CHECK(mesh_from_json(to_json(p)) == p);
  CHECK(mesh_from_json(to_json(m)) == m);
}

TEST_CASE("layout JSON round trip and strict errors", "[values]") {
  using Catch::Matchers::Contains;
  for (const char* t : {"S(0)[1]S(0)[0]", "_S(0, 2)S(1)", "P(avg)R", "RR", "S(1)[0]_S(1, 3)[1]"}) {
    const Layout l = Layout::parse(Mesh::parse("dp=2,tp=2"), {9, 5}, DType::bf16, t);
    const std::string j = to_json(l);
    CHECK(layout_from_json(j) == l);
    CHECK(to_json(layout_from_json(j)) == j);
  }
  CHECK_THAT(error_of([] { (void)layout_from_json("{"); }), Contains("invalid layout JSON"));
  CHECK_THAT(error_of([] { (void)layout_from_json(R"({"mesh":[2],"shape":[4],"dtype":"f32"})"); }), Contains("'placements'"));
  CHECK_THAT(error_of([] { (void)layout_from_json(R"({"mesh":[2],"shape":["a"],"dtype":"f32","placements":"R"})"); }),
             Contains("'shape'"));
  CHECK_THAT(error_of([] { (void)layout_from_json(R"({"mesh":[2],"shape":[4],"dtype":"f33","placements":"R"})"); }),
             Contains("f33"));
}

TEST_CASE("hash and equality agree", "[values]") {
  const Mesh m = Mesh::parse("2x2");
  std::vector<Layout> ls;
  for (const char* t : {"S(0)S(0)", "S(0)[0]S(0)[1]", "S(0)[1]S(0)[0]", "_S(0, 1)S(0)", "RS(0)", "RS(-2)", "P(sum)R",
                        "PR", "P(avg)R", "RR"})
    ls.push_back(Layout::parse(m, {8, 4}, DType::f32, t));
  for (const auto& a : ls)
    for (const auto& b : ls)
      if (a == b) CHECK(std::hash<Layout>{}(a) == std::hash<Layout>{}(b));
  CHECK(ls[0] == ls[1]);  // default order == explicit default order
  CHECK(ls[0] != ls[2]);
  CHECK(ls[0] != ls[3]);  // a StridedShard is never a Shard, even with sf = 1
  CHECK(ls[4] == ls[5]);
  CHECK(ls[6] == ls[7]);
  CHECK(ls[6] != ls[8]);
  std::unordered_set<Layout> set(ls.begin(), ls.end());
  CHECK(set.size() == 7);
}

TEST_CASE("PyTorch placements + explicit shard order <-> canonical layout", "[values]") {
  const Mesh m = Mesh::parse("2x2x2");
  const std::vector<Placement> pls{Placement::Shard(0), Placement::Shard(0), Placement::StridedShard(1, 2)};
  const std::vector<Layout::ShardOrderEntry> order{{0, {1, 0}}, {1, {2}}};
  const Layout l = Layout::from_torch(m, {8, 8}, DType::f32, pls, order);
  CHECK(l.placements_str() == "S(0)[1]S(0)[0]_S(1, 2)");
  CHECK(l.torch_shard_order() == order);
  CHECK(Layout::from_torch(m, {8, 8}, DType::f32, l.placements(), l.torch_shard_order()) == l);
  CHECK_THROWS_AS(Layout::from_torch(m, {8, 8}, DType::f32, pls, std::vector<Layout::ShardOrderEntry>{{1, {0}}}), Error);
}

TEST_CASE("equivalent layouts", "[values]") {
  const Mesh m = Mesh::parse("4x2");
  auto L = [&](std::vector<std::int64_t> shape, const char* t) { return Layout::parse(m, shape, DType::f32, t); };
  CHECK(equivalent(L({8, 4}, "_S(0, 2)S(0)"), L({8, 4}, "S(0)[1]S(0)[0]")));
  CHECK_FALSE(equivalent(L({9, 4}, "_S(0, 2)S(0)"), L({9, 4}, "S(0)[1]S(0)[0]")));
  CHECK(equivalent(L({8, 4}, "_S(0, 1)R"), L({8, 4}, "S(0)R")));
  CHECK_FALSE(equivalent(L({8, 4}, "P(sum)R"), L({8, 4}, "RR")));
  CHECK(equivalent(Layout::parse(Mesh::parse("1x2"), {4}, DType::f32, "PR"), Layout::parse(Mesh::parse("1x2"), {4}, DType::f32, "RR")));
  // empty shards hold the same (nothing) wherever their empty range starts
  CHECK(equivalent(L({1, 4}, "S(0)[0]S(0)[1]"), L({1, 4}, "S(0)[1]S(0)[0]")));
  CHECK_FALSE(equivalent(L({2, 4}, "S(0)[0]S(0)[1]"), L({2, 4}, "S(0)[1]S(0)[0]")));
  CHECK(equivalent(L({3, 4}, "_S(0, 3)R"), L({3, 4}, "_S(0, 3)R")));
  // the Sharding form: the shapes must be the shardings' dims
  const Sharding a = L({8, 4}, "S(0)R").sharding();
  const std::vector<std::int64_t> mesh_shape{4, 2}, shape{8, 4}, short_mesh{4}, long_shape{8, 4, 2};
  CHECK(equivalent(a, a, mesh_shape, shape));
  CHECK_THROWS_AS(equivalent(a, a, short_mesh, shape), InputError);
  CHECK_THROWS_AS(equivalent(a, a, mesh_shape, long_shape), InputError);
}

TEST_CASE("overlap of two layouts' index sets", "[values]") {
  const Mesh m = Mesh::parse("2x2");
  const Layout a = Layout::parse(m, {9, 5}, DType::f32, "S(0)S(0)");
  const Layout b = Layout::parse(m, {9, 5}, DType::f32, "S(0)S(1)");
  // rank (0,0) owns rows 0:3 in a; rank (0,1) needs rows 0:5, cols 3:5 in b
  const auto box = overlap(a, std::vector<std::int64_t>{0, 0}, b, std::vector<std::int64_t>{0, 1});
  CHECK(box[0].str() == "0:3");
  CHECK(box[1].str() == "3:5");
  CHECK(box_numel(box) == 6);
  const auto none = overlap(a, std::vector<std::int64_t>{1, 1}, b, std::vector<std::int64_t>{0, 0});
  CHECK(box_numel(none) == 0);
}

TEST_CASE("the whole text form of a layout", "[values]") {
  using Catch::Matchers::Contains;
  const Layout l = Layout::parse(Mesh::parse("dp=2,tp=4"), {1000, 512}, DType::bf16, "S(0)[1]S(0)[0]");
  CHECK(l.str() == "dp=2,tp=4 1000x512 bf16 S(0)[1]S(0)[0]");
  CHECK(l.placements_str() == "S(0)[1]S(0)[0]");
  CHECK(Layout::parse(l.str()) == l);
  const Layout strided = Layout::parse("2x3 9x5 f32 _S(0, 3) S(1)");  // placements may hold spaces
  CHECK(strided.placements_str() == "_S(0, 3)S(1)");
  CHECK(Layout::parse(strided.str()) == strided);
  const Layout scalar = Layout::parse(Mesh::parse("2"), {}, DType::f32, "P(sum)");
  CHECK(Layout::parse(scalar.str()) == scalar);
  std::ostringstream os;
  os << l;
  CHECK(fmt::format("{}", l) == os.str());  // fmt and << print the same whole form
  CHECK(fmt::format("{}", l) == l.str());
  CHECK_THROWS_WITH(Layout::parse("2x2 9x5 f32"), Contains("missing its placements"));
  CHECK_THROWS_WITH(Layout::parse("2x2 9x5"), Contains("missing its dtype"));
  CHECK_THROWS_WITH(Layout::parse("2x2 9x5 f33 RR"), Contains("f33"));
}

TEST_CASE("one JSON form for layouts: names and explicit ranks survive a round trip", "[values]") {
  using Catch::Matchers::Contains;
  const Layout named = Layout::parse(Mesh::parse("dp=2,tp=2"), {9, 5}, DType::f32, "S(0)S(1)");
  CHECK(layout_from_json(to_json(named)) == named);
  CHECK(layout_from_json(to_json(named)).mesh().str() == "dp=2,tp=2");
  const Layout ranked = Layout::parse(Mesh({2, 2}, {}, {3, 2, 1, 0}), {4}, DType::f32, "S(0)R");
  CHECK(layout_from_json(to_json(ranked)) == ranked);
  // the earlier object form of the mesh still reads
  CHECK(layout_from_json(R"J({"mesh": {"shape": [2, 2], "names": ["dp", "tp"]}, "shape": [9, 5], "dtype": "f32",
                             "placements": "S(0)S(1)"})J") == named);
  // numbers: integers only, in range; depth bounded; inputs quoted briefly
  CHECK_THROWS_WITH(layout_from_json(R"J({"mesh": [2.9], "shape": [4], "dtype": "f32", "placements": "R"})J"),
                    Contains("must be an integer"));
  CHECK_THROWS_WITH(layout_from_json(R"J({"mesh": [4294967296], "shape": [4], "dtype": "f32", "placements": "R"})J"),
                    Contains("4294967296"));
  CHECK_THROWS_AS(layout_from_json("1e309"), InputError);
  CHECK_THROWS_WITH(layout_from_json(std::string(10000, '[')), Contains("nested deeper"));
  // the depth pass skips strings (brackets and escaped quotes inside them are text) and counts
  // only open containers: 33 levels read (a parse error, not the depth), 34 are refused
  const std::string deep33 = std::string(33, '[') + std::string(33, ']');
  CHECK_THROWS_WITH(layout_from_json(deep33), !Contains("nested deeper"));
  CHECK_THROWS_WITH(layout_from_json(std::string(34, '[') + std::string(34, ']')), Contains("nested deeper"));
  CHECK_THROWS_WITH(layout_from_json(R"J({"mesh": [2], "shape": [4], "dtype": "f32", "placements": "[[[\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["})J"),
                    !Contains("nested deeper"));
  CHECK_THROWS_WITH(layout_from_json(R"J({"version": 7})J"), Contains("version"));
}

TEST_CASE("quote_input escapes control characters and truncates", "[values]") {
  CHECK(quote_input("S(0\nR") == "\"S(0\\nR\"");
  CHECK(quote_input("a\"b") == "\"a\\\"b\"");
  CHECK(quote_input(std::string(200, 'x')).size() < 120);
  CHECK(quote_input(std::string(200, 'x')).find("first 80 of 200 characters") != std::string::npos);
}

TEST_CASE("bf16/f16 fast codecs equal the reference codecs bit for bit", "[values]") {
  std::mt19937_64 rng(2024);
  for (DType t : {DType::bf16, DType::f16}) {
    std::uint16_t buf = 0;
    std::int64_t checked = 0;
    auto check_encode = [&](double v) {
      store_element(t, &buf, 0, v);
      const auto want = detail::encode_reference(t, v);
      if (buf != want) FAIL(to_string(t) << " encode(" << v << ") = " << buf << ", reference " << want);
      ++checked;
    };
    for (std::uint32_t b = 0; b < 65536; ++b) {
      const std::uint16_t bits = static_cast<std::uint16_t>(b);
      const double v = load_element(t, &bits, 0);
      const double ref = detail::decode_reference(t, b);
      if (!(v == ref || (std::isnan(v) && std::isnan(ref)))) FAIL(to_string(t) << " decode " << b);
      if (std::isnan(v)) continue;
      check_encode(v);  // exact values
      // the midpoint to the next value up (a tie) and points just around it
      const std::uint16_t up = static_cast<std::uint16_t>(b + 1);
      const double next = detail::decode_reference(t, up);
      if (std::isfinite(v) && std::isfinite(next) && (b & 0x7fffu) != 0x7fffu && std::signbit(v) == std::signbit(next)) {
        const double mid = v + (next - v) / 2;
        check_encode(mid);
        check_encode(std::nextafter(mid, 0.0));
        check_encode(std::nextafter(mid, 1e300));
        check_encode(-mid);
      }
    }
    for (int i = 0; i < 200000; ++i) {  // random doubles over every scale, subnormals and overflow included
      const double m = std::uniform_real_distribution<double>(-2, 2)(rng);
      check_encode(std::ldexp(m, static_cast<int>(rng() % 300) - 150));
    }
    for (double v : {0.0, -0.0, 1e-320, -1e-320, 65504.0, 65519.99, 65520.0, 1e39, -1e39, 3.5e38, HUGE_VAL, -HUGE_VAL,
                     std::nan(""), -std::nan("")})
      check_encode(v);
    CHECK(checked > 300000);
  }
}

// The device reduction kernels' arithmetic (src/comm/nccl/reduce_math.hpp, compiled here for the
// host) against the CPU executor's reduction, bit for bit: every pair of fp8 values under every
// op, a sample of three- and eight-member fp8 reductions, and samples of bf16/f16.
TEST_CASE("device reduction arithmetic gives the CPU executor's bits", "[values]") {
  namespace rm = dtensor::reduce_math;
  Memory& cpu = host_memory();
  const std::pair<DType, rm::Format> formats[] = {{DType::f8e4m3, rm::kE4M3}, {DType::f8e5m2, rm::kE5M2},
                                                  {DType::bf16, rm::kBF16},   {DType::f16, rm::kF16}};
  const ReduceOp ops[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min, ReduceOp::product};
  std::mt19937_64 rng(3);
  std::int64_t compared = 0;
  auto same_bits = [](std::uint32_t a, std::uint32_t b, rm::Format f) {
    const std::uint32_t top = (1u << f.e) - 1, man = (1u << f.m) - 1;
    auto is_nan = [&](std::uint32_t x) {
      const std::uint32_t ex = (x >> f.m) & top, mn = x & man;
      return f.fn ? (ex == top && mn == man) : (ex == top && mn != 0);
    };
    return a == b || (is_nan(a) && is_nan(b));  // a NaN's sign and payload are not specified
  };
  for (const auto& [dt, f] : formats) {
    const int bits = f.e + f.m + 1;
    const std::uint32_t patterns = 1u << bits;
    // decode/encode round trip of every pattern against the CPU codec
    for (std::uint32_t b = 0; b < patterns; ++b) {
      unsigned char raw[2] = {static_cast<unsigned char>(b), static_cast<unsigned char>(b >> 8)};
      const double cpu_v = load_element(dt, raw, 0), dev_v = rm::decode(b, f);
      REQUIRE(((std::isnan(cpu_v) && std::isnan(dev_v)) || cpu_v == dev_v));
    }
    for (int n : {2, 3, 8}) {
      const bool exhaustive = bits == 8 && n == 2;
      const std::int64_t cases = exhaustive ? std::int64_t{patterns} * patterns : 40000;
      std::vector<std::vector<unsigned char>> in(static_cast<std::size_t>(n), std::vector<unsigned char>(2 * 4096));
      std::vector<unsigned char> out(2 * 4096);
      const std::size_t is = itemsize(dt);
      for (ReduceOp op : ops) {
        for (std::int64_t c0 = 0; c0 < cases; c0 += 4096) {
          const std::int64_t m = std::min<std::int64_t>(4096, cases - c0);
          std::vector<std::vector<std::uint32_t>> b(static_cast<std::size_t>(n), std::vector<std::uint32_t>(static_cast<std::size_t>(m)));
          for (std::int64_t k = 0; k < m; ++k)
            for (int s = 0; s < n; ++s) {
              const std::uint32_t v = exhaustive ? static_cast<std::uint32_t>(((c0 + k) >> (8 * s)) & 0xff)
                                                 : static_cast<std::uint32_t>(rng() % patterns);
              b[static_cast<std::size_t>(s)][static_cast<std::size_t>(k)] = v;
              std::memcpy(in[static_cast<std::size_t>(s)].data() + k * static_cast<std::int64_t>(is), &v, is);  // little-endian
            }
          std::vector<const void*> ptrs;
          for (auto& x : in) ptrs.push_back(x.data());
          cpu.reduce(dt, op, out.data(), ptrs, m);
          for (std::int64_t k = 0; k < m; ++k) {
            std::uint32_t want = 0;
            std::memcpy(&want, out.data() + k * static_cast<std::int64_t>(is), is);
            const std::uint32_t got =
                rm::reduce_element(f, static_cast<int>(op), n, [&](int s) { return b[static_cast<std::size_t>(s)][static_cast<std::size_t>(k)]; });
            if (!same_bits(got, want, f)) {
              std::string members;
              for (int s = 0; s < n; ++s) members += fmt::format(" {:#x}", b[static_cast<std::size_t>(s)][static_cast<std::size_t>(k)]);
              FAIL(fmt::format("{} {} of{}: device {:#x}, CPU {:#x}", to_string(dt), to_string(op), members, got, want));
            }
            ++compared;
          }
        }
      }
    }
  }
  CHECK(compared > 2 * 5 * 65536);
  // f32 avg: the division in double, rounded once, as the CPU's finish_average
  for (int i = 0; i < 100000; ++i) {
    const float x = static_cast<float>(std::ldexp(static_cast<double>(rng() % (1u << 24)), static_cast<int>(rng() % 40) - 20));
    const auto n = static_cast<long long>(2 + rng() % 14);
    float cpu_v = x;
    finish_average(DType::f32, &cpu_v, 1, n);
    REQUIRE(rm::average_f32(x, n) == cpu_v);
  }
}

// Checkpoint loading plans against the oracle: saved chunks made from a saving layout (each
// saving rank's box, replicas once, empty ones kept), loaded into every target layout of small
// meshes (strided, uneven and empty shards included). Every chunk is read exactly once, and
// every target rank receives exactly the elements it owns, each once, from the chunk's reader.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>

#include <fmt/format.h>

#include "dtensor/error.hpp"
#include "dtensor/load_plan.hpp"
#include "dtensor/ragged_plan.hpp"
#include "dtensor/simulate.hpp"
#include "dtensor/tune.hpp"
#include "oracle.hpp"

using namespace dtensor;
using Catch::Matchers::Contains;

namespace {

std::vector<std::int64_t> coord_of(const std::vector<std::int64_t>& mesh, std::int64_t r) {
  std::vector<std::int64_t> c(mesh.size());
  for (std::size_t m = mesh.size(); m-- > 0;) c[m] = r % mesh[m], r /= mesh[m];
  return c;
}
std::int64_t ranks_of(const std::vector<std::int64_t>& mesh) {
  std::int64_t n = 1;
  for (auto s : mesh) n *= s;
  return n;
}

// The chunks a DCP save of a plain (S/R) layout writes: each saving rank's box, replicas once.
SavedTensor saved_of(const std::vector<std::int64_t>& mesh, const std::vector<std::int64_t>& shape,
                     const std::vector<oracle::Pl>& pls, DType dtype) {
  SavedTensor t{"w", shape, dtype, {}};
  std::set<std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>> seen;
  for (std::int64_t r = 0; r < ranks_of(mesh); ++r) {
    const auto sets = oracle::owned(mesh, shape, pls, coord_of(mesh, r));
    SavedChunk c;
    for (const auto& s : sets) {
      c.offsets.push_back(s.empty() ? 0 : s.front());
      c.sizes.push_back(static_cast<std::int64_t>(s.size()));
    }
    if (seen.insert({c.offsets, c.sizes}).second) t.chunks.push_back(c);
  }
  return t;
}

// The global ids of a box intersected with a rank's owned sets.
std::vector<std::int64_t> ids_in(const std::vector<std::int64_t>& shape, const SavedChunk& c, const std::vector<oracle::List>& sets) {
  std::vector<oracle::List> cut(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d)
    for (auto i : sets[d])
      if (i >= c.offsets[d] && i < c.offsets[d] + c.sizes[d]) cut[d].push_back(i);
  return oracle::local_ids(shape, cut);
}

// `text` with the first `from` replaced by `to` (which must occur).
std::string edited(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("load plans: every chunk read once, every target rank gets exactly its elements", "[load]") {
  const std::vector<std::vector<std::int64_t>> save_meshes{{1}, {2}, {4}, {2, 2}};
  const std::vector<std::vector<std::int64_t>> load_meshes{{1}, {2}, {3}, {2, 2}};
  const std::vector<oracle::Pl> save_options{{'R'}, {'S', 0}, {'S', 1}};
  const std::vector<oracle::Pl> load_options{{'R'}, {'S', 0}, {'S', 1}, {'T', 0, 2}};
  const CostModel cost = CostModel::default_model();
  std::int64_t plans = 0, messages = 0, staged_plans = 0;
  for (const auto& shape : std::vector<std::vector<std::int64_t>>{{5, 3}, {8, 4}, {1, 6}, {0, 3}}) {
    for (const auto& sm : save_meshes)
      for (const auto& sp : oracle::layouts(static_cast<int>(sm.size()), 2, save_options)) {
        const SavedTensor saved = saved_of(sm, shape, sp, DType::f32);
        for (const auto& lm : load_meshes)
          for (const auto& lp : oracle::layouts(static_cast<int>(lm.size()), 2, load_options)) {
            const Mesh mesh(lm);
            std::optional<Layout> parsed;
            try {
              parsed = Layout::parse(mesh, shape, DType::f32, oracle::text(lp));
            } catch (const InputError&) {
              continue;  // (a strided split the shape refuses)
            }
            const Layout& target = *parsed;
            INFO("saved " << oracle::text(sp) << " on " << sm.size() << "-d mesh, target " << target.str());
            const std::vector<SavedTensor> ss{saved};
            const std::vector<Layout> ts{target};
            // the cost model's choice is never costlier than either forced form
            const double direct_us = plan_load(ss, ts, cost, LoadOptions{{}, {}, Fanout::direct}).total_us;
            const double gather_us = plan_load(ss, ts, cost, LoadOptions{{}, {}, Fanout::gather}).total_us;
            for (const Fanout fanout : {Fanout::cheapest, Fanout::gather}) {
            INFO("fan-out " << to_string(fanout));
            LoadOptions options;
            options.fanout = fanout;
            const LoadPlan p = plan_load(ss, ts, cost, options);
            if (fanout == Fanout::cheapest) CHECK(p.total_us <= std::min(direct_us, gather_us) + 1e-9);
            ++plans;
            // a staged tensor is received in its intermediate (the dtensor layout's sets, checked
            // below), then the post batch takes it to the target (simulated against the oracle)
            const bool staged = !p.staged.empty();
            const Layout& via = p.received_layout(0, target);
            if (fanout == Fanout::gather) {
              bool replicas = false;
              for (int m = 0; m < mesh.ndim(); ++m) replicas = replicas || (lm[static_cast<std::size_t>(m)] > 1 && lp[static_cast<std::size_t>(m)].kind == 'R');
              CHECK(staged == replicas);
            }
            if (staged) {
              ++staged_plans;
              REQUIRE(p.staged == std::vector<std::int32_t>{0});
              CHECK(p.post.plan(0).dst == target);
              CHECK(simulate(p.post).verified);
              CHECK(p.total_us == Approx(p.read_us + p.transfer_us + p.post_us));
            }
            // every chunk with bytes read once
            std::map<std::int32_t, std::int64_t> reader;
            for (const auto& r : p.reads) REQUIRE(reader.emplace(r.chunk, r.reader).second);
            std::int64_t live = 0;
            for (const auto& c : saved.chunks) live += c.sizes[0] * c.sizes[1] > 0;
            CHECK(static_cast<std::int64_t>(reader.size()) == live);
            CHECK(p.total_read_bytes == shape[0] * shape[1] * 4);
            // every target rank: its elements exactly once, each message what the oracle cuts
            for (std::int64_t r = 0; r < ranks_of(lm); ++r) {
              std::vector<oracle::List> sets = oracle::owned(lm, shape, lp, coord_of(lm, r));
              if (staged) {
                sets.clear();
                for (const auto& x : via.indices(coord_of(lm, r))) sets.push_back(x.materialize());
              }
              std::multiset<std::int64_t> got;
              for (const auto& m : p.messages) {
                if (m.to != r) continue;
                CHECK(m.from == reader.at(m.chunk));
                const auto ids = ids_in(shape, saved.chunks[static_cast<std::size_t>(m.chunk)], sets);
                CHECK(static_cast<std::int64_t>(ids.size()) == m.elements);
                got.insert(ids.begin(), ids.end());
                ++messages;
              }
              const auto want = oracle::local_ids(shape, sets);
              CHECK(got == std::multiset<std::int64_t>(want.begin(), want.end()));
            }
            CHECK(p.busiest_read_bytes <= 2 * p.balanced_read_bytes);
            CHECK(plan_load(ss, ts, cost, options).hash() == p.hash());  // deterministic
            // the JSON round trip gives the same plan, which check_load_plan accepts for this load
            const LoadPlan back = LoadPlan::from_json(p.to_json());
            CHECK(back == p);
            CHECK_NOTHROW(check_load_plan(back, ss, ts, &cost));
            }
          }
      }
  }
  CHECK(plans > 4000);
  CHECK(messages > 10000);
  CHECK(staged_plans > 500);
}

TEST_CASE("load plans: replicas read each byte once and the reads are balanced", "[load]") {
  // 64 chunks of 1 MiB, loaded replicated on 8 ranks: every rank reads 8 of them
  SavedTensor t{"w", {64, 262144}, DType::f32, {}};
  for (std::int64_t i = 0; i < 64; ++i) t.chunks.push_back({{i, 0}, {1, 262144}});
  const Layout target = Layout::parse(Mesh::parse("8"), {64, 262144}, DType::f32, "R");
  const LoadPlan p = plan_load(std::vector<SavedTensor>{t}, std::vector<Layout>{target}, CostModel::default_model());
  CHECK(p.total_read_bytes == 64 * 262144 * 4);
  CHECK(p.busiest_read_bytes == p.balanced_read_bytes);
  CHECK(p.messages.size() == 64 * 8);
  // a sharded target: each chunk read by the rank that owns it, nothing moves
  const Layout sharded = Layout::parse(Mesh::parse("8"), {64, 262144}, DType::f32, "S(0)");
  const LoadPlan q = plan_load(std::vector<SavedTensor>{t}, std::vector<Layout>{sharded}, CostModel::default_model());
  CHECK(q.moved_bytes == 0);
  for (const auto& r : q.reads) CHECK(r.reader == r.chunk / 8);
  CHECK_THAT(explain(q), Contains("each read once"));
  CHECK_THAT(q.to_json(), Contains("\"kind\":\"load\""));
}

TEST_CASE("load plans: bad metadata is one error naming the tensor and the chunk", "[load]") {
  const Layout target = Layout::parse(Mesh::parse("2"), {4, 4}, DType::f32, "S(0)");
  auto plan = [&](const SavedTensor& t) {
    return plan_load(std::vector<SavedTensor>{t}, std::vector<Layout>{target}, CostModel::default_model());
  };
  const SavedChunk top{{0, 0}, {2, 4}}, bottom{{2, 0}, {2, 4}};
  CHECK_NOTHROW(plan({"w", {4, 4}, DType::f32, {top, bottom}}));
  CHECK_THROWS_WITH(plan({"w", {4, 4}, DType::f32, {top}}), Contains("tensor w: the chunks cover 8 of its 16 elements"));
  CHECK_THROWS_WITH(plan({"w", {4, 4}, DType::f32, {top, {{1, 0}, {2, 4}}, {{3, 0}, {1, 4}}}}),
                    Contains("tensor w: chunks 0..2 hold more elements than the tensor's 16: some overlap"));
  CHECK_THROWS_WITH(plan({"w", {4, 4}, DType::f32, {top, {{1, 0}, {2, 4}}, {{3, 0}, {0, 4}}}}),
                    Contains("tensor w: chunk 0 (offsets 0x0 sizes 2x4) overlaps chunk 1 (offsets 1x0 sizes 2x4)"));
  CHECK_THROWS_WITH(plan({"w", {4, 4}, DType::f32, {top, {{2, 0}, {3, 4}}}}), Contains("tensor w: chunk 1 (offsets 2x0 sizes 3x4) is not within the tensor's shape 4x4 on dim 0"));
  CHECK_THROWS_WITH(plan({"w", {4, 4}, DType::f32, {top, {{2, -1}, {2, 4}}}}), Contains("chunk 1"));
  CHECK_THROWS_WITH(plan({"w", {4, 4}, DType::f32, {top, {{2, 0}, {2, INT64_MAX}}}}), Contains("chunk 1"));
  CHECK_THROWS_WITH(plan({"w", {4, 4}, DType::f32, {top, {{2}, {2}}}}), Contains("chunk 1 has 1 offsets and 1 sizes"));
  CHECK_THROWS_WITH(plan({"w", {4, 5}, DType::f32, {top, bottom}}), Contains("tensor w: saved with shape 4x5, but the target's is 4x4"));
  CHECK_THROWS_WITH(plan({"w", {4, 4}, DType::bf16, {top, bottom}}), Contains("tensor w: saved as bf16"));
  // overlapping chunks off any grid (the pairwise check)
  // chunks off a grid: a row, then two column halves (tiled), and the same with an overlap
  SavedTensor irregular{"r", {4, 4}, DType::f32, {{{0, 0}, {1, 4}}, {{1, 0}, {3, 2}}, {{1, 2}, {3, 2}}}};
  CHECK_NOTHROW(plan(irregular));
  irregular.chunks = {{{0, 0}, {2, 4}}, {{1, 0}, {3, 2}}, {{2, 2}, {2, 2}}};
  CHECK_THROWS_WITH(plan(irregular), Contains("overlap"));
  // many cuts (10,000 grid cells for 200 chunks): the pairwise check
  const Layout wide = Layout::parse(Mesh::parse("2"), {100, 100}, DType::f32, "S(0)");
  SavedTensor rows{"rows", {100, 100}, DType::f32, {}};
  for (std::int64_t i = 0; i < 100; ++i) {
    rows.chunks.push_back({{i, 0}, {1, i + 1}});
    if (i + 1 < 100) rows.chunks.push_back({{i, i + 1}, {1, 99 - i}});
  }
  auto load_rows = [&] { return plan_load(std::vector<SavedTensor>{rows}, std::vector<Layout>{wide}, CostModel::default_model()); };
  CHECK(load_rows().total_read_bytes == 100 * 100 * 4);
  rows.chunks[101] = {{50, 50}, {1, 50}};  // row 50's second chunk one column early,
  rows.chunks[103] = {{51, 53}, {1, 47}};  // row 51's one column late: as many elements, one overlap
  CHECK_THROWS_WITH(load_rows(), Contains("tensor rows: chunk 100 (offsets 50x0 sizes 1x51) overlaps chunk 101"));
  CHECK_THROWS_WITH(plan_load(std::vector<SavedTensor>{}, std::vector<Layout>{}, CostModel::default_model()), Contains("no tensors"));
  const Layout partial = Layout::parse(Mesh::parse("2"), {4, 4}, DType::f32, "P(sum)");
  CHECK_THROWS_WITH(plan_load(std::vector<SavedTensor>{{"w", {4, 4}, DType::f32, {top, bottom}}}, std::vector<Layout>{partial},
                              CostModel::default_model()),
                    Contains("not into a Partial layout"));
  LoadOptions bad;
  bad.read_bw_GBps = 0;
  CHECK_THROWS_WITH(plan_load(std::vector<SavedTensor>{{"w", {4, 4}, DType::f32, {top, bottom}}}, std::vector<Layout>{target},
                              CostModel::default_model(), bad),
                    Contains("read bandwidth 0"));
}

TEST_CASE("load plans: the tiling check off a grid against pairwise comparison, and at 65,536 chunks", "[load]") {
  // random guillotine tilings of 2-d and 3-d tensors (one dim whole in 3-d), some with one chunk
  // moved or grown: check_saved agrees with comparing every pair
  std::mt19937_64 rng(65);
  std::int64_t tiled = 0, overlapping = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const bool three = trial % 2 == 1;
    const std::vector<std::int64_t> shape = three ? std::vector<std::int64_t>{12, 3, 10} : std::vector<std::int64_t>{12, 10};
    const std::size_t b = three ? 2 : 1;
    std::vector<SavedChunk> chunks;
    auto split = [&](auto&& self, std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1, int depth) -> void {
      const bool rows = rng() % 2 == 0;
      const std::int64_t lo = rows ? r0 : c0, hi = rows ? r1 : c1;
      if (depth == 0 || hi - lo < 2) {
        SavedChunk c{std::vector<std::int64_t>(shape.size(), 0), shape};
        c.offsets[0] = r0, c.sizes[0] = r1 - r0, c.offsets[b] = c0, c.sizes[b] = c1 - c0;
        chunks.push_back(c);
        return;
      }
      const std::int64_t cut = lo + 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo - 1));
      if (rows) self(self, r0, cut, c0, c1, depth - 1), self(self, cut, r1, c0, c1, depth - 1);
      else self(self, r0, r1, c0, cut, depth - 1), self(self, r0, r1, cut, c1, depth - 1);
    };
    split(split, 0, shape[0], 0, shape[b], 6);
    if (trial % 3 == 0 && chunks.size() > 1) {  // move one chunk by one along a dim, keeping its size
      auto& c = chunks[rng() % chunks.size()];
      const std::size_t d = rng() % 2 == 0 ? 0 : b;
      if (c.offsets[d] > 0) --c.offsets[d];
      else if (c.offsets[d] + c.sizes[d] < shape[d]) ++c.offsets[d];
    }
    bool pairwise = false;
    for (std::size_t i = 0; i < chunks.size() && !pairwise; ++i)
      for (std::size_t j = i + 1; j < chunks.size() && !pairwise; ++j) {
        bool meet = true;
        for (std::size_t d = 0; d < shape.size(); ++d)
          meet = meet && chunks[i].offsets[d] < chunks[j].offsets[d] + chunks[j].sizes[d] &&
                 chunks[j].offsets[d] < chunks[i].offsets[d] + chunks[i].sizes[d];
        pairwise = meet;
      }
    const Layout target = Layout::parse(Mesh::parse("2"), shape, DType::f32, "S(0)");
    const SavedTensor t{"t", shape, DType::f32, chunks};
    INFO("trial " << trial << ", " << chunks.size() << " chunks");
    if (pairwise) {
      CHECK_THROWS_WITH(check_saved(t, target), Catch::Contains("overlap"));
      ++overlapping;
    } else {
      // no two meet: the check passes when they cover the tensor, else names the missing elements
      try {
        check_saved(t, target);
        ++tiled;
      } catch (const InputError& e) {
        CHECK_THAT(e.what(), Catch::Contains("some are missing"));
      }
    }
  }
  CHECK(tiled > 100);
  CHECK(overlapping > 30);
  // 65,536 chunks off any grid: 256 rows, each cut into 256 chunks at its own offsets (rows of
  // 65,536 columns): too many grid cells, a sweep in O(n log n) (the pairwise path took 5.8 s)
  const std::int64_t R = 256, C = 65536;
  SavedTensor big{"big", {R, C}, DType::f32, {}};
  for (std::int64_t r = 0; r < R; ++r) {
    const std::int64_t shift = (r * 37) % 256;  // row r's cuts at shift + 256 k
    big.chunks.push_back({{r, 0}, {1, shift}});
    for (std::int64_t k = 0; k < 255; ++k) big.chunks.push_back({{r, shift + 256 * k}, {1, 256}});
    big.chunks.push_back({{r, shift + 256 * 255}, {1, C - shift - 256 * 255}});
  }
  const Layout big_target = Layout::parse(Mesh::parse("2"), {R, C}, DType::f32, "S(0)");
  CHECK_NOTHROW(check_saved(big, big_target));
  big.chunks[5000].offsets[1] += 1;  // one chunk a column late: it meets its right neighbour
  CHECK_THROWS_WITH(check_saved(big, big_target), Catch::Contains("overlaps chunk"));
}

TEST_CASE("load plans: JSON from elsewhere is validated, and checked against the load", "[load]") {
  const Layout target = Layout::parse(Mesh::parse("2x2"), {8, 6}, DType::bf16, "RS(0)");
  SavedTensor t{"w", {8, 6}, DType::bf16, {{{0, 0}, {4, 6}}, {{4, 0}, {4, 3}}, {{4, 3}, {4, 3}}, {{8, 0}, {0, 6}}}};
  const std::vector<SavedTensor> ss{t};
  const std::vector<Layout> ts{target};
  const LoadPlan p = plan_load(ss, ts, CostModel::default_model());
  const std::string text = p.to_json();
  REQUIRE(LoadPlan::from_json(text) == p);
  auto edit = [&](const std::string& from, const std::string& to) { return edited(text, from, to); };
  // an edited entry: the hash no longer matches
  CHECK_THROWS_WITH(LoadPlan::from_json(edit("\"elements\":", "\"elements\":1")), Contains("edited or corrupted"));
  // fields out of range or of the wrong type, each named
  CHECK_THROWS_WITH(LoadPlan::from_json(edit("\"reader\":", "\"reader\":9")), Contains("reads[].reader"));
  CHECK_THROWS_WITH(LoadPlan::from_json(edit("\"from\":", "\"from\":7")), Contains("messages[].from"));
  CHECK_THROWS_WITH(LoadPlan::from_json(edit("\"kind\":\"load\"", "\"kind\":\"plan\"")), Contains("kind"));
  CHECK_THROWS_WITH(LoadPlan::from_json(edit("\"inter_host\":false", "\"inter_host\":0")), Contains("inter_host"));
  CHECK_THROWS_WITH(LoadPlan::from_json(edit("\"read_bw_GBps\":", "\"read_bw_GBps\":-")), Contains("read_bw_GBps"));
  CHECK_THROWS_WITH(LoadPlan::from_json(edit("\"messages\":", "\"massages\":")), Contains("lacks 'messages'"));
  CHECK_THROWS_WITH(LoadPlan::from_json("[1]"), Contains("not a JSON object"));
  CHECK_THROWS_AS(LoadPlan::from_json("{\"kind\":"), InputError);
  // a well-formed plan of another load: check_load_plan names the chunk
  LoadPlan other = p;
  std::swap(other.messages[0].from, other.messages[1].to);
  CHECK_THROWS_WITH(check_load_plan(other, ss, ts), Contains("tensor w chunk 0"));
  LoadPlan fewer = p;
  fewer.reads.pop_back();
  CHECK_THROWS_WITH(check_load_plan(fewer, ss, ts), Contains("2 reads for the 3 saved chunks"));
  LoadPlan extra = p;
  extra.messages.push_back(extra.messages.back());
  CHECK_THROWS_WITH(check_load_plan(extra, ss, ts), Contains("messages more than"));
  const Layout elsewhere = Layout::parse(Mesh::parse("4"), {8, 6}, DType::bf16, "S(0)");
  CHECK_THROWS_WITH(check_load_plan(p, ss, std::vector<Layout>{elsewhere}), Contains("made for mesh"));
  // every derived figure recomputed from the entries (the times under the cost model)
  const CostModel model = CostModel::default_model();
  CHECK_NOTHROW(check_load_plan(p, ss, ts, &model));
  auto figure = [&](auto&& change, const char* what) {
    LoadPlan q = p;
    change(q);
    CHECK_THROWS_WITH(check_load_plan(q, ss, ts, &model), Contains(what));
  };
  figure([](LoadPlan& q) { q.moved_bytes += 2; }, "'moved_bytes' is");
  figure([](LoadPlan& q) { q.balanced_read_bytes -= 1; }, "'balanced_read_bytes' is");
  figure([](LoadPlan& q) { q.busiest_transfer_bytes *= 2; }, "'busiest_transfer_bytes' is");
  figure([](LoadPlan& q) { q.busiest_peers += 1; }, "'busiest_peers' is");
  figure([](LoadPlan& q) { q.gathered_bytes = 5; }, "'gathered_bytes' is");
  figure([](LoadPlan& q) { q.post_us = 3; }, "'post_us' is");
  figure([](LoadPlan& q) { q.read_us *= 2; }, "'read_us' is");
  figure([](LoadPlan& q) { q.transfer_us += 1; }, "'transfer_us' is");
  figure([](LoadPlan& q) { q.inter_host = !q.inter_host; }, "'inter_host' is");
  figure([](LoadPlan& q) { q.cost_model = "mine"; }, "priced under cost model \"mine\", not \"default\"");
  figure([](LoadPlan& q) { q.storage.read_bw_GBps *= 2; }, "'read_us' is");
  // show: one tensor's chunks, readers and receivers
  const std::string shown = show_tensor(p, ss, 0);
  CHECK_THAT(shown, Contains("w: shape 8x6 bf16, 4 saved chunk(s)"));
  CHECK_THAT(shown, Contains("chunk    0 (offsets 0x0 sizes 4x6): read by rank"));
  CHECK_THAT(shown, !Contains("chunk    3"));  // empty: not read
  CHECK_THROWS_WITH(show_tensor(p, ss, 1), Contains("tensor index 1"));
}

TEST_CASE("load plans: reads priced with the profile's storage field unless overridden", "[load]") {
  const Layout target = Layout::parse(Mesh::parse("2"), {4, 4}, DType::f32, "S(0)");
  const std::vector<SavedTensor> ss{{"w", {4, 4}, DType::f32, {{{0, 0}, {4, 4}}}}};
  const std::vector<Layout> ts{target};
  CostModel slow = CostModel::default_model();
  slow.storage = {0.5, 2000};
  const LoadPlan a = plan_load(ss, ts, CostModel::default_model()), b = plan_load(ss, ts, slow);
  CHECK(a.storage == StorageParams{});
  CHECK(b.storage == StorageParams{0.5, 2000});
  CHECK(b.read_us > a.read_us);
  LoadOptions o;
  o.read_alpha_us = 7;
  CHECK(plan_load(ss, ts, slow, o).storage == StorageParams{0.5, 7});
  // the profile's JSON carries it (only when set), strictly validated
  const CostModel back = CostModel::from_json(slow.to_json());
  CHECK(back.storage == slow.storage);
  CHECK(back.fingerprint() != CostModel::default_model().fingerprint());
  CHECK(CostModel::default_model().to_json().find("storage") == std::string::npos);
  std::string j = slow.to_json();
  j.replace(j.find("\"read_bw_GBps\":0.5"), 18, "\"read_bw_GBps\":0.0");
  CHECK_THROWS_WITH(CostModel::from_json(j), Contains("storage.read_bw_GBps"));
  j = slow.to_json();
  j.replace(j.find("\"read_alpha_us\""), 15, "\"read_alpha_ms\"");
  CHECK_THROWS_WITH(CostModel::from_json(j), Contains("unknown field"));
}

TEST_CASE("load plans: replicas gather inside the mesh where the cost model prices it lower", "[load]") {
  // saved FSDP on 8 ranks (8 row chunks); loaded as TP on 2 replicated over 4 (mesh dp=4,tp=2)
  SavedTensor t{"w", {2048, 2048}, DType::bf16, {}};
  for (std::int64_t i = 0; i < 8; ++i) t.chunks.push_back({{i * 256, 0}, {256, 2048}});
  const Mesh mesh = Mesh::parse("dp=4,tp=2");
  const Layout target = Layout::parse(mesh, {2048, 2048}, DType::bf16, "RS(1)");
  const std::vector<SavedTensor> ss{t};
  const std::vector<Layout> ts{target};
  CostModel fast = CostModel::default_model();  // collectives at 4x the point-to-point bandwidth
  fast.intra.bw_GBps *= 4;
  fast.name = "fast-collectives";
  const LoadPlan direct = plan_load(ss, ts, fast, LoadOptions{{}, {}, Fanout::direct});
  const LoadPlan best = plan_load(ss, ts, fast);
  CHECK(direct.staged.empty());
  REQUIRE(best.staged == std::vector<std::int32_t>{0});
  CHECK(best.total_us < direct.total_us);
  CHECK(best.moved_bytes < direct.moved_bytes);  // each element crosses once before the gather
  CHECK(direct.gathered_bytes == 0);
  CHECK(best.gathered_bytes == 8 * (2048 * 1024 - 512 * 1024) * 2);  // each rank: its 2048x1024 block less its 512 rows
  CHECK(best.post.plan(0).src.placements_str() == "S(0)S(1)");
  CHECK(simulate(best.post).verified);
  CHECK_THAT(explain(best), Contains("fan-out: 1 tensor(s) received sharded"));
  CHECK_THAT(show_tensor(best, ss, 0), Contains("received as S(0)S(1), then gathered to RS(1)"));
  // under the default profile (collectives and point to point at one bandwidth) the cheapest is
  // whichever the model prices lower; both are exact, and `gather` forces the fan-out
  const LoadPlan dflt = plan_load(ss, ts, CostModel::default_model());
  const LoadPlan forced = plan_load(ss, ts, CostModel::default_model(), LoadOptions{{}, {}, Fanout::gather});
  CHECK(dflt.total_us <= forced.total_us + 1e-9);
  CHECK(forced.staged == std::vector<std::int32_t>{0});
  // the JSON round trip keeps the fan-out, and check_load_plan checks it against the load
  const LoadPlan back = LoadPlan::from_json(best.to_json());
  CHECK(back == best);
  CHECK_NOTHROW(check_load_plan(back, ss, ts));
  const Layout other = Layout::parse(mesh, {2048, 2048}, DType::bf16, "RS(0)");
  CHECK_THROWS_WITH(check_load_plan(back, ss, std::vector<Layout>{other}), Contains("the post plan ends in"));
  const std::string text = best.to_json();
  auto edit = [&](const std::string& from, const std::string& to) { return edited(text, from, to); };
  CHECK_THROWS_WITH(LoadPlan::from_json(edit("\"staged\":[0]", "\"staged\":[]")), Contains("'post' must be null"));
  CHECK_THROWS_WITH(LoadPlan::from_json(edit("\"staged\":[0]", "\"staged\":[0,0]")), Contains("out of order or repeated"));
  CHECK_THROWS_WITH(LoadPlan::from_json(edit("\"staged\":[0]", "\"staged\":[1]")), Contains("edited or corrupted"));
  CHECK_THROWS_AS(LoadPlan::from_json(edit("\"stages\":", "\"stagez\":")), InputError);  // the batch as BatchPlan reads it
  // fan-out names
  CHECK(parse_fanout("gather") == Fanout::gather);
  CHECK_THROWS_WITH(parse_fanout("broadcast"), Contains("fan-out \"broadcast\" is not cheapest, direct or gather"));
}

TEST_CASE("load plans: a RaggedShard target loads through a plain intermediate and the ragged plan", "[load]") {
  const CostModel cost = CostModel::default_model();
  const Mesh mesh = Mesh::parse("4");
  // a plain target is its own intermediate
  const Layout plain = Layout::parse(mesh, {8, 6}, DType::f32, "S(0)");
  CHECK(ragged_intermediate(RaggedLayout(plain), cost) == plain);
  // large pieces: received sharded (each rank a quarter), then the ragged plan moves the difference
  const RaggedLayout big = RaggedLayout::parse(mesh, {4096, 1024}, DType::f32, "RaggedShard((0,),(1,3,0,4))");
  const Layout via = ragged_intermediate(big, cost);
  CHECK(via.placements_str() == "S(0)");
  // pieces that are torch's even chunks: received as them, the ragged plan only relabels
  const RaggedLayout even = RaggedLayout::parse(mesh, {4, 2}, DType::f32, "RaggedShard((0,),(1,1,1,1))");
  CHECK(ragged_intermediate(even, cost).placements_str() == "S(0)");
  // a tiny single owner: every rank receives the block (one small message beats a gather after it)
  const RaggedLayout owner = RaggedLayout::parse(mesh, {4, 2}, DType::f32, "RaggedShard((0,),(0,0,1,0))");
  CHECK(ragged_intermediate(owner, cost).placements_str() == "R");
  // the two steps: the load plan's messages are the intermediate's (check_load_plan), then the
  // ragged plan from it to the target (run exactly on threads in [ragged_exec]; the Python round
  // trip checks the loaded bits)
  SavedTensor t{"w", {4096, 1024}, DType::f32, {}};
  for (std::int64_t i = 0; i < 3; ++i) t.chunks.push_back({{i * 1366, 0}, {std::min<std::int64_t>(1366, 4096 - i * 1366), 1024}});
  const std::vector<SavedTensor> ss{t};
  const std::vector<Layout> ts{via};
  const LoadPlan p = plan_load(ss, ts, cost);
  CHECK_NOTHROW(check_load_plan(p, ss, ts));
  const RaggedPlan rp = plan_ragged(RaggedLayout(via), big, cost);
  CHECK(rp.dst == big);
  CHECK(!rp.stages.empty());
}

// The published nccl-tests logs (../shared/data/nccl-tests, outside the repository): run where present.
TEST_CASE("load plans: with a profile fitted to H100 NVLink logs, replicas gather inside the mesh", "[load]") {
  const std::filesystem::path dir = DTENSOR_SHARED_DATA "/nccl-tests";
  if (!std::filesystem::exists(dir)) {
    WARN("skipped: " << dir << " is not here (the published logs live outside the repository)");
    return;
  }
  // all_gather and sendrecv measured on one 8x H100 node (the same machine, the same day)
  const std::vector<tune::Log> logs{tune::read_nccl_log((dir / "h100x8-nvlink-all_gather.txt").string()),
                                    tune::read_nccl_log((dir / "h100x8-nvlink-sendrecv.txt").string())};
  const CostModel h100 = tune::fit_profile(logs, CostModel::default_model()).model;
  // 7 bf16 matrices (4096x4096, 11008x4096) saved FSDP on 8, loaded as TP on 2 replicated over 4
  const Mesh mesh = Mesh::parse("dp=4,tp=2");
  std::vector<SavedTensor> saved;
  std::vector<Layout> targets;
  for (int i = 0; i < 7; ++i) {
    const std::int64_t rows = i < 4 ? 4096 : 11008;
    SavedTensor t{"w" + std::to_string(i), {rows, 4096}, DType::bf16, {}};
    for (std::int64_t k = 0; k < 8; ++k) t.chunks.push_back({{k * rows / 8, 0}, {rows / 8, 4096}});
    saved.push_back(t);
    targets.push_back(Layout::parse(mesh, {rows, 4096}, DType::bf16, "RS(0)"));
  }
  const LoadPlan direct = plan_load(saved, targets, h100, LoadOptions{{}, {}, Fanout::direct});
  const LoadPlan best = plan_load(saved, targets, h100);
  CHECK(best.staged.size() == 7);  // the all-gather's fitted bandwidth beats send/recv's
  CHECK(best.transfer_us + best.post_us < direct.transfer_us);
  // the default profile (one bandwidth for both) keeps point to point
  CHECK(plan_load(saved, targets, CostModel::default_model()).staged.empty());
}

namespace {

// A random load on `mesh`: 1-4 tensors of 1-2 dims, their chunks on a random grid, targets with
// replicas (Shard or Replicate per mesh dim).
std::pair<std::vector<SavedTensor>, std::vector<Layout>> random_load(std::mt19937_64& rng, const Mesh& mesh) {
  auto uni = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  std::vector<SavedTensor> ss;
  std::vector<Layout> ts;
  for (std::int64_t t = 0, n = uni(1, 4); t < n; ++t) {
    const auto nd = uni(1, 2);
    std::vector<std::int64_t> shape;
    for (std::int64_t d = 0; d < nd; ++d) shape.push_back(uni(1, 3) * 8 + uni(0, 3));
    SavedTensor s{fmt::format("t{}", t), shape, DType::bf16, {}};
    std::vector<std::vector<std::int64_t>> cuts;
    for (auto z : shape) {
      std::vector<std::int64_t> c{0, z};
      for (int k = 0; k < 3; ++k) c.push_back(uni(1, z - 1));
      std::sort(c.begin(), c.end());
      c.erase(std::unique(c.begin(), c.end()), c.end());
      cuts.push_back(c);
    }
    std::vector<std::size_t> at(shape.size(), 0);
    while (true) {
      SavedChunk ch;
      for (std::size_t d = 0; d < shape.size(); ++d) ch.offsets.push_back(cuts[d][at[d]]), ch.sizes.push_back(cuts[d][at[d] + 1] - cuts[d][at[d]]);
      s.chunks.push_back(ch);
      std::size_t d = shape.size();
      while (d-- > 0 && ++at[d] + 1 == cuts[d].size()) at[d] = 0;
      if (d == static_cast<std::size_t>(-1)) break;
    }
    std::string pl;
    for (int m = 0; m < mesh.ndim(); ++m) pl += uni(0, 2) == 0 ? fmt::format("S({})", uni(0, nd - 1)) : std::string("R");
    ts.push_back(Layout::parse(mesh, shape, DType::bf16, pl));
    ss.push_back(std::move(s));
  }
  return {std::move(ss), std::move(ts)};
}

}  // namespace

TEST_CASE("load plans: the candidates' floors only prune: cheapest is never above direct or gather", "[load]") {
  // random requests (chunks on a random grid, targets with replicas on 1-3-d meshes), three cost
  // models (collectives 1x, 4x and 1/4x the point-to-point bandwidth, so each candidate wins
  // somewhere): the cheapest plan's total is at most the forced direct's and gather's, and it is
  // one of the candidates (direct's total, or a plan that stages)
  std::mt19937_64 rng(66);
  auto uni = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  const std::vector<std::string> meshes{"4", "2x4", "2x2x2", "3x2", "8", "4x4"};
  std::vector<CostModel> models(3, CostModel::default_model());
  models[1].intra.bw_GBps *= 4, models[1].inter.bw_GBps *= 4, models[1].name = "fast-collectives";
  models[2].intra.bw_GBps /= 4, models[2].inter.bw_GBps /= 4, models[2].name = "slow-collectives";
  int staged = 0, direct_won = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const Mesh mesh = Mesh::parse(meshes[static_cast<std::size_t>(uni(0, static_cast<std::int64_t>(meshes.size()) - 1))]);
    auto [ss, ts] = random_load(rng, mesh);
    for (const auto& cost : models) {
      const LoadPlan best = plan_load(ss, ts, cost);
      const LoadPlan direct = plan_load(ss, ts, cost, LoadOptions{{}, {}, Fanout::direct});
      const LoadPlan gather = plan_load(ss, ts, cost, LoadOptions{{}, {}, Fanout::gather});
      INFO(mesh.str() << " " << cost.name << " trial " << trial);
      REQUIRE(best.total_us <= direct.total_us + 1e-9);
      REQUIRE(best.total_us <= gather.total_us + 1e-9);
      REQUIRE((best == direct || !best.staged.empty()));
      staged += best.staged.empty() ? 0 : 1;
      direct_won += best == direct ? 1 : 0;
    }
  }
  CHECK(staged > 5);
  CHECK(direct_won > 20);
}

TEST_CASE("load plans: a rank's part planned alone is its part of the whole plan", "[load]") {
  // random loads whose tensors repeat (a model's layers: the same shape, chunks and target, in
  // bf16 or f32; the same chunks into another target), under two cost models and the three
  // fan-outs: every rank's plan_load_part equals the whole plan's part, with the same decision
  // hash; the whole plan passes check_load_plan (its figures recomputed message by message, against
  // the figures the planner summed per needer list)
  std::mt19937_64 rng(71);
  auto uni = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  const std::vector<std::string> meshes{"4", "2x4", "2x2x2", "3x2", "8", "4x4"};
  std::vector<CostModel> models(2, CostModel::default_model());
  models[1].intra.bw_GBps /= 4, models[1].inter.bw_GBps /= 4, models[1].name = "slow-collectives";
  int repeats = 0, parts = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const Mesh mesh = Mesh::parse(meshes[static_cast<std::size_t>(uni(0, static_cast<std::int64_t>(meshes.size()) - 1))]);
    auto [ss, ts] = random_load(rng, mesh);
    for (std::size_t t = 0, n = ss.size(); t < n; ++t)
      for (std::int64_t copy = 0, k = uni(0, 3); copy < k; ++copy) {
        SavedTensor s = ss[t];
        s.name += fmt::format(".copy{}", copy);
        Layout l = ts[t];
        if (uni(0, 2) == 0) {  // another dtype
          s.dtype = DType::f32;
          l = Layout(l.mesh(), l.shape(), DType::f32, l.sharding());
        } else if (uni(0, 3) == 0) {  // another target
          l = Layout::parse(mesh, l.shape(), l.dtype(), std::string(static_cast<std::size_t>(mesh.ndim()), 'R').c_str());
        }
        ss.push_back(std::move(s));
        ts.push_back(std::move(l));
        ++repeats;
      }
    for (const auto& cost : models)
      for (Fanout fo : {Fanout::cheapest, Fanout::direct, Fanout::gather}) {
        const LoadOptions o{{}, {}, fo};
        const LoadPlan whole = plan_load(ss, ts, cost, o);
        INFO(mesh.str() << " " << cost.name << " " << to_string(fo) << " trial " << trial);
        check_load_plan(whole, ss, ts, &cost);
        for (std::int64_t r = 0; r < mesh.num_ranks(); ++r) {
          const LoadPart part = plan_load_part(ss, ts, r, cost, o);
          REQUIRE(part == whole.part(r));
          REQUIRE(part.decision_hash == whole.decision_hash());
          ++parts;
        }
      }
  }
  CHECK(repeats > 60);
  CHECK(parts > 1000);
  const Mesh mesh = Mesh::parse("2x2");
  const auto [ss, ts] = random_load(rng, mesh);
  CHECK_THROWS_WITH(plan_load_part(ss, ts, 4, CostModel::default_model()), Catch::Contains("rank 4 is not on the load's mesh"));
  CHECK_THROWS_WITH(plan_load(ss, ts, CostModel::default_model()).part(-1), Catch::Contains("rank -1"));
}

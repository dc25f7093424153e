// Golden structure of the plan pictures: elements per rank and per state, blocks of one state
// never overlap, and the blocks a rank appears in cover exactly what it owns.
#include <catch2/catch.hpp>
#include <map>
#include <regex>
#include <set>

#include "dtensor/viz.hpp"

using namespace dtensor;

namespace {

struct SvgBlock {
  int state;
  std::int64_t r0, r1, c0, c1;
  std::vector<std::int64_t> ranks;
};

std::vector<SvgBlock> blocks_of(const std::string& svg) {
  std::vector<SvgBlock> out;
  const std::regex re(R"re(<g class="blk" data-state="(\d+)" data-ranks="([\d ]*)" data-box="(\d+) (\d+) (\d+) (\d+)">)re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it) {
    SvgBlock b{std::stoi((*it)[1]), std::stoll((*it)[3]), std::stoll((*it)[4]), std::stoll((*it)[5]), std::stoll((*it)[6]), {}};
    std::stringstream ss((*it)[2].str());
    std::int64_t r;
    while (ss >> r) b.ranks.push_back(r);
    out.push_back(b);
  }
  return out;
}

std::size_t count(const std::string& s, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

void check_plan(const char* mesh, std::vector<std::int64_t> shape, const char* from, const char* to) {
  const Mesh m = Mesh::parse(mesh);
  const Plan plan = plan_redistribution(Layout::parse(m, shape, DType::f32, from), Layout::parse(m, shape, DType::f32, to),
                                        CostModel::default_model());
  viz::Options opt;
  const std::string svg = viz::render_svg(plan, opt);
  INFO(mesh << " " << from << " -> " << to << " via " << plan.trace());
  CHECK(count(svg, "<g class=\"state\"") == plan.steps.size() + 1);
  CHECK(count(svg, "<g class=\"step\"") == plan.steps.size());
  CHECK(count(svg, "<g class=\"rank\"") == static_cast<std::size_t>(m.num_ranks()));
  CHECK(count(svg, "<g class=\"bar\" data-step") == plan.steps.size());
  const auto blocks = blocks_of(svg);
  std::vector<Layout> states{plan.src};
  for (const auto& s : plan.steps) states.emplace_back(m, shape, DType::f32, s.to);
  for (std::size_t k = 0; k < states.size(); ++k) {
    std::vector<SvgBlock> bs;
    for (const auto& b : blocks)
      if (b.state == static_cast<int>(k)) bs.push_back(b);
    // no two blocks of one state overlap
    for (std::size_t i = 0; i < bs.size(); ++i)
      for (std::size_t j = i + 1; j < bs.size(); ++j) {
        const bool overlap = bs[i].r0 < bs[j].r1 && bs[j].r0 < bs[i].r1 && bs[i].c0 < bs[j].c1 && bs[j].c0 < bs[i].c1;
        CHECK_FALSE(overlap);
      }
    // each rank's blocks cover exactly its owned rows x cols
    std::map<std::int64_t, std::int64_t> area;
    for (const auto& b : bs)
      for (auto r : b.ranks) area[r] += (b.r1 - b.r0) * (b.c1 - b.c0);
    for (std::int64_t r = 0; r < m.num_ranks(); ++r) {
      const auto sets = states[k].indices(m.coord_of_rank(r));
      std::int64_t want = sets[0].size() * sets[1].size();
      for (const auto& s : sets)
        if (s.empty()) want = 0;
      CHECK(area[r] == want);
    }
  }
  const std::string html = viz::render_html(plan, opt);
  CHECK(count(html, "<li class=\"rank\"") == static_cast<std::size_t>(m.num_ranks()));
  CHECK(count(html, "<li class=\"step\"") == std::max<std::size_t>(plan.steps.size(), 1));
  // self-contained: no external script, stylesheet, image or font
  CHECK(html.find("src=") == std::string::npos);
  CHECK(html.find("href=\"http") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  CHECK(html.find("@import") == std::string::npos);
  CHECK_THAT(viz::render_dot(plan, CostModel::default_model()), Catch::Matchers::StartsWith("digraph"));
}

}  // namespace

TEST_CASE("show: SVG structure on even, uneven, strided, empty and Partial layouts", "[viz]") {
  check_plan("2x2", {9, 5}, "S(0)S(1)", "RS(0)");
  check_plan("4x2", {15, 5}, "_S(0, 2)S(0)", "S(1)R");
  check_plan("4x2", {39, 2}, "_S(0, 3)_S(0, 4)", "RR");
  check_plan("2x3", {8, 8}, "PP", "S(0)S(1)");
  check_plan("2x2", {4096, 4096}, "S(0)[0]S(0)[1]", "S(0)[1]S(0)[0]");
  check_plan("4", {3, 7}, "S(0)", "S(1)");
}

TEST_CASE("show: large meshes stay drawable", "[viz]") {
  const Mesh m = Mesh::parse("4x4x8");
  const Plan plan = plan_redistribution(Layout::parse(m, {8192, 8192}, DType::bf16, "S(0)S(1)S(1)"),
                                        Layout::parse(m, {8192, 8192}, DType::bf16, "S(1)RS(0)"), CostModel::default_model());
  const auto svg = viz::render_svg(plan, viz::Options{});
  CHECK(count(svg, "<g class=\"rank\"") == 128);
  CHECK(blocks_of(svg).size() < 2000);
  const auto text = viz::render_text(plan, viz::Options{}, 80);
  CHECK_THAT(text, Catch::Matchers::Contains("more columns"));
}

TEST_CASE("show: the mesh is a labelled grid of grids", "[viz]") {
  const auto svg_of = [](const char* mesh, const char* from, const char* to) {
    const Mesh m = Mesh::parse(mesh);
    return viz::render_svg(plan_redistribution(Layout::parse(m, {16, 8}, DType::f32, from), Layout::parse(m, {16, 8}, DType::f32, to),
                                               CostModel::default_model()),
                           viz::Options{});
  };
  // 3-d, named: one small grid per pp coordinate, rows dp, columns tp, each labelled
  const std::string s3 = svg_of("pp=2,dp=2,tp=4", "S(0)RR", "RRS(1)");
  CHECK(count(s3, "<g class=\"mesh-grid\"") == 2);
  CHECK(s3.find(">pp=0</text>") != std::string::npos);
  CHECK(s3.find(">pp=1</text>") != std::string::npos);
  CHECK(count(s3, ">dp=1</text>") == 2);  // a row header in each small grid
  CHECK(count(s3, ">tp=3</text>") == 2);  // a column header in each small grid
  CHECK(s3.find("columns tp, rows dp, one grid per pp") != std::string::npos);
  // rank 13 sits at pp=1, dp=1, tp=1 (row-major): its cell says so
  CHECK(s3.find("<title>rank 13 coord (1,1,1)</title>") != std::string::npos);
  // 4-d, unnamed: grids for every (d0, d1), names explained
  const std::string s4 = svg_of("2x3x2x2", "S(0)RRR", "RRRS(1)");
  CHECK(count(s4, "<g class=\"mesh-grid\"") == 6);
  CHECK(s4.find(">d0=1, d1=2</text>") != std::string::npos);
  CHECK(s4.find("(dK = mesh dim K)") != std::string::npos);
  // 1-d: one row, column headers only
  const std::string s1 = svg_of("4", "S(0)", "R");
  CHECK(count(s1, "<g class=\"mesh-grid\"") == 1);
  CHECK(s1.find(">d0=3</text>") != std::string::npos);
}

TEST_CASE("tune validate's HTML report: every case, the chosen plan marked, input escaped", "[viz]") {
  using namespace dtensor;
  tune::ValidationReport r;
  r.profile = "fitted <h100>";
  r.mesh = "2x4";
  r.backend = "threads";
  r.clock = "virtual clock (default)";
  r.note = "8 ranks share 2 cores";
  tune::CaseResult c;
  c.name = "transpose 64 KiB";
  c.what = "64x256 f32: S(0) -> S(1)";
  c.rounds = 8;
  c.pairs_compared = 1;
  c.pairs_agreeing = 0;
  c.regret = 0.25;
  tune::PlanResult chosen{"chosen", {"pytorch edges"}, true, "S(0)->S(1)  [all_to_all 0]", 10, {12, 11, 13, 10, 14, 8}, -1.0 / 6, true};
  tune::PlanResult other{"runner-up", {}, false, "S(0)-->R->S(1)", 11, {9.6, 9, 10, 8, 11, 8}, 0.14, true};
  c.plans = {chosen, other};
  tune::CaseResult skipped;
  skipped.name = "partial -> shard";
  skipped.skipped = "no plan fits in 16 peak bytes";
  r.cases = {c, skipped};
  const auto html = viz::render_validate_report(r);
  CHECK(html.find("fitted &lt;h100&gt;") != std::string::npos);
  CHECK(html.find("<h100>") == std::string::npos);
  CHECK(html.find("&#9733; chosen = pytorch edges") != std::string::npos);
  CHECK(html.find("not run: no plan fits in 16 peak bytes") != std::string::npos);
  CHECK(html.find("largest regret 25.0%") != std::string::npos);
  CHECK(html.find("8 ranks share 2 cores") != std::string::npos);
  // one predicted and one measured bar per plan of the case that ran
  std::size_t bars = 0;
  for (auto p = html.find("class=\"measured\""); p != std::string::npos; p = html.find("class=\"measured\"", p + 1)) ++bars;
  CHECK(bars == 2);
}

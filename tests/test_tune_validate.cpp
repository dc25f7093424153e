// tune validate: the measurement protocol, the candidates, and the measure -> fit -> validate
// loop closed on the virtual clock (no hardware): with the truth the profile, the model picks
// the fastest plan; with another truth the report's regret is the truth's, and fitting on
// measure's logs from that truth brings it back.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "dtensor/error.hpp"
#include "dtensor/planner.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/tune.hpp"
#include "dtensor/tune_validate.hpp"

using namespace dtensor;
using Catch::Matchers::Contains;

namespace {

tune::ValidationReport validate_on_clock(const Mesh& mesh, const CostModel& profile, const CostModel& truth,
                                         const std::vector<tune::ValidateCase>& cases, double noise = 0,
                                         const tune::ValidateOptions& vo = {}) {
  WorldOptions wo;
  wo.clock_profile = std::make_shared<const CostModel>(truth);
  wo.clock_noise = noise;
  SimulatedWorld world(mesh, wo);
  std::vector<tune::ValidationReport> reports(static_cast<std::size_t>(mesh.num_ranks()));
  run_rank_threads(world, [&](std::int64_t rank, Communicator& comm) {
    reports[static_cast<std::size_t>(rank)] = tune::validate(comm, profile, cases, vo, [&world, rank] { return world.clock_us(rank); });
  });
  for (const auto& r : reports) REQUIRE(r.to_json() == reports.front().to_json());  // every rank the same report
  return reports.front();
}

// A cluster whose inter-host link is twice as slow, with twice the latency.
CostModel slow_inter(CostModel m) {
  m.name = "truth";
  m.inter.alpha_us *= 2;
  m.inter.alpha_per_peer_us *= 2;
  m.inter.bw_GBps /= 2;
  m.inter.p2p_bw_GBps /= 2;
  return m;
}

CostModel four_per_host() {
  CostModel m = CostModel::default_model();
  m.devices_per_host = 4;  // on a 2x4 mesh, mesh dim 0 crosses hosts
  return m;
}

// The two smallest predictions of a case.
std::pair<double, double> two_best(const tune::CaseResult& c) {
  std::vector<double> p;
  for (const auto& x : c.plans) p.push_back(x.predicted_us);
  std::sort(p.begin(), p.end());
  return {p[0], p.size() > 1 ? p[1] : 1e300};
}

}  // namespace

TEST_CASE("rounds: rotated order, medians, quartiles and the 95% interval", "[tune]") {
  tune::Rounds r(3);
  CHECK(r.order() == std::vector<std::size_t>{0, 1, 2});
  for (int i = 0; i < 8; ++i) {
    CHECK_FALSE(r.done());
    const double t = 10 + i;  // candidate 0: 10..17, candidate 1 constant, candidate 2 wide
    r.add(std::vector<double>{t, 5, i % 2 == 0 ? 1.0 : 100.0});
    CHECK(r.order().front() == static_cast<std::size_t>((i + 1) % 3));
  }
  CHECK(r.rounds() == 8);
  const auto s = r.summary(0);
  CHECK(s.median_us == Approx(13.5));
  CHECK(s.q1_us == Approx(11.75));
  CHECK(s.q3_us == Approx(15.25));
  // n = 8: the interval is the 1st and 8th order statistics
  CHECK(s.ci_low_us == 10);
  CHECK(s.ci_high_us == 17);
  CHECK(r.summary(1).ci_low_us == 5);
  CHECK_FALSE(r.converged());  // candidate 0's interval is 26% of its median
  // constant times converge at the fewest rounds
  tune::Rounds c(2);
  for (int i = 0; i < 8; ++i) c.add(std::vector<double>{3, 4});
  CHECK(c.converged());
  CHECK(c.done());
  // spread that never narrows stops at the most rounds
  tune::Rounds w(1, {8, 12, 0.05});
  for (int i = 0; i < 12; ++i) w.add(std::vector<double>{i % 2 == 0 ? 1.0 : 2.0});
  CHECK(w.done());
  CHECK_FALSE(w.converged());
  CHECK_THROWS_WITH(tune::Rounds(0), Contains("at least one plan"));
  CHECK_THROWS_WITH(tune::Rounds(1, {4, 50, 0.05}), Contains("min rounds 4 is below 8"));
  CHECK_THROWS_WITH(tune::Rounds(1, {8, 7, 0.05}), Contains("max rounds 7"));
  CHECK_THROWS_WITH(tune::Rounds(1, {8, 50, 0.0}), Contains("confidence target 0"));
  CHECK_THROWS_WITH(c.add(std::vector<double>{1}), Contains("a round of 1 times for 2 plans"));
  CHECK_THROWS_WITH(c.add(std::vector<double>{1, std::nan("")}), Contains("a measured time of nan"));
  // a deterministic clock (a simulation): one round is the median, and is done
  tune::RoundOptions det;
  det.min_rounds = 1;
  det.deterministic = true;
  tune::Rounds d(2, det);
  CHECK_FALSE(d.done());
  d.add(std::vector<double>{3, 4});
  CHECK(d.converged());
  CHECK(d.done());
  CHECK(d.summary(1).median_us == 4);
  CHECK(d.summary(1).ci_low_us == 4);
  CHECK(d.summary(1).ci_high_us == 4);
  det.min_rounds = 0;
  CHECK_THROWS_WITH(tune::Rounds(1, det), Contains("min rounds 0 is below 1"));
  CHECK_THROWS_WITH(tune::Rounds(1, {1, 50, 0.05}), Contains("min rounds 1 is below 8") && Contains("deterministic"));
}

TEST_CASE("validation candidates: the chosen plan first, each distinct plan once, priced under the profile", "[tune]") {
  const CostModel model = four_per_host();
  const Mesh mesh = Mesh::parse("2x4");
  tune::CandidateOptions o;
  o.others.push_back(CostModel::pytorch());
  o.others.push_back(slow_inter(model));
  std::size_t seen = 0;
  for (const auto& c : tune::validate_cases(mesh, std::vector<std::int64_t>{1 << 12, 1 << 20})) {
    INFO(c.name);
    const auto cands = tune::validation_candidates(c, model, o);
    REQUIRE(!cands.empty());
    CHECK(cands.front().chosen);
    CHECK(cands.front().label == "chosen");
    for (std::size_t i = 0; i < cands.size(); ++i) {
      CHECK(cands[i].chosen == (i == 0));
      // nothing beats the planner's optimum under its own profile
      CHECK(cands[i].predicted_us >= cands.front().predicted_us - 1e-9);
      if (cands[i].cross) {
        CHECK(cands[i].predicted_us == Approx(cands[i].cross->total_cost_us));
      } else if (c.pairs.size() == 1) {
        REQUIRE(cands[i].plans.size() == 1);
        // the price under the profile is the planner's price of that same path
        CHECK(tune::predict_plan_us(cands[i].plans.front(), model) == Approx(cands[i].predicted_us).epsilon(1e-9));
      }
      for (std::size_t j = 0; j < i; ++j) CHECK(cands[i].trace + cands[i].label != cands[j].trace + cands[j].label);
    }
    seen += cands.size();
  }
  CHECK(seen > 30);
  // a batch case: the staged batch and the same plans one after another
  const auto built = tune::validate_cases(mesh, std::vector<std::int64_t>{1 << 16});
  const auto layer = built[built.size() - 2];
  REQUIRE(layer.pairs.size() == 4);
  const auto bc = tune::validation_candidates(layer, model);
  REQUIRE(bc.size() >= 2);
  CHECK(bc[0].batch.has_value());
  CHECK(bc[1].label == "per-tensor");
  CHECK_FALSE(bc[1].batch.has_value());
  CHECK(bc[1].predicted_us > bc[0].predicted_us);
  // the chosen plan cannot be planned: an error (validate reports the case, not fatal)
  tune::CandidateOptions tight;
  tight.max_peak_bytes = 16;
  const tune::ValidateCase transpose{"t", {{Layout::parse(mesh, {64, 64}, DType::f32, "S(0)S(0)"),
                                            Layout::parse(mesh, {64, 64}, DType::f32, "S(1)S(1)")}}};
  CHECK_THROWS_AS(tune::validation_candidates(transpose, model, tight), Error);
  CHECK_THROWS_WITH(tune::validate_cases(mesh, std::vector<std::int64_t>{32}), Contains("validate size 32 bytes"));
}

TEST_CASE("cases from a batch file: every pair a case, and all of them as one batch", "[tune]") {
  const auto cases = tune::cases_from_json(
      R"({"version": 1, "mesh": [2, 2], "pairs": [{"shape": [8, 4], "dtype": "f32", "from": "S(0)R", "to": "RR"},)"
      R"( {"shape": [6], "dtype": "bf16", "from": "P(sum)R", "to": "S(0)R"}]})");
  REQUIRE(cases.size() == 3);
  CHECK(cases[0].name == "pair 0");
  CHECK(cases[2].pairs.size() == 2);
  CHECK_THROWS_WITH(tune::cases_from_json(R"({"version": 1, "mesh": [2], "pairs": []})"), Contains("pairs"));
}

TEST_CASE("validate on the virtual clock: with the profile as the truth the model picks the fastest plan", "[tune]") {
  const CostModel model = four_per_host();
  int cases = 0, separated = 0, cross = 0;
  for (const char* m : {"4", "2x4", "2x2x2"}) {
    const Mesh mesh = Mesh::parse(m);
    const auto report = validate_on_clock(mesh, model, model, tune::validate_cases(mesh, std::vector<std::int64_t>{1 << 12, 1 << 18}));
    for (const auto& c : report.cases) {
      INFO(m << " " << c.name);
      REQUIRE(c.skipped.empty());
      ++cases;
      CHECK(c.rounds == 8);  // a noiseless clock: every interval is one point
      CHECK(c.converged);
      // The clock charges the copies the executor makes; the model charges a direct step for
      // packing every piece, which the executor skips where a piece is one run (up to ~1% here,
      // more at larger sizes): where the two best predictions are that close the measured order
      // may swap, by no more than the two plans' errors allow.
      double worst_error = 0;
      for (const auto& p : c.plans) worst_error = std::max(worst_error, std::abs(p.error));
      CHECK(c.regret <= std::max(0.005, 2.05 * worst_error));
      if (c.name.starts_with("cross-mesh")) {
        // The model prices a cross-mesh transfer above what it costs on the clock (up to ~16%
        // for the point-to-point route at 4 MiB on 2x4: docs/cost-model.md), so its order may
        // swap there; the chosen route is still verified and the regret bounded above.
        ++cross;
        continue;
      }
      const auto [a, b] = two_best(c);
      if (b > 1.01 * a) {
        ++separated;
        CHECK(c.regret == 0);
      } else {
        CHECK(c.regret <= 0.012);
      }
      for (const auto& p : c.plans) CHECK(p.verified);
    }
    CHECK(report.all_verified());
  }
  CHECK(cases == 5 * 2 + 8 * 2 + 8 * 2);
  CHECK(cross == 4);
  CHECK(separated > 20);
}

TEST_CASE("validate on the virtual clock: another truth's regret, and the fit from measure's logs that removes it", "[tune]") {
  const CostModel model = four_per_host();
  const CostModel truth = slow_inter(model);
  const Mesh mesh = Mesh::parse("2x4");
  tune::ValidateOptions vo;
  vo.candidates.others.push_back(truth);  // the truth's own best plan competes
  const auto cases = tune::validate_cases(mesh, std::vector<std::int64_t>{1 << 12, 1 << 20});
  const auto report = validate_on_clock(mesh, model, truth, cases, 0, vo);
  REQUIRE(report.cases.size() == cases.size());
  // how far the clock is from the truth's own model on these plans (the copies the model charges
  // against those the executor makes): the regrets below agree to within that
  double gap = 0;
  for (const auto& c : validate_on_clock(mesh, truth, truth, cases, 0, vo).cases)
    if (!c.name.starts_with("cross-mesh"))  // (its transfer's price is further off: see above)
      for (const auto& p : c.plans) gap = std::max(gap, std::abs(p.error));
  CHECK(gap <= 0.02);
  double worst = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = report.cases[i];
    INFO(c.name);
    REQUIRE(c.skipped.empty());
    if (cases[i].pairs.size() != 1 || !(cases[i].pairs[0].first.mesh() == cases[i].pairs[0].second.mesh())) continue;
    // the regret as the truth prices the same candidates
    const auto cands = tune::validation_candidates(cases[i], model, vo.candidates);
    REQUIRE(cands.size() == c.plans.size());
    double fastest = 1e300;
    for (const auto& k : cands) fastest = std::min(fastest, tune::predict_plan_us(k.plans.front(), truth));
    const double from_truth = tune::predict_plan_us(cands.front().plans.front(), truth) / fastest - 1;
    CHECK(std::abs(c.regret - from_truth) <= 0.005 + 2.05 * gap);
    worst = std::max(worst, c.regret);
  }
  CHECK(worst > 0.02);  // the wrong profile costs something somewhere
  // measure on the truth's clock, fit, validate again: the regret is gone
  tune::MeasureOptions mo;
  mo.min_bytes = 256;
  mo.max_bytes = 1 << 20;
  mo.iters = 1;
  mo.devices_per_host = 4;
  std::vector<tune::Log> logs;
  for (const auto& l : tune::measure_on_virtual_clock(mesh, truth, 0.0, mo)) logs.push_back(tune::parse_nccl_log(l.text, l.name));
  const CostModel fitted = tune::fit_profile(logs, model).model;
  const auto again = validate_on_clock(mesh, fitted, truth, cases, 0, vo);
  for (const auto& c : again.cases) {
    INFO("fitted: " << c.name);
    CHECK(c.regret <= 0.01);
  }
  CHECK(again.max_regret() < report.max_regret());
  CHECK_THAT(report.text(), Contains("best under truth"));
}

TEST_CASE("validate: a noisy clock takes more rounds, and a case no plan fits is reported", "[tune]") {
  const CostModel model = CostModel::default_model();
  const Mesh mesh = Mesh::parse("4");
  tune::ValidateOptions vo;
  vo.rounds.max_rounds = 20;
  vo.rounds.ci_target = 0.001;  // tighter than 10% noise allows in 20 rounds
  auto cases = tune::validate_cases(mesh, std::vector<std::int64_t>{1 << 12});
  const auto noisy = validate_on_clock(mesh, model, model, cases, 0.1, vo);
  for (const auto& c : noisy.cases) {
    INFO(c.name);
    CHECK(c.rounds == 20);
    CHECK_FALSE(c.converged);
    for (const auto& p : c.plans) CHECK(p.measured.q1_us <= p.measured.q3_us);
  }
  tune::ValidateOptions tight;
  tight.candidates.max_peak_bytes = 16;
  const auto report = validate_on_clock(mesh, model, model, cases, 0, tight);
  bool skipped = false;
  for (const auto& c : report.cases)
    if (c.name == "transpose 4 KiB") {
      skipped = true;
      CHECK_THAT(c.skipped, Contains("fits in 16 peak bytes"));
    }
  CHECK(skipped);
  CHECK_THAT(report.to_json(), Contains("\"skipped\":\"no plan from S(0) to S(1) fits in 16 peak bytes"));
}

TEST_CASE("validate: a candidate memo plans each case once for every rank of the process, with the same report", "[tune]") {
  const CostModel model = four_per_host();
  const Mesh mesh = Mesh::parse("2x4");
  const auto cases = tune::validate_cases(mesh, std::vector<std::int64_t>{1 << 12});
  const auto plain = validate_on_clock(mesh, model, model, cases);
  tune::CandidateMemo memo;
  tune::ValidateOptions vo;
  vo.memo = &memo;
  std::vector<std::string> started;  // the progress callback: rank 0 only, every case in order
  std::mutex mu;
  vo.on_case = [&](std::size_t i, std::size_t n, const tune::ValidateCase& c, std::size_t plans) {
    const std::lock_guard lock(mu);
    CHECK(n == cases.size());
    CHECK(plans > 0);
    started.push_back(std::to_string(i) + " " + c.name);
  };
  const auto shared = validate_on_clock(mesh, model, model, cases, 0, vo);
  CHECK(shared.to_json() == plain.to_json());
  REQUIRE(started.size() == cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) CHECK(started[i] == std::to_string(i) + " " + cases[i].name);
  // the memo holds every case: asked again, nothing is planned
  int planned = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto e = memo.get(i, cases[i], model, [&] {
      ++planned;
      return std::vector<tune::Candidate>{};
    });
    CHECK(e->error.empty());
    CHECK_FALSE(e->candidates.empty());
  }
  CHECK(planned == 0);
  // handed another validation's cases, it refuses rather than answer for the wrong case
  CHECK_THROWS_WITH(memo.get(0, cases[1], model, [] { return std::vector<tune::Candidate>{}; }),
                    Contains(cases[0].name) && Contains(cases[1].name));
  CostModel other = model;
  other.name = "another profile";
  CHECK_THROWS_WITH(memo.get(0, cases[0], other, [] { return std::vector<tune::Candidate>{}; }), Contains("another profile"));
  // a planning error is kept and given to every asker (the case is skipped on every rank)
  tune::CandidateMemo failing;
  int calls = 0;
  for (int k = 0; k < 2; ++k) {
    const auto e = failing.get(0, cases[0], model, [&]() -> std::vector<tune::Candidate> {
      ++calls;
      throw InputError("no plan within the budget");
    });
    CHECK(e->error == "no plan within the budget");
  }
  CHECK(calls == 1);
}

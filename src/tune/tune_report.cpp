// The report of `tune validate` as text and JSON.
#include "dtensor/tune_report.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace dtensor::tune {
namespace {

std::string labels(const PlanResult& p) {
  std::string s = p.label;
  for (const auto& a : p.also) s += " = " + a;
  return s;
}

}  // namespace

double ValidationReport::max_regret() const {
  double r = 0;
  for (const auto& c : cases)
    if (c.skipped.empty()) r = std::max(r, c.regret);
  return r;
}

double ValidationReport::agreement() const {
  int compared = 0, agreeing = 0;
  for (const auto& c : cases) compared += c.pairs_compared, agreeing += c.pairs_agreeing;
  return compared > 0 ? static_cast<double>(agreeing) / compared : 1.0;
}

bool ValidationReport::all_verified() const {
  for (const auto& c : cases)
    for (const auto& p : c.plans)
      if (!p.verified) return false;
  return true;
}

std::string ValidationReport::text() const {
  std::string o = fmt::format("profile {} on mesh {} ({} backend, {})", profile, mesh, backend, clock);
  if (!others.empty()) {
    o += "; against";
    for (const auto& n : others) o += " " + n;
  }
  o += "\n";
  if (!note.empty()) o += "note: " + note + "\n";
  int ran = 0, compared = 0, agreeing = 0;
  for (const auto& c : cases) {
    o += fmt::format("\n{}  ({})\n", c.name, c.what);
    if (!c.skipped.empty()) {
      o += fmt::format("  not run: {}\n", c.skipped);
      continue;
    }
    ++ran;
    compared += c.pairs_compared, agreeing += c.pairs_agreeing;
    o += fmt::format("  regret {:.1f}%, order agreement {}/{} pairs, {} round{}{}\n", 100 * c.regret, c.pairs_agreeing,
                     c.pairs_compared, c.rounds, c.rounds == 1 ? "" : "s", c.converged ? "" : " (medians not within the target: max rounds)");
    std::size_t w = 12;
    for (const auto& p : c.plans) w = std::max(w, labels(p).size());
    o += fmt::format("    {:<{}} {:>12} {:>12} {:>23} {:>8}  {}\n", "plan", w, "predicted us", "median us", "IQR us", "error", "trace");
    for (const auto& p : c.plans)
      o += fmt::format("  {} {:<{}} {:>12.3f} {:>12.3f} {:>23} {:>+7.1f}%  {}{}\n", p.chosen ? '*' : ' ', labels(p), w,
                       p.predicted_us, p.measured.median_us,
                       fmt::format("{:.3f}-{:.3f}", p.measured.q1_us, p.measured.q3_us), 100 * p.error, p.trace,
                       p.verified ? "" : "  (OUTPUT WRONG)");
  }
  o += fmt::format("\n{} of {} cases run; largest regret {:.1f}%; order agreement {}/{} pairs\n", ran, cases.size(),
                   100 * max_regret(), agreeing, compared);
  return o;
}

std::string ValidationReport::to_json(int indent) const {
  nlohmann::ordered_json j;
  j["profile"] = profile;
  j["others"] = others;
  j["mesh"] = mesh;
  j["backend"] = backend;
  j["clock"] = clock;
  j["note"] = note;
  j["max_regret"] = max_regret();
  j["agreement"] = agreement();
  j["cases"] = nlohmann::ordered_json::array();
  for (const auto& c : cases) {
    nlohmann::ordered_json cj;
    cj["name"] = c.name;
    cj["what"] = c.what;
    if (!c.skipped.empty()) {
      cj["skipped"] = c.skipped;
      j["cases"].push_back(cj);
      continue;
    }
    cj["regret"] = c.regret;
    cj["pairs_compared"] = c.pairs_compared;
    cj["pairs_agreeing"] = c.pairs_agreeing;
    cj["rounds"] = c.rounds;
    cj["converged"] = c.converged;
    cj["plans"] = nlohmann::ordered_json::array();
    for (const auto& p : c.plans)
      cj["plans"].push_back({{"label", p.label}, {"also", p.also}, {"chosen", p.chosen}, {"trace", p.trace},
                             {"predicted_us", p.predicted_us}, {"median_us", p.measured.median_us},
                             {"q1_us", p.measured.q1_us}, {"q3_us", p.measured.q3_us},
                             {"ci_low_us", p.measured.ci_low_us}, {"ci_high_us", p.measured.ci_high_us},
                             {"error", p.error}, {"verified", p.verified}});
    j["cases"].push_back(cj);
  }
  return j.dump(indent);
}

}  // namespace dtensor::tune

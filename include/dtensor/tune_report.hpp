#pragma once
// The report of `tune validate`: per plan predicted against measured time, per case the order
// agreement and the regret; text, JSON (and HTML: viz::render_validate_report).
#include <span>
#include <string>
#include <vector>

#include "dtensor/tune_rounds.hpp"

namespace dtensor::tune {

// One plan's line of the report.
struct PlanResult {
  std::string label;
  std::vector<std::string> also;
  bool chosen = false;
  std::string trace;
  double predicted_us = 0;
  TimeSummary measured;
  double error = 0;       // (predicted - measured median) / measured median
  bool verified = false;  // every rank's output equals its expected shard
};
struct CaseResult {
  std::string name;
  std::string what;          // the pairs, e.g. "4096x256 f32: S(0)S(0) -> RS(0)"
  std::string skipped;       // why no plan ran (e.g. none fits the memory budget); empty otherwise
  std::vector<PlanResult> plans;
  int pairs_compared = 0;    // candidate pairs whose predicted times differ
  int pairs_agreeing = 0;    // ... whose measured order is the same
  double regret = 0;         // chosen's median over the fastest median, minus one
  bool converged = false;
  int rounds = 0;
};
struct ValidationReport {
  std::string profile;              // the validated profile's name
  std::vector<std::string> others;  // the other profiles' names
  std::string mesh;
  std::string backend;
  std::string clock;                // "wall clock", "virtual clock (truth.json)"
  std::string note;                 // e.g. ranks outnumber cores
  std::vector<CaseResult> cases;
  // Over the cases that ran: the largest regret, and the pairs agreeing of all compared.
  [[nodiscard]] double max_regret() const;
  [[nodiscard]] double agreement() const;
  [[nodiscard]] std::string text() const;
  [[nodiscard]] std::string to_json(int indent = -1) const;
  [[nodiscard]] bool all_verified() const;
};

}  // namespace dtensor::tune

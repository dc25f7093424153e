#pragma once
// Pictures of layouts and plans (`dtensor show`) and of cost-model fits (`dtensor tune fit --report`), drawn from the ownership math only: any mesh
// and shape works without materialising tensor data.
#include <string>
#include <vector>

#include "dtensor/planner.hpp"
#include "dtensor/tune.hpp"
#include "dtensor/tune_report.hpp"

namespace dtensor::viz {

// One state of a plan on the two chosen tensor dims: blocks (aggregated where neighbours have
// the same owners), each with the global ranks that own it.
struct Block {
  std::int64_t r0, r1, c0, c1;       // index ranges on the chosen dims (half-open)
  std::vector<std::int64_t> ranks;   // owners, ascending
};
struct StateView {
  std::string placements;
  std::string partial_note;          // "" or "Partial P(sum) over mesh dim 1: ..."
  std::vector<Block> blocks;
  std::vector<std::int64_t> row_cuts, col_cuts;
};

struct Options {
  int dim_row = 0;
  int dim_col = 1;  // -1 for 1-d tensors
  std::size_t max_blocks_per_dim = 256;
};

// Text made safe for HTML/SVG content and attributes (< > & ").
[[nodiscard]] std::string escape_xml(const std::string& text);
// Ranks in compact form: "0-3,6" ("-" when none).
[[nodiscard]] std::string rank_ranges(const std::vector<std::int64_t>& ranks);

[[nodiscard]] StateView view_of(const Layout& layout, const Options& opt);
[[nodiscard]] std::string render_svg(const Plan& plan, const Options& opt, bool standalone = true);
[[nodiscard]] std::string render_html(const Plan& plan, const Options& opt);
[[nodiscard]] std::string render_text(const Plan& plan, const Options& opt, int width);
// The explored part of the graph (states within the plan's cost), the plan's path in bold.
[[nodiscard]] std::string render_dot(const Plan& plan, const CostModel& cost, std::size_t max_states = 200);

// A standalone HTML page on a cost-model fit (`dtensor tune fit --report`): per log, measured and
// fitted time and bus bandwidth (log-log SVG charts), residuals, bands and ignored rows.
// `profile_path`: where the profile was written, for the heading.
[[nodiscard]] std::string render_fit_report(const tune::ProfileFit& fitted, const std::string& profile_path);

// A standalone HTML page on a plan-ranking validation (`dtensor tune validate --report`): per
// case each plan's predicted time against its measured median and interquartile range, the
// chosen plan marked; predicted against measured over all plans (log-log).
[[nodiscard]] std::string render_validate_report(const tune::ValidationReport& report);

}  // namespace dtensor::viz

// What `tune fit` prints about a fit (the CLI and `python -m dtensor.tune fit`): per log the rows
// used, the errors, the bands and the ignored rows, as text or JSON, and the warnings.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dtensor/tune.hpp"

namespace dtensor::tune {

std::string curve_table(const CollectiveCurve& c) {
  std::string out = fmt::format("{} on the {} link, fitted at {} ranks\n", to_string(c.collective),
                                c.inter_host ? "inter-node" : "intra-node", c.ranks);
  out += fmt::format("  {:>16} {:>12} {:>14}\n", "up to bytes", "alpha us", "bus bw GB/s");
  for (std::size_t k = 0; k < c.bands.size(); ++k)
    out += fmt::format("  {:>16} {:>12.3f} {:>14.3f}\n",
                       k + 1 == c.bands.size() ? std::string("(all above)") : fmt::format("{:.0f}", c.bands[k].up_to_bytes),
                       c.bands[k].alpha_us, c.bands[k].bw_GBps);
  return out;
}

std::string fit_text(const ProfileFit& fitted) {
  std::string text;
  for (const auto& lf : fitted.logs) {
    text += fmt::format("{}: {} rows used, median error {:.1f}%, max {:.1f}%\n", lf.log.name, lf.fit.rows_used,
                        lf.fit.median_rel_error * 100, lf.fit.max_rel_error * 100);
    text += curve_table(lf.fit.curve);
    for (const auto& i : lf.ignored) text += fmt::format("  ignored line {}: {}\n", i.line, i.reason);
  }
  for (int l = 0; l < 2; ++l)
    if (fitted.per_peer_us[l])
      text += fmt::format("per-peer latency of a direct exchange on the {} link: {:.3f} us (alltoall's latency over "
                          "sendrecv's)\n", l ? "inter-node" : "intra-node", *fitted.per_peer_us[l]);
  return text;
}

std::string fit_json(const ProfileFit& fitted, const std::string& profile_path) {
  nlohmann::ordered_json logs = nlohmann::ordered_json::array();
  for (const auto& lf : fitted.logs) {
    nlohmann::ordered_json r;
    r["log"] = lf.log.name;
    r["collective"] = std::string(to_string(lf.log.collective));
    r["ranks"] = lf.log.ranks;
    r["ranks_per_node"] = lf.log.ranks_per_node;
    r["rows_used"] = lf.fit.rows_used;
    r["median_rel_error"] = lf.fit.median_rel_error;
    r["max_rel_error"] = lf.fit.max_rel_error;
    r["bands"] = nlohmann::ordered_json::array();
    for (const auto& b : lf.fit.curve.bands)
      r["bands"].push_back({{"up_to_bytes", b.up_to_bytes}, {"alpha_us", b.alpha_us}, {"bw_GBps", b.bw_GBps}});
    r["ignored"] = nlohmann::ordered_json::array();
    for (const auto& i : lf.ignored) r["ignored"].push_back({{"line", i.line}, {"reason", i.reason}});
    logs.push_back(r);
  }
  nlohmann::ordered_json j;
  j["profile"] = profile_path;
  j["logs"] = logs;
  nlohmann::ordered_json pp;  // null: not fitted (the base profile's per-peer latency kept)
  pp["intra"] = fitted.per_peer_us[0] ? nlohmann::ordered_json(*fitted.per_peer_us[0]) : nlohmann::ordered_json();
  pp["inter"] = fitted.per_peer_us[1] ? nlohmann::ordered_json(*fitted.per_peer_us[1]) : nlohmann::ordered_json();
  j["per_peer_us"] = pp;
  return j.dump();
}

std::vector<std::string> fit_warnings(const ProfileFit& fitted) {
  std::vector<std::string> warnings;
  for (const auto& lf : fitted.logs) {
    const auto& fit = lf.fit;
    if (fit.median_rel_error > kFitWarnError)
      warnings.push_back(fmt::format("{}: the fit's median error is {:.1f}%, above {:.0f}%: its predictions are not to be trusted",
                                     lf.log.name, fit.median_rel_error * 100, kFitWarnError * 100));
    for (const auto& b : fit.curve.bands)
      if (b.bw_GBps >= 1e6 || b.bw_GBps <= 1e-3 || b.alpha_us >= 1e6)
        warnings.push_back(fmt::format("{}: a band (up to {:.0f} bytes) hit a validation limit ({:.3g} us, {:.3g} GB/s): "
                                       "the log does not determine it", lf.log.name, b.up_to_bytes, b.alpha_us, b.bw_GBps));
  }
  return warnings;
}

}  // namespace dtensor::tune

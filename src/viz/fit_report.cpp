// The HTML report of `dtensor tune fit --report`: per log, measured against fitted time and bus
// bandwidth on log-log charts, the residuals, the bands and the ignored rows.
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "dtensor/viz.hpp"

namespace dtensor::viz {
namespace {

// One log-log chart: measured points, the fitted curve, ignored rows (crosses); or a residual chart.
struct Series {
  std::vector<std::pair<double, double>> points, ignored, line;
};
std::string chart(const std::string& title, const std::string& ylabel, const Series& s, bool log_y) {
  const double W = 460, H = 300, L = 64, R = 12, T = 28, B = 44;
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  for (const auto* v : {&s.points, &s.ignored, &s.line})
    for (const auto& [x, y] : *v) {
      if (x <= 0 || (log_y && y <= 0)) continue;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  if (x0 > x1) return "";
  if (!log_y) {
    const double m = std::max({std::abs(y0), std::abs(y1), 0.01});
    y0 = -m, y1 = m;
  }
  const auto lx = [&](double x) { return std::log10(x); };
  const auto ly = [&](double y) { return log_y ? std::log10(y) : y; };
  const double ax0 = lx(x0), ax1 = std::max(lx(x1), ax0 + 1e-9), ay0 = ly(y0), ay1 = std::max(ly(y1), ay0 + 1e-9);
  const auto px = [&](double x) { return L + (lx(x) - ax0) / (ax1 - ax0) * (W - L - R); };
  const auto py = [&](double y) { return H - B - (ly(y) - ay0) / (ay1 - ay0) * (H - T - B); };
  std::string o = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
                              "font-size=\"11\"><rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>", W, H);
  o += fmt::format("<text x=\"{}\" y=\"16\" font-weight=\"bold\">{}</text>", L, escape_xml(title));
  o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>", L, T, W - L - R, H - T - B);
  for (int e = static_cast<int>(std::ceil(ax0)); e <= static_cast<int>(std::floor(ax1)); e += std::max(1, static_cast<int>((ax1 - ax0) / 6)))
    o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">1e{}</text>", px(std::pow(10.0, e)), H - B + 14, e);
  o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">bytes (nccl-tests size)</text>", (L + W - R) / 2, H - 8);
  o += fmt::format("<text x=\"12\" y=\"{}\" transform=\"rotate(-90 12 {})\" text-anchor=\"middle\">{}</text>", (T + H - B) / 2,
                   (T + H - B) / 2, escape_xml(ylabel));
  if (log_y) {
    for (int e = static_cast<int>(std::ceil(ay0)); e <= static_cast<int>(std::floor(ay1)); ++e)
      o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">1e{}</text>", L - 4, py(std::pow(10.0, e)) + 4, e);
  } else {
    for (double v : {y0, 0.0, y1})
      o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:+.0f}%</text>", L - 4, py(v) + 4, v * 100);
    o += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#bbb\"/>", L, W - R, py(0), py(0));
  }
  if (!s.line.empty()) {
    o += "<polyline fill=\"none\" stroke=\"#d04a2a\" stroke-width=\"1.6\" points=\"";
    for (const auto& [x, y] : s.line)
      if (x > 0 && (!log_y || y > 0)) o += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    o += "\"/>";
  }
  for (const auto& [x, y] : s.points)
    if (x > 0 && (!log_y || y > 0))
      o += fmt::format("<circle class=\"measured\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"#2c5aa0\"/>", px(x), py(y));
  for (const auto& [x, y] : s.ignored)
    if (x > 0 && (!log_y || y > 0))
      o += fmt::format("<text class=\"ignored\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#888\">&#215;</text>", px(x),
                       py(y) + 4);
  return o + "</svg>";
}

}  // namespace

std::string render_fit_report(const tune::ProfileFit& fitted, const std::string& profile_path) {
  std::string html;
  for (const auto& lf : fitted.logs) {
    const auto& log = lf.log;
    const auto& fit = lf.fit;
    const auto& path = log.name;
    const bool inter = lf.inter_host;
    const auto& ignored = lf.ignored;
    // measured vs fitted time and bus bandwidth, residuals, the bands
    Series time, bw, res;
    const double f0 = bus_factor(log.collective, log.ranks);
    std::set<int> out_lines;
    for (const auto& o : fit.outliers) out_lines.insert(o.line);
    for (const auto& r : log.rows) {
      const double b = static_cast<double>(r.bytes), pred = fit.curve.time_us(log.ranks, b);
      (out_lines.count(r.line) ? time.ignored : time.points).push_back({b, r.time_us});
      (out_lines.count(r.line) ? bw.ignored : bw.points).push_back({b, b * f0 / r.time_us / 1e3});
      res.points.push_back({b, (pred - r.time_us) / r.time_us});
    }
    const double lo = static_cast<double>(log.rows.front().bytes), hi = static_cast<double>(log.rows.back().bytes);
    for (double b = std::min(lo, hi); b <= std::max(lo, hi) * 1.0001; b *= 1.05) {
      time.line.push_back({b, fit.curve.time_us(log.ranks, b)});
      bw.line.push_back({b, b * f0 / fit.curve.time_us(log.ranks, b) / 1e3});
    }
    html += fmt::format("<section><h2>{}</h2><p>{} on {} ranks ({} per node, {} link): {} rows used, median error {:.1f}%, "
                        "largest {:.1f}%</p>\n", escape_xml(path), to_string(log.collective), log.ranks, log.ranks_per_node,
                        inter ? "inter-node" : "intra-node", fit.rows_used, fit.median_rel_error * 100, fit.max_rel_error * 100);
    html += chart("time: measured (dots), fitted (line)", "us", time, true);
    html += chart("bus bandwidth", "GB/s", bw, true);
    html += chart("residual (fitted - measured) / measured", "relative error", res, false);
    html += "<table><tr><th>up to bytes</th><th>alpha us</th><th>bus bw GB/s</th></tr>";
    for (std::size_t k = 0; k < fit.curve.bands.size(); ++k)
      html += fmt::format("<tr><td>{}</td><td>{:.3f}</td><td>{:.3f}</td></tr>",
                          k + 1 == fit.curve.bands.size() ? std::string("all above") : fmt::format("{:.0f}", fit.curve.bands[k].up_to_bytes),
                          fit.curve.bands[k].alpha_us, fit.curve.bands[k].bw_GBps);
    html += "</table>";
    if (!ignored.empty()) {
      html += "<p>ignored rows:</p><ul>";
      for (const auto& i : ignored) html += fmt::format("<li>line {}: {}</li>", i.line, escape_xml(i.reason));
      html += "</ul>";
    }
    html += "</section>\n";
  }
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>dtensor tune fit</title><style>"
         "body{font-family:sans-serif;margin:16px;color:#222}section{margin-bottom:28px}svg{margin-right:8px}"
         "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}</style></head><body>\n" +
         fmt::format("<h1>Cost-model fit: {}</h1><p>profile written to {}</p>\n", escape_xml(fitted.model.name),
                     escape_xml(profile_path)) +
         html + "</body></html>\n";
}

}  // namespace dtensor::viz

// The HTML report of `tune validate --report`: per case, each plan's predicted time against its
// measured median (with the interquartile range), the chosen plan marked; over all cases,
// predicted against measured on a log-log chart.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dtensor/viz.hpp"

namespace dtensor::viz {
namespace {

// Horizontal bars per plan: predicted (light), measured median (dark) with its IQR as a whisker.
std::string case_chart(const tune::CaseResult& c) {
  const double W = 720, L = 230, R = 70, row = 34, T = 24;
  const double H = T + row * static_cast<double>(c.plans.size()) + 24;
  double hi = 0;
  for (const auto& p : c.plans) hi = std::max({hi, p.predicted_us, p.measured.q3_us, p.measured.median_us});
  if (hi <= 0) hi = 1;
  const auto px = [&](double v) { return L + v / hi * (W - L - R); };
  std::string o = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
                              "font-size=\"11\"><rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>", W, H);
  o += fmt::format("<text x=\"{}\" y=\"14\" fill=\"#555\">light: predicted; dark: measured median, whisker: interquartile "
                   "range; &#9733; chosen</text>", L);
  for (std::size_t i = 0; i < c.plans.size(); ++i) {
    const auto& p = c.plans[i];
    const double y = T + row * static_cast<double>(i);
    std::string label = p.label;
    for (const auto& a : p.also) label += " = " + a;
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\"{}>{}{}</text>", L - 6, y + 17,
                     p.chosen ? " font-weight=\"bold\"" : "", p.chosen ? "&#9733; " : "", escape_xml(label));
    o += fmt::format("<rect class=\"predicted\" x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"11\" fill=\"#9fbfe0\"/>", L, y + 4,
                     px(p.predicted_us) - L);
    o += fmt::format("<rect class=\"measured\" x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"11\" fill=\"#2c5aa0\"/>", L, y + 16,
                     px(p.measured.median_us) - L);
    o += fmt::format("<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#d04a2a\" stroke-width=\"2\"/>",
                     px(p.measured.q1_us), px(p.measured.q3_us), y + 21.5, y + 21.5);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#555\">{:+.1f}%</text>",
                     std::max(px(p.predicted_us), px(p.measured.q3_us)) + 4, y + 17, 100 * p.error);
  }
  o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" fill=\"#555\">0</text><text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" "
                   "fill=\"#555\">{:.3g} us</text>", L, H - 6, W - R, H - 6, hi);
  return o + "</svg>";
}

// Predicted against measured, every plan of every case, log-log, with the diagonal.
std::string scatter(const tune::ValidationReport& r) {
  const double W = 420, H = 360, L = 56, R = 12, T = 24, B = 40;
  double lo = 1e300, hi = 0;
  for (const auto& c : r.cases)
    for (const auto& p : c.plans)
      for (double v : {p.predicted_us, p.measured.median_us})
        if (v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
  if (hi <= 0) return "";
  const double a0 = std::log10(lo) - 0.05, a1 = std::max(std::log10(hi) + 0.05, a0 + 0.1);
  const auto px = [&](double v) { return L + (std::log10(v) - a0) / (a1 - a0) * (W - L - R); };
  const auto py = [&](double v) { return H - B - (std::log10(v) - a0) / (a1 - a0) * (H - T - B); };
  std::string o = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
                              "font-size=\"11\"><rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>", W, H);
  o += fmt::format("<text x=\"{}\" y=\"16\" font-weight=\"bold\">predicted vs measured median (us)</text>", L);
  o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>", L, T, W - L - R, H - T - B);
  o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#bbb\"/>", px(std::pow(10, a0)),
                   py(std::pow(10, a0)), px(std::pow(10, a1)), py(std::pow(10, a1)));
  for (int e = static_cast<int>(std::ceil(a0)); e <= static_cast<int>(std::floor(a1)); ++e) {
    o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">1e{}</text>", px(std::pow(10.0, e)), H - B + 14, e);
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">1e{}</text>", L - 4, py(std::pow(10.0, e)) + 4, e);
  }
  o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">predicted</text>", (L + W - R) / 2, H - 8);
  for (const auto& c : r.cases)
    for (const auto& p : c.plans)
      if (p.predicted_us > 0 && p.measured.median_us > 0)
        o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"><title>{}: {}</title></circle>", px(p.predicted_us),
                         py(p.measured.median_us), p.chosen ? 4 : 3, p.chosen ? "#d04a2a" : "#2c5aa0", escape_xml(c.name),
                         escape_xml(p.label));
  return o + "</svg>";
}

}  // namespace

std::string render_validate_report(const tune::ValidationReport& r) {
  std::string html = fmt::format("<h1>Plan ranking: profile {}</h1><p>mesh {}, {} backend, {}{}</p>\n", escape_xml(r.profile),
                                 escape_xml(r.mesh), escape_xml(r.backend), escape_xml(r.clock),
                                 r.others.empty() ? std::string() : ", against " + escape_xml(fmt::format("{}", fmt::join(r.others, ", "))));
  if (!r.note.empty()) html += fmt::format("<p><b>note:</b> {}</p>\n", escape_xml(r.note));
  html += fmt::format("<p>largest regret {:.1f}%, order agreement {:.0f}% of the plan pairs the model tells apart</p>\n",
                      100 * r.max_regret(), 100 * r.agreement());
  html += scatter(r);
  html += "<table><tr><th>case</th><th>what</th><th>regret</th><th>agreement</th><th>rounds</th></tr>";
  for (const auto& c : r.cases)
    html += c.skipped.empty()
                ? fmt::format("<tr><td>{}</td><td>{}</td><td>{:.1f}%</td><td>{}/{}</td><td>{}{}</td></tr>", escape_xml(c.name),
                              escape_xml(c.what), 100 * c.regret, c.pairs_agreeing, c.pairs_compared, c.rounds,
                              c.converged ? "" : " (max)")
                : fmt::format("<tr><td>{}</td><td>{}</td><td colspan=\"3\">not run: {}</td></tr>", escape_xml(c.name),
                              escape_xml(c.what), escape_xml(c.skipped));
  html += "</table>\n";
  for (const auto& c : r.cases) {
    if (!c.skipped.empty()) continue;
    html += fmt::format("<section><h2>{}</h2><p>{}: regret {:.1f}%, {} round{}</p>\n", escape_xml(c.name), escape_xml(c.what),
                        100 * c.regret, c.rounds, c.rounds == 1 ? "" : "s");
    html += case_chart(c);
    html += "<table><tr><th>plan</th><th>predicted us</th><th>median us</th><th>IQR us</th><th>95% CI us</th><th>error</th>"
            "<th>trace</th></tr>";
    for (const auto& p : c.plans)
      html += fmt::format("<tr{}><td>{}{}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}-{:.3f}</td><td>{:.3f}-{:.3f}</td>"
                          "<td>{:+.1f}%</td><td style=\"text-align:left\">{}{}</td></tr>",
                          p.chosen ? " style=\"font-weight:bold\"" : "", p.chosen ? "&#9733; " : "", escape_xml(p.label),
                          p.predicted_us, p.measured.median_us, p.measured.q1_us, p.measured.q3_us, p.measured.ci_low_us,
                          p.measured.ci_high_us, 100 * p.error, escape_xml(p.trace), p.verified ? "" : " (OUTPUT WRONG)");
    html += "</table></section>\n";
  }
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>dtensor tune validate</title><style>"
         "body{font-family:sans-serif;margin:16px;color:#222}section{margin-bottom:28px}"
         "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}</style>"
         "</head><body>\n" + html + "</body></html>\n";
}

}  // namespace dtensor::viz

// Size-band fits of measured collective times (docs/cost-model.md, "Tuning").
#include <algorithm>
#include <optional>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "dtensor/error.hpp"
#include "dtensor/tune.hpp"

namespace dtensor::tune {
namespace {

// Profile bounds (the same as a profile's validation): every fitted constant must load back.
constexpr double kMaxAlphaUs = 1e6, kMinBw = 1e-3, kMaxBw = 1e6;

struct Point {
  double bytes;  // nccl-tests size
  double x;      // bus bytes
  double t;      // µs
  int line;
};

// Prefix sums for weighted least squares of t ≈ α + b·x with weights 1/t² (relative error).
struct Sums {
  std::vector<double> w, wx, wxx, wt, wxt, wtt;
  explicit Sums(const std::vector<Point>& p) {
    const std::size_t n = p.size();
    for (auto* v : {&w, &wx, &wxx, &wt, &wxt, &wtt}) v->assign(n + 1, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      const double wi = 1.0 / (p[i].t * p[i].t), x = p[i].x, t = p[i].t;
      w[i + 1] = w[i] + wi;
      wx[i + 1] = wx[i] + wi * x;
      wxx[i + 1] = wxx[i] + wi * x * x;
      wt[i + 1] = wt[i] + wi * t;
      wxt[i + 1] = wxt[i] + wi * x * t;
      wtt[i + 1] = wtt[i] + wi * t * t;
    }
  }
};

struct Line {
  double alpha = 0, b = 0;  // t = alpha + b * x (b in µs per bus byte)
  double sse = 0;           // sum of squared relative errors
};

// Best line over points [i, j) with α ≥ 0 and b ≥ 0 (closed form from the sums).
Line fit_range(const Sums& s, std::size_t i, std::size_t j) {
  const double W = s.w[j] - s.w[i], X = s.wx[j] - s.wx[i], XX = s.wxx[j] - s.wxx[i], T = s.wt[j] - s.wt[i],
               XT = s.wxt[j] - s.wxt[i], TT = s.wtt[j] - s.wtt[i];
  auto sse = [&](double a, double b) {
    return std::max(0.0, TT - 2 * a * T - 2 * b * XT + a * a * W + 2 * a * b * X + b * b * XX);
  };
  Line best{0, 0, std::numeric_limits<double>::infinity()};
  auto consider = [&](double a, double b) {
    a = std::clamp(a, 0.0, kMaxAlphaUs);
    b = std::max(b, 0.0);
    const double e = sse(a, b);
    if (e < best.sse) best = {a, b, e};
  };
  const double det = W * XX - X * X;
  if (det > 1e-30 * W * XX) consider((T * XX - X * XT) / det, (W * XT - X * T) / det);
  if (XX > 0) consider(0, XT / XX);  // no latency
  if (W > 0) consider(T / W, 0);     // no bandwidth term
  return best;
}

double bw_of(double b) { return b > 0 ? std::clamp(1.0 / (b * 1e3), kMinBw, kMaxBw) : kMaxBw; }

// Segmented fits of one point set: band borders by dynamic programming for every band count up
// to `max_bands` (each band at least min_pts points, no border between equal sizes).
class Segmentation {
 public:
  Segmentation(const std::vector<Point>& p, int max_bands) : p_(p), s_(p) {
    const std::size_t n = p.size();
    min_pts_ = n >= 9 ? 3 : 2;
    K_ = std::max(1, std::min<int>(max_bands, static_cast<int>(n / min_pts_)));
    best_.assign(static_cast<std::size_t>(K_ + 1), std::vector<double>(n + 1, kInf));
    cut_.assign(static_cast<std::size_t>(K_ + 1), std::vector<std::size_t>(n + 1, 0));
    best_[0][0] = 0;
    for (int k = 1; k <= K_; ++k)
      for (std::size_t j = min_pts_ * static_cast<std::size_t>(k); j <= n; ++j)
        for (std::size_t i = min_pts_ * static_cast<std::size_t>(k - 1); i + min_pts_ <= j; ++i) {
          if (best_[static_cast<std::size_t>(k - 1)][i] == kInf) continue;
          if (i > 0 && p[i - 1].bytes == p[i].bytes) continue;
          const double e = best_[static_cast<std::size_t>(k - 1)][i] + fit_range(s_, i, j).sse;
          if (e < best_[static_cast<std::size_t>(k)][j]) {
            best_[static_cast<std::size_t>(k)][j] = e;
            cut_[static_cast<std::size_t>(k)][j] = i;
          }
        }
  }
  [[nodiscard]] int max_bands() const { return K_; }
  [[nodiscard]] bool feasible(int k) const { return k <= K_ && best_[static_cast<std::size_t>(k)][p_.size()] < kInf; }
  [[nodiscard]] double sse(int k) const { return best_[static_cast<std::size_t>(k)][p_.size()]; }
  // The least-squares curve of exactly k bands (feasible(k)).
  [[nodiscard]] CollectiveCurve curve(int k, Collective c, bool inter, std::int64_t ranks) const {
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    for (std::size_t j = p_.size(), kk = static_cast<std::size_t>(k); kk > 0; --kk) {
      const std::size_t i = cut_[kk][j];
      ranges.emplace_back(i, j);
      j = i;
    }
    std::reverse(ranges.begin(), ranges.end());
    CollectiveCurve cv{c, inter, ranks, {}};
    for (std::size_t r = 0; r < ranges.size(); ++r) {
      const auto [i, j] = ranges[r];
      const Line l = fit_range(s_, i, j);
      // a band ends at its last measured size: beyond it the next band's line holds (and the
      // monotone floor is this band's value where it was measured, not an extrapolation)
      const double up = r + 1 < ranges.size() ? p_[j - 1].bytes : std::max(p_[j - 1].bytes * 2, 1.0);
      cv.bands.push_back({up, l.alpha, bw_of(l.b)});
    }
    return cv;
  }

 private:
  static constexpr double kInf = std::numeric_limits<double>::infinity();
  const std::vector<Point>& p_;
  Sums s_;
  std::size_t min_pts_ = 2;
  int K_ = 1;
  std::vector<std::vector<double>> best_;
  std::vector<std::vector<std::size_t>> cut_;
};

// Up to this many points the band count is chosen by leave-one-out cross-validation (each row
// predicted by the fit of the others); above it by BIC, which needs no refits and is reliable
// with many rows.
constexpr std::size_t kCrossValidateUpTo = 40;
constexpr double kCvTolerance = 1.25, kCvSlack = 0.002;

// The number of bands: the count whose fits predict left-out rows best (the median relative
// error; ties to fewer bands), so a short log is not overfitted; by BIC for long logs.
CollectiveCurve segment(const std::vector<Point>& p, Collective c, bool inter, std::int64_t ranks, int max_bands) {
  const Segmentation all(p, max_bands);
  const std::size_t n = p.size();
  int chosen = 1;
  if (n <= kCrossValidateUpTo && all.max_bands() > 1 && n >= 4) {
    std::vector<double> score(static_cast<std::size_t>(all.max_bands() + 1), std::numeric_limits<double>::infinity());
    for (int k = 1; k <= all.max_bands(); ++k) {
      if (!all.feasible(k)) continue;
      std::vector<double> err;
      for (std::size_t i = 0; i < n; ++i) {
        std::vector<Point> rest;
        rest.reserve(n - 1);
        for (std::size_t j = 0; j < n; ++j)
          if (j != i) rest.push_back(p[j]);
        const Segmentation loo(rest, k);
        if (!loo.feasible(k)) continue;
        const auto cv = loo.curve(k, c, inter, ranks);
        err.push_back(std::abs(cv.time_us(ranks, p[i].bytes) - p[i].t) / p[i].t);
      }
      if (err.size() < n / 2) continue;  // k bands cannot be fitted without most single rows
      std::sort(err.begin(), err.end());
      score[static_cast<std::size_t>(k)] = err[err.size() / 2];
    }
    // the fewest bands within a tolerance of the best score: a few left-out rows are weak
    // evidence, so more bands must predict clearly better to be chosen
    const double best_score = *std::min_element(score.begin() + 1, score.end());
    for (int k = 1; k <= all.max_bands(); ++k)
      if (score[static_cast<std::size_t>(k)] <= best_score * kCvTolerance + kCvSlack) {
        chosen = k;
        break;
      }
  } else {
    double chosen_bic = std::numeric_limits<double>::infinity();
    for (int k = 1; k <= all.max_bands(); ++k) {
      if (!all.feasible(k)) continue;
      const double bic = static_cast<double>(n) * std::log(std::max(all.sse(k), 1e-12) / static_cast<double>(n)) +
                         (3.0 * k - 1) * std::log(static_cast<double>(n));
      if (bic < chosen_bic) {
        chosen_bic = bic;
        chosen = k;
      }
    }
  }
  return all.curve(chosen, c, inter, ranks);
}

std::vector<Point> points_of(std::span<const Row> rows, Collective c, std::int64_t ranks) {
  std::vector<Point> p;
  const double f0 = bus_factor(c, ranks);
  for (const auto& r : rows)
    if (r.bytes > 0 && r.time_us > 0) p.push_back({static_cast<double>(r.bytes), static_cast<double>(r.bytes) * f0, r.time_us, r.line});
  std::stable_sort(p.begin(), p.end(), [](const Point& a, const Point& b) { return a.bytes < b.bytes; });
  return p;
}

double rel_error(const CollectiveCurve& cv, const Point& q) { return std::abs(cv.time_us(cv.ranks, q.bytes) - q.t) / q.t; }

}  // namespace

Fit fit_curve(std::span<const Row> rows, Collective collective, bool inter_host, std::int64_t ranks, int max_bands) {
  if (ranks < 2) throw InputError(fmt::format("a fit needs 2 or more ranks, not {}", ranks));
  auto p = points_of(rows, collective, ranks);
  if (p.size() < 2) throw InputError(fmt::format("a fit needs at least 2 rows with bytes and time, not {}", p.size()));
  Fit f;
  // robust: a lone spike (a row more than 25% off the log-log line through its two neighbours,
  // and farther off it than the neighbours are from each other) is dropped, at most a tenth of
  // the rows; a real change of regime moves the neighbours too and is kept for the bands
  std::vector<std::pair<double, std::size_t>> spikes;
  for (std::size_t i = 1; i + 1 < p.size(); ++i) {
    if (p[i - 1].bytes == p[i].bytes || p[i].bytes == p[i + 1].bytes) continue;
    const double la = std::log(p[i - 1].t), lc = std::log(p[i + 1].t), lb = std::log(p[i].t);
    // interpolate in log size (sizes need not be equally spaced)
    const double xa = std::log(p[i - 1].bytes), xb = std::log(p[i].bytes), xc = std::log(p[i + 1].bytes);
    const double mid = la + (lc - la) * (xb - xa) / (xc - xa);
    const double dev = std::abs(lb - mid);
    if (dev > std::log(1.25) && dev > std::abs(lc - la)) spikes.push_back({dev, i});
  }
  std::sort(spikes.begin(), spikes.end(), std::greater<>());
  spikes.resize(std::min(spikes.size(), p.size() / 10));
  std::vector<char> drop(p.size(), 0);
  for (const auto& [dev, i] : spikes) {
    drop[i] = 1;
    f.outliers.push_back({p[i].line, fmt::format("a lone spike: {:.0f}% off the line through its neighbours",
                                                 (std::exp(dev) - 1) * 100)});
  }
  std::vector<Point> kept;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (!drop[i]) kept.push_back(p[i]);
  f.curve = segment(kept, collective, inter_host, ranks, max_bands);
  // then the rows farthest off that fit (beyond 3x the median error and 25%; with the spikes, at
  // most a tenth of the rows), once, and refit
  {
    std::vector<double> e;
    for (const auto& q : kept) e.push_back(rel_error(f.curve, q));
    std::vector<double> sorted = e;
    std::sort(sorted.begin(), sorted.end());
    const double med = sorted[sorted.size() / 2];
    const std::size_t room = p.size() / 10 > spikes.size() ? p.size() / 10 - spikes.size() : 0;
    const double cut = room == 0 ? std::numeric_limits<double>::infinity()
                                 : std::max({3 * med, 0.25, sorted[sorted.size() - std::min(room, sorted.size() - 1) - 1]});
    std::vector<Point> still;
    for (std::size_t i = 0; i < kept.size(); ++i) {
      if (e[i] > cut)
        f.outliers.push_back({kept[i].line, fmt::format("{:.0f}% off the fit (median {:.1f}%)", e[i] * 100, med * 100)});
      else
        still.push_back(kept[i]);
    }
    if (still.size() != kept.size()) {
      kept = std::move(still);
      f.curve = segment(kept, collective, inter_host, ranks, max_bands);
    }
    std::sort(f.outliers.begin(), f.outliers.end(), [](const IgnoredRow& x, const IgnoredRow& y) { return x.line < y.line; });
  }
  std::vector<double> err;
  f.rows_used = kept.size();
  for (const auto& q : kept) err.push_back(rel_error(f.curve, q));
  std::sort(err.begin(), err.end());
  f.median_rel_error = err[err.size() / 2];
  f.max_rel_error = err.back();
  return f;
}

CollectiveCurve fit_line(std::span<const Row> rows, Collective collective, bool inter_host, std::int64_t ranks) {
  const auto p = points_of(rows, collective, ranks);
  if (p.empty()) throw InputError("a fit needs at least 1 row with bytes and time");
  return segment(p, collective, inter_host, ranks, 1);
}

ProfileFit fit_profile(std::span<const Log> logs, const CostModel& base) {
  if (logs.empty()) throw InputError("a profile fit needs at least one nccl-tests log");
  if (base.formula == CostModel::Formula::pytorch) throw InputError("fitted curves need a ring-formula base profile, not pytorch");
  ProfileFit out;
  out.model = base;
  out.model.name = "fitted";
  out.model.curves.clear();
  std::optional<std::int64_t> per_node;
  std::int64_t on_one_host = 0;  // the most ranks any log puts on one host
  for (const auto& log : logs) {
    const bool inter = log.ranks_per_node < log.ranks;
    on_one_host = std::max(on_one_host, log.ranks_per_node);
    if (out.model.curve(log.collective, inter))
      throw InputError(fmt::format("two logs measure {} on the {} link (the second: {}); fit them separately",
                                   to_string(log.collective), inter ? "inter-node" : "intra-node", quote_input(log.name)));
    if (inter) {
      if (per_node && *per_node != log.ranks_per_node)
        throw InputError(fmt::format("log {} has {} ranks per node, an earlier one {}", quote_input(log.name),
                                     log.ranks_per_node, *per_node));
      per_node = log.ranks_per_node;
    }
    LogFit lf{log, fit_curve(log.rows, log.collective, inter, log.ranks), inter, log.ignored};
    lf.ignored.insert(lf.ignored.end(), lf.fit.outliers.begin(), lf.fit.outliers.end());
    std::stable_sort(lf.ignored.begin(), lf.ignored.end(), [](const IgnoredRow& a, const IgnoredRow& b) { return a.line < b.line; });
    out.model.curves.push_back(lf.fit.curve);
    out.logs.push_back(std::move(lf));
  }
  for (bool inter : {false, true}) {
    const CollectiveCurve* a2a = out.model.curve(Collective::all_to_all, inter);
    const CollectiveCurve* sr = out.model.curve(Collective::send_recv, inter);
    if (a2a == nullptr || sr == nullptr || a2a->ranks < 3) continue;
    double alpha_a2a = 0, alpha_sr = 0;
    (void)a2a->time_us(a2a->ranks, 1, &alpha_a2a);  // the latency of the smallest sizes' band
    (void)sr->time_us(2, 1, &alpha_sr);
    const double pp = std::max(0.0, (alpha_a2a - alpha_sr) / static_cast<double>(a2a->ranks - 2));
    (inter ? out.model.inter : out.model.intra).alpha_per_peer_us = pp;
    out.per_peer_us[inter ? 1 : 0] = pp;
  }
  // A host holds at least as many devices as any log shows on one: an inter-node log measured
  // over one rank per host (as `tune measure` writes them) says nothing about the rest of it.
  if (per_node) out.model.devices_per_host = std::max(*per_node, on_one_host);
  // what a fit produces must load back: validated through the reader
  (void)CostModel::from_json(out.model.to_json());
  return out;
}

}  // namespace dtensor::tune

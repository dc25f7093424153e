#include "dtensor/explore.hpp"
#include "dtensor/viz.hpp"

#include "dtensor/ownership_map.hpp"

#include "dtensor/comm.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <set>

#include "dtensor/error.hpp"

namespace dtensor::viz {
namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

// Evenly spaced hues: neighbouring ranks get distinguishable colours, the same everywhere.
std::string color(std::int64_t rank, std::int64_t n) {
  const double h = std::fmod(static_cast<double>(rank) * 360.0 / static_cast<double>(std::max<std::int64_t>(n, 1)) +
                                 (rank % 2) * 180.0 / static_cast<double>(std::max<std::int64_t>(n, 1)), 360.0);
  return fmt::format("hsl({:.0f},70%,{}%)", h, rank % 3 == 0 ? 62 : (rank % 3 == 1 ? 72 : 54));
}

std::string human_bytes(std::int64_t b) {
  if (b < 1024) return fmt::format("{} B", b);
  if (b < (1 << 20)) return fmt::format("{:.1f} KiB", static_cast<double>(b) / 1024);
  if (b < (std::int64_t{1} << 30)) return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1 << 20));
  return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1 << 30));
}

std::vector<Layout> states_of(const Plan& plan) {
  std::vector<Layout> out{plan.src};
  for (const auto& s : plan.steps) out.emplace_back(plan.mesh(), plan.shape(), plan.dtype(), s.to);
  return out;
}

std::string step_title(const Plan& plan, const Step& s) {
  std::string dims;
  for (std::size_t i = 0; i < s.mesh_dims.size(); ++i) dims += (i ? "," : "") + std::to_string(s.mesh_dims[i]);
  (void)plan;
  return fmt::format("{}{}", to_string(s.kind), dims.empty() ? "" : " mesh " + dims);
}

}  // namespace

std::string rank_ranges(const std::vector<std::int64_t>& r) { return rank_list(r); }

StateView view_of(const Layout& l, const Options& opt) {
  StateView v;
  v.placements = l.placements_str();
  const Mesh& mesh = l.mesh();
  std::vector<std::string> notes;
  for (int m = 0; m < mesh.ndim(); ++m)
    if (auto op = l.sharding().partial(m)) notes.push_back(fmt::format("P({}) over mesh dim {}", to_string(*op), m));
  if (!notes.empty())
    v.partial_note = fmt::format("{}: every listed rank holds a partial value", fmt::join(notes, ", "));
  const OwnershipMap map = ownership_map(l, opt.dim_row, opt.dim_col, opt.max_blocks_per_dim);
  v.row_cuts = map.row_cuts;
  v.col_cuts = map.col_cuts;
  const std::int64_t Lr = l.shape()[static_cast<std::size_t>(opt.dim_row)];
  const std::int64_t Lc = opt.dim_col >= 0 ? l.shape()[static_cast<std::size_t>(opt.dim_col)] : 1;
  if (Lr == 0 || Lc == 0) return v;
  const std::size_t nr = map.rows(), nc = map.cols();
  const auto& owners = map.owners;
  // aggregate: horizontal runs of equal owners, then equal runs stacked vertically
  std::vector<Block> open;  // blocks that may still grow downwards
  for (std::size_t i = 0; i < nr; ++i) {
    std::vector<Block> row;
    for (std::size_t j = 0; j < nc;) {
      std::size_t k = j;
      while (k + 1 < nc && owners[i * nc + k + 1] == owners[i * nc + j]) ++k;
      row.push_back({v.row_cuts[i], v.row_cuts[i + 1], v.col_cuts[j], v.col_cuts[k + 1], owners[i * nc + j]});
      j = k + 1;
    }
    std::vector<Block> next;
    for (auto& b : row) {
      auto it = std::find_if(open.begin(), open.end(), [&](const Block& o) {
        return o.c0 == b.c0 && o.c1 == b.c1 && o.r1 == b.r0 && o.ranks == b.ranks;
      });
      if (it != open.end()) {
        it->r1 = b.r1;
        next.push_back(*it);
        it->ranks = {-1};  // consumed
      } else {
        next.push_back(b);
      }
    }
    for (auto& o : open)
      if (!(o.ranks.size() == 1 && o.ranks[0] == -1)) v.blocks.push_back(o);
    open = std::move(next);
  }
  for (auto& o : open) v.blocks.push_back(o);
  std::sort(v.blocks.begin(), v.blocks.end(), [](const Block& a, const Block& b) {
    return std::tie(a.r0, a.c0) < std::tie(b.r0, b.c0);
  });
  return v;
}

std::string render_svg(const Plan& plan, const Options& opt, bool standalone) {
  const auto states = states_of(plan);
  const Mesh& mesh = plan.mesh();
  const auto R = mesh.num_ranks();
  const int panel = 230, gap = 120, margin = 20, top = 70;
  const std::int64_t Lr = plan.shape().empty() ? 1 : plan.shape()[static_cast<std::size_t>(opt.dim_row)];
  const std::int64_t Lc = opt.dim_col >= 0 ? plan.shape()[static_cast<std::size_t>(opt.dim_col)] : 1;
  // panel aspect follows the tensor (clamped), so blocks keep their proportions
  const double aspect = std::clamp(static_cast<double>(std::max<std::int64_t>(Lr, 1)) / static_cast<double>(std::max<std::int64_t>(Lc, 1)), 0.25, 4.0);
  const int pw = aspect >= 1 ? static_cast<int>(panel / aspect) : panel;
  const int ph = aspect >= 1 ? panel : static_cast<int>(panel * aspect);
  const int mesh_cols = static_cast<int>(R / mesh.size(0));
  const int cell = std::clamp(480 / std::max(mesh_cols, 1), 14, 48);
  const int mesh_h = static_cast<int>(mesh.size(0)) * cell + 40;
  const int states_w = static_cast<int>(states.size()) * (pw + gap);
  const int width = std::max({states_w, mesh_cols * cell + 360, 1100}) + 2 * margin;
  const int states_y = top + mesh_h + 30;
  const int bars_y = states_y + ph + 150;
  const int height = bars_y + 40 + 22 * static_cast<int>(plan.steps.size() + 2) + 20;
  std::string o;
  if (standalone) o += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o += fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"plan\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
                   "font-family=\"sans-serif\" font-size=\"12\">\n", width, height, width, height);
  o += "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
       "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#000\" stroke-opacity=\"0.35\" stroke-width=\"2\"/></pattern>"
       "<marker id=\"arrow\" markerWidth=\"8\" markerHeight=\"8\" refX=\"7\" refY=\"4\" orient=\"auto\"><path d=\"M0,0 L8,4 L0,8 z\" fill=\"#444\"/></marker></defs>\n";
  o += fmt::format("<rect width=\"{}\" height=\"{}\" fill=\"#fff\"/>\n", width, height);
  o += fmt::format("<text x=\"{}\" y=\"28\" font-size=\"18\" font-weight=\"bold\">{} &#8594; {}</text>\n", margin,
                   esc(plan.src.placements_str()), esc(plan.dst.placements_str()));
  o += fmt::format("<text x=\"{}\" y=\"50\">mesh {} ({} ranks), tensor {} {}, cost model {}, edges {}: total {:.3f} us in {} "
                   "step(s), workspace {}</text>\n", margin, esc(mesh.str()), R, shape_str(plan.shape()), to_string(plan.dtype()),
                   esc(plan.cost_model), to_string(plan.edges), plan.total_cost_us, plan.steps.size(), human_bytes(plan.peak_bytes));
  // mesh of ranks
  o += fmt::format("<g id=\"mesh\"><text x=\"{}\" y=\"{}\" font-weight=\"bold\">mesh (rank, coordinate)</text>\n", margin, top);
  for (std::int64_t p = 0; p < R; ++p) {
    const auto c = mesh.coord_at(p);
    const auto r = mesh.rank_at(c);
    const int x = margin + static_cast<int>(p % mesh_cols) * cell, y = top + 10 + static_cast<int>(p / mesh_cols) * cell;
    o += fmt::format("<g class=\"rank\" data-rank=\"{}\"><title>rank {} coord ({})</title><rect x=\"{}\" y=\"{}\" width=\"{}\" "
                     "height=\"{}\" fill=\"{}\" stroke=\"#fff\"/><text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"{}\">{}</text></g>\n",
                     r, r, fmt::join(c, ","), x, y, cell, cell, color(r, R), x + cell / 2, y + cell / 2 + 4, cell >= 24 ? 11 : 8, r);
  }
  o += "</g>\n";
  // states
  for (std::size_t k = 0; k < states.size(); ++k) {
    const auto v = view_of(states[k], opt);
    const int x0 = margin + static_cast<int>(k) * (pw + gap), y0 = states_y;
    o += fmt::format("<g class=\"state\" data-state=\"{}\"><text x=\"{}\" y=\"{}\" font-weight=\"bold\">{}{}</text>\n", k, x0,
                     y0 - 8, k == 0 ? "source " : (k + 1 == states.size() ? "target " : ""), esc(v.placements));
    o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f4f4f4\" stroke=\"#999\"/>\n", x0, y0, pw, ph);
    for (const auto& b : v.blocks) {
      const double x = x0 + static_cast<double>(b.c0) / static_cast<double>(Lc) * pw;
      const double y = y0 + static_cast<double>(b.r0) / static_cast<double>(Lr) * ph;
      const double w = static_cast<double>(b.c1 - b.c0) / static_cast<double>(Lc) * pw;
      const double h = static_cast<double>(b.r1 - b.r0) / static_cast<double>(Lr) * ph;
      const std::string label = rank_ranges(b.ranks);
      o += fmt::format("<g class=\"blk\" data-state=\"{}\" data-ranks=\"{}\" data-box=\"{} {} {} {}\"><title>dim {} {}:{}{} — "
                       "rank(s) {}</title>", k, fmt::join(b.ranks, " "), b.r0, b.r1, b.c0, b.c1, opt.dim_row, b.r0, b.r1,
                       opt.dim_col >= 0 ? fmt::format(", dim {} {}:{}", opt.dim_col, b.c0, b.c1) : std::string(), label);
      if (b.ranks.empty()) {
        o += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"#fff\" stroke=\"#ccc\"/>", x, y, w, h);
      } else {
        // replicated blocks: one stripe per owner (up to 8), the first owner's colour beyond that
        const std::size_t stripes = b.ranks.size() <= 8 ? b.ranks.size() : 1;
        for (std::size_t s = 0; s < stripes; ++s)
          o += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"/>",
                           x + w * static_cast<double>(s) / static_cast<double>(stripes), y, w / static_cast<double>(stripes), h,
                           color(b.ranks[s], R));
        o += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\" stroke=\"#333\" stroke-width=\"0.6\"/>",
                         x, y, w, h, v.partial_note.empty() ? "none" : "url(#hatch)");
        const double fs = std::min(11.0, std::min(h * 0.6, w / (0.62 * static_cast<double>(label.size()) + 0.5)));
        if (fs >= 6)
          o += fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\" font-size=\"{:.1f}\">{}</text>", x + w / 2,
                           y + h / 2 + fs / 3, fs, label);
      }
      o += "</g>\n";
    }
    if (!v.partial_note.empty())
      o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\">{}</text>\n", x0, y0 + ph + 14, esc(v.partial_note));
    o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"#555\">rows: dim {} ({}){}</text>\n", x0,
                     y0 + ph + (v.partial_note.empty() ? 14 : 28), opt.dim_row, Lr,
                     opt.dim_col >= 0 ? fmt::format(", cols: dim {} ({})", opt.dim_col, Lc) : std::string());
    o += "</g>\n";
    if (k + 1 < states.size()) {
      const Step& s = plan.steps[k];
      const int ax = x0 + pw + 8, ay = y0 + ph / 2;
      o += fmt::format("<g class=\"step\" data-step=\"{}\"><line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#444\" "
                       "marker-end=\"url(#arrow)\"/>", k, ax, ay, ax + gap - 16, ay);
      o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" font-weight=\"bold\">{}</text>", ax, ay - 30, esc(step_title(plan, s)));
      o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\">{:.3f} us</text>", ax, ay - 16, s.cost_us);
      o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\">sent {}</text>", ax, ay + 16, human_bytes(s.bytes_sent));
      o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\">pad {}</text>", ax, ay + 30, human_bytes(s.padding_bytes));
      o += fmt::format("<title>{}: {}</title></g>\n", esc(step_title(plan, s)), esc(s.why));
    }
  }
  // per-step cost bars, and the runner-up
  const double scale_max = std::max({plan.total_cost_us, plan.runner_up ? plan.runner_up->total_cost_us : 0.0, 1e-9});
  const int bar_w = std::max(300, width - 2 * margin - 420);
  o += fmt::format("<g id=\"costs\"><text x=\"{}\" y=\"{}\" font-weight=\"bold\">cost per step (us)</text>\n", margin, bars_y);
  int y = bars_y + 12;
  for (std::size_t k = 0; k < plan.steps.size(); ++k, y += 22) {
    const Step& s = plan.steps[k];
    const double w = s.cost_us / scale_max * bar_w;
    o += fmt::format("<g class=\"bar\" data-step=\"{}\"><text x=\"{}\" y=\"{}\">{}. {}</text><rect x=\"{}\" y=\"{}\" width=\"{:.2f}\" "
                     "height=\"14\" fill=\"#4a7bd0\"/><text x=\"{:.2f}\" y=\"{}\">{:.3f} (alpha {:.3f} + wire {:.3f} + copy {:.3f})</text></g>\n",
                     k, margin, y + 11, k + 1, esc(to_string(s.kind).data()), margin + 140, y, std::max(w, 1.0),
                     margin + 146 + std::max(w, 1.0), y + 11, s.cost_us, s.alpha_us, s.wire_us, s.copy_us);
  }
  o += fmt::format("<g class=\"bar total\"><text x=\"{}\" y=\"{}\" font-weight=\"bold\">plan</text><rect x=\"{}\" y=\"{}\" "
                   "width=\"{:.2f}\" height=\"14\" fill=\"#2c5aa0\"/><text x=\"{:.2f}\" y=\"{}\">{:.3f} us</text></g>\n",
                   margin, y + 11, margin + 140, y, std::max(plan.total_cost_us / scale_max * bar_w, 1.0),
                   margin + 146 + std::max(plan.total_cost_us / scale_max * bar_w, 1.0), y + 11, plan.total_cost_us);
  y += 22;
  if (plan.runner_up)
    o += fmt::format("<g class=\"bar runner-up\"><text x=\"{}\" y=\"{}\">runner-up</text><rect x=\"{}\" y=\"{}\" width=\"{:.2f}\" "
                     "height=\"14\" fill=\"#bbb\"/><text x=\"{:.2f}\" y=\"{}\">{:.3f} us  {}</text></g>\n",
                     margin, y + 11, margin + 140, y, std::max(plan.runner_up->total_cost_us / scale_max * bar_w, 1.0),
                     margin + 146 + std::max(plan.runner_up->total_cost_us / scale_max * bar_w, 1.0), y + 11,
                     plan.runner_up->total_cost_us, esc(plan.runner_up->trace));
  o += "</g>\n</svg>\n";
  return o;
}

std::string render_html(const Plan& plan, const Options& opt) {
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>dtensor plan " + esc(plan.trace()) +
                  "</title>\n<style>\nbody{font-family:sans-serif;margin:16px;color:#222}\n"
                  ".blk.dim,.rank.dim{opacity:.18}\n.blk.hl rect:last-of-type{stroke:#000;stroke-width:2.5}\n"
                  "li.rank{display:inline-block;margin:2px 6px;padding:1px 6px;border-radius:4px;cursor:default}\n"
                  "li.rank.hl{outline:2px solid #000}\n#steps li{margin:6px 0}\n.why{color:#555}\n"
                  "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;font-size:12px;text-align:right}\n"
                  "</style></head><body>\n";
  o += fmt::format("<h1>{} &#8594; {}</h1>\n<p>trace <code>{}</code></p>\n", esc(plan.src.placements_str()), esc(plan.dst.placements_str()), esc(plan.trace()));
  o += render_svg(plan, opt, false);
  o += "<h2>ranks</h2><p>hover a rank or a block: every block holding that rank's data lights up in every state.</p>\n<ul id=\"ranks\">\n";
  for (std::int64_t p = 0; p < plan.mesh().num_ranks(); ++p) {
    const auto c = plan.mesh().coord_at(p);
    const auto r = plan.mesh().rank_at(c);
    o += fmt::format("<li class=\"rank\" data-rank=\"{}\" style=\"background:{}\">rank {} ({})</li>\n", r,
                     color(r, plan.mesh().num_ranks()), r, fmt::join(c, ","));
  }
  o += "</ul>\n<h2>steps</h2>\n<ol id=\"steps\">\n";
  for (const auto& s : plan.steps)
    o += fmt::format("<li class=\"step\"><b>{}</b>: <code>{}</code> &#8594; <code>{}</code><br>sent {} / received {} per rank "
                     "(largest), padding {}, local copies {}, workspace {}, cost {:.3f} us (alpha {:.3f} + wire {:.3f} + copy {:.3f})"
                     "<br><span class=\"why\">why: {}</span></li>\n",
                     esc(step_title(plan, s)), esc(s.from.str()), esc(s.to.str()), human_bytes(s.bytes_sent),
                     human_bytes(s.bytes_received), human_bytes(s.padding_bytes), human_bytes(s.copy_bytes),
                     human_bytes(s.peak_bytes), s.cost_us, s.alpha_us, s.wire_us, s.copy_us, esc(s.why));
  if (plan.steps.empty()) o += "<li class=\"step\">nothing to do: source and target are the same layout</li>\n";
  o += "</ol>\n";
  if (plan.runner_up)
    o += fmt::format("<p>runner-up (cheapest plan with another first step): {:.3f} us, <code>{}</code></p>\n",
                     plan.runner_up->total_cost_us, esc(plan.runner_up->trace));
  o += R"JS(<script>
(function(){
  const blocks = Array.from(document.querySelectorAll('.blk'));
  const ranks = Array.from(document.querySelectorAll('.rank'));
  function show(set){
    blocks.forEach(b => {
      const owners = (b.dataset.ranks || '').split(' ');
      const on = set && owners.some(r => set.has(r));
      b.classList.toggle('hl', !!on); b.classList.toggle('dim', !!set && !on);
    });
    ranks.forEach(r => { const on = set && set.has(r.dataset.rank);
      r.classList.toggle('hl', !!on); r.classList.toggle('dim', !!set && !on); });
  }
  blocks.forEach(b => { b.addEventListener('mouseenter', () => show(new Set((b.dataset.ranks||'').split(' ').filter(x => x))));
                        b.addEventListener('mouseleave', () => show(null)); });
  ranks.forEach(r => { r.addEventListener('mouseenter', () => show(new Set([r.dataset.rank])));
                       r.addEventListener('mouseleave', () => show(null)); });
})();
</script>
</body></html>
)JS";
  return o;
}

std::string render_text(const Plan& plan, const Options& opt, int width) {
  const auto states = states_of(plan);
  std::string o = fmt::format("plan {} on mesh {}, shape {} {}: {:.3f} us in {} step(s)\n", plan.trace(), plan.mesh().str(),
                              shape_str(plan.shape()), to_string(plan.dtype()), plan.total_cost_us, plan.steps.size());
  for (std::size_t k = 0; k < states.size(); ++k) {
    const auto v = view_of(states[k], opt);
    o += fmt::format("\nstate {}: {}{}\n", k, v.placements, v.partial_note.empty() ? "" : "  [" + v.partial_note + "]");
    const std::size_t nr = v.row_cuts.size() - 1, nc = v.col_cuts.size() - 1;
    // cell text per (row block, col block)
    std::vector<std::vector<std::string>> cell(nr, std::vector<std::string>(nc, "-"));
    for (const auto& b : v.blocks) {
      const auto i0 = std::lower_bound(v.row_cuts.begin(), v.row_cuts.end(), b.r0) - v.row_cuts.begin();
      const auto i1 = std::lower_bound(v.row_cuts.begin(), v.row_cuts.end(), b.r1) - v.row_cuts.begin();
      const auto j0 = std::lower_bound(v.col_cuts.begin(), v.col_cuts.end(), b.c0) - v.col_cuts.begin();
      const auto j1 = std::lower_bound(v.col_cuts.begin(), v.col_cuts.end(), b.c1) - v.col_cuts.begin();
      for (auto i = i0; i < i1; ++i)
        for (auto j = j0; j < j1; ++j) cell[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = rank_ranges(b.ranks);
    }
    std::size_t cw = 3, lw = 5;
    for (std::size_t i = 0; i < nr; ++i) {
      lw = std::max(lw, fmt::format("{}:{}", v.row_cuts[i], v.row_cuts[i + 1]).size());
      for (const auto& c : cell[i]) cw = std::max(cw, c.size());
    }
    for (std::size_t j = 0; j < nc; ++j) cw = std::max(cw, fmt::format("{}:{}", v.col_cuts[j], v.col_cuts[j + 1]).size());
    const std::size_t fit = std::max<std::size_t>(1, (static_cast<std::size_t>(std::max(width, 40)) - lw - 4) / (cw + 1));
    const std::size_t shown = std::min(nc, fit);
    o += fmt::format("{:>{}}  |", opt.dim_col >= 0 ? fmt::format("d{}\\d{}", opt.dim_row, opt.dim_col) : fmt::format("d{}", opt.dim_row), lw);
    for (std::size_t j = 0; j < shown; ++j)
      o += fmt::format(" {:<{}}", opt.dim_col >= 0 ? fmt::format("{}:{}", v.col_cuts[j], v.col_cuts[j + 1]) : "ranks", cw);
    o += shown < nc ? fmt::format(" ... ({} more columns)\n", nc - shown) : "\n";
    for (std::size_t i = 0; i < nr; ++i) {
      o += fmt::format("{:>{}}  |", fmt::format("{}:{}", v.row_cuts[i], v.row_cuts[i + 1]), lw);
      for (std::size_t j = 0; j < shown; ++j) o += fmt::format(" {:<{}}", cell[i][j], cw);
      o += "\n";
    }
    if (k < plan.steps.size()) {
      const Step& s = plan.steps[k];
      o += fmt::format("\n  step {}: {}  sent {}  pad {}  copy {}  {:.3f} us\n    why: {}\n", k + 1, step_title(plan, s),
                       human_bytes(s.bytes_sent), human_bytes(s.padding_bytes), human_bytes(s.copy_bytes), s.cost_us, s.why);
    }
  }
  if (plan.runner_up) o += fmt::format("\nrunner-up: {:.3f} us  {}\n", plan.runner_up->total_cost_us, plan.runner_up->trace);
  return o;
}

std::string render_dot(const Plan& plan, const CostModel& cost, std::size_t max_states) {
  // the states a shortest-path search explores: everything within the plan's cost
  const ExploredGraph g = explore(plan.src, plan.dst, cost, plan.edges, plan.total_cost_us, max_states);
  std::set<std::pair<std::string, std::string>> path;
  Sharding cur = plan.src.sharding();
  for (const auto& s : plan.steps) {
    path.insert({cur.str(), s.to.str()});
    cur = s.to;
  }
  std::string out = "digraph redistribution {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n";
  out += fmt::format("  label=\"{} -> {}: explored states within the plan's cost {:.3f} us\";\n", plan.src.placements_str(), plan.dst.placements_str(),
                     plan.total_cost_us);
  for (const auto& n : g.nodes) {
    const std::string k = n.state.str();
    const bool on_path = k == plan.src.placements_str() || std::any_of(path.begin(), path.end(), [&](const auto& p) { return p.second == k; });
    out += fmt::format("  \"{}\" [label=\"{}\\n{:.2f} us\"{}];\n", k, k, n.cost_us, on_path ? ", style=bold, color=red" : "");
  }
  for (const auto& e : g.arcs) {
    const std::string a = g.nodes[e.from].state.str(), b = g.nodes[e.to].state.str();
    const bool on = path.count({a, b}) > 0;
    out += fmt::format("  \"{}\" -> \"{}\" [label=\"{} {} {:.2f}\"{}];\n", a, b, to_string(e.kind), fmt::join(e.mesh_dims, ","),
                       e.cost_us, on ? ", color=red, penwidth=2.5" : ", color=gray60");
  }
  out += "}\n";
  return out;
}

}  // namespace dtensor::viz

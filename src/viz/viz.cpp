#include "dtensor/explore.hpp"
#include "dtensor/viz.hpp"

#include "dtensor/ownership_map.hpp"

#include "dtensor/comm.hpp"
#include "dtensor/error.hpp"

#include <algorithm>

#include <fmt/ranges.h>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <queue>
#include <set>

#include "dtensor/error.hpp"

namespace dtensor::viz {
namespace {

// Evenly spaced hues: neighbouring ranks get distinguishable colours, the same everywhere.
std::string color(std::int64_t rank, std::int64_t n) {
  const double h = std::fmod(static_cast<double>(rank) * 360.0 / static_cast<double>(std::max<std::int64_t>(n, 1)) +
                                 (rank % 2) * 180.0 / static_cast<double>(std::max<std::int64_t>(n, 1)), 360.0);
  return fmt::format("hsl({:.0f},70%,{}%)", h, rank % 3 == 0 ? 62 : (rank % 3 == 1 ? 72 : 54));
}

std::vector<Layout> states_of(const Plan& plan) {
  std::vector<Layout> out{plan.src};
  for (const auto& s : plan.steps) out.emplace_back(plan.mesh(), plan.shape(), plan.dtype(), s.to);
  return out;
}

std::string step_title(const Plan& plan, const Step& s) {
  (void)plan;
  if (s.mesh_dims.empty()) return std::string(to_string(s.kind));
  return fmt::format("{} mesh {}", to_string(s.kind), fmt::join(s.mesh_dims, ","));
}

}  // namespace

std::string escape_xml(const std::string& s) {
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

namespace {

// Width in px of `text` at font size `fs`: an upper estimate per character class, taken from
// DejaVu Sans (the widest of the usual default sans-serif fonts), so text laid out with it fits
// in the fonts browsers actually pick. One glyph per UTF-8 sequence.
double text_width(std::string_view text, double fs, bool bold = false) {
  double em = 0;
  for (unsigned char c : text) {
    if (c >= 0x80) {
      if ((c & 0xC0) != 0x80) em += 1.0;
      continue;
    }
    if (std::strchr("il.,:;!|'`", c)) em += 0.34;
    else if (std::strchr("()[]{} tfjr-/", c)) em += 0.44;
    else if (std::strchr("mwMW@", c)) em += 1.0;
    else if (std::isupper(c) || std::strchr("#%&_=+<>~", c)) em += 0.8;
    else em += 0.68;
  }
  return em * fs * (bold ? 1.12 : 1.0);
}

// Greedy line breaking at spaces; a word wider than the line breaks after ')', ',' or '>' (the
// boundaries of placements and trace states), or between characters as a last resort.
std::vector<std::string> wrap(const std::string& text, double max_w, double fs, bool bold = false) {
  std::vector<std::string> words, lines;
  for (std::size_t i = 0; i < text.size();) {
    const auto j = std::min(text.find(' ', i), text.size());
    std::string w = text.substr(i, j - i);
    while (text_width(w, fs, bold) > max_w && w.size() > 1) {
      std::size_t cut = 0;
      for (std::size_t k = 1; k < w.size(); ++k)
        if ((w[k - 1] == ')' || w[k - 1] == ',' || w[k - 1] == '>') && text_width(w.substr(0, k), fs, bold) <= max_w) cut = k;
      if (cut == 0)
        for (cut = w.size() - 1; cut > 1 && text_width(w.substr(0, cut), fs, bold) > max_w; --cut) {
        }
      words.push_back(w.substr(0, cut));
      w = w.substr(cut);
    }
    if (!w.empty()) words.push_back(w);
    i = j + 1;
  }
  for (const auto& w : words) {
    if (!lines.empty() && text_width(lines.back() + " " + w, fs, bold) <= max_w) lines.back() += " " + w;
    else lines.push_back(w);
  }
  if (lines.empty()) lines.emplace_back();
  return lines;
}

std::string text_lines(double x, double y, double fs, double line_h, const std::vector<std::string>& lines,
                       std::string_view attrs = "") {
  std::string o;
  for (std::size_t i = 0; i < lines.size(); ++i)
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\"{}{}>{}</text>\n", x, y + line_h * static_cast<double>(i), fs,
                     attrs.empty() ? "" : " ", attrs, escape_xml(lines[i]));
  return o;
}

// The mesh as a grid of grids: the last mesh dim runs along the columns and the one before it
// along the rows of each small grid; the leading dims pick the small grid (the one before them
// along the columns of grids, the rest, flattened, along their rows). Every small grid is
// captioned with its leading coordinates, every row and column with its own.
struct MeshPicture {
  std::string svg;
  double width = 0, height = 0;
};

MeshPicture draw_mesh(const Mesh& mesh, double x0, double y0, double max_w) {
  const int n = mesh.ndim();
  const auto name = [&](int m) { return mesh.names().empty() ? fmt::format("d{}", m) : mesh.names()[static_cast<std::size_t>(m)]; };
  const int rows_dim = n >= 2 ? n - 2 : -1, cols_dim = n - 1;
  const std::int64_t IR = rows_dim >= 0 ? mesh.size(rows_dim) : 1, IC = mesh.size(cols_dim);
  const int lead = std::max(n - 2, 0);  // dims that pick the small grid
  const std::int64_t OC = lead >= 1 ? mesh.size(n - 3) : 1;
  const std::int64_t OR = mesh.num_ranks() / (OC * IR * IC);
  MeshPicture pic;
  std::string& o = pic.svg;
  // legend: which mesh dim runs where
  std::string legend = fmt::format("mesh {} ({} ranks): columns {}", mesh.str(), mesh.num_ranks(), name(cols_dim));
  if (rows_dim >= 0) legend += fmt::format(", rows {}", name(rows_dim));
  if (lead >= 1) {
    std::vector<std::string> l;
    for (int m = 0; m < lead; ++m) l.push_back(name(m));
    legend += fmt::format(", one grid per {}", fmt::join(l, ", "));
  }
  if (mesh.names().empty()) legend += " (dK = mesh dim K)";
  const auto legend_lines = wrap(legend, max_w, 12, true);
  o += text_lines(x0, y0 + 12, 12, 16, legend_lines, "font-weight=\"bold\"");
  double y = y0 + 16.0 * static_cast<double>(legend_lines.size()) + 6;
  const double hfs = 10;  // coordinate headers
  double rhw = 0;
  if (rows_dim >= 0)
    for (std::int64_t i = 0; i < IR; ++i) rhw = std::max(rhw, text_width(fmt::format("{}={}", name(rows_dim), i), hfs) + 6);
  const auto caption_of = [&](std::int64_t g) {  // leading coordinates of small grid g
    std::vector<std::int64_t> coord(static_cast<std::size_t>(n), 0);
    auto rest = g;
    for (int m = lead - 1; m >= 0; --m) {
      coord[static_cast<std::size_t>(m)] = rest % mesh.size(m);
      rest /= mesh.size(m);
    }
    std::vector<std::string> parts;
    for (int m = 0; m < lead; ++m) parts.push_back(fmt::format("{}={}", name(m), coord[static_cast<std::size_t>(m)]));
    return fmt::format("{}", fmt::join(parts, ", "));
  };
  double cap_w = 0;
  if (lead >= 1)
    for (std::int64_t g = 0; g < OR * OC; ++g) cap_w = std::max(cap_w, text_width(caption_of(g), 11, true));
  const double sg = 18;  // space between small grids
  const double cell = std::clamp(std::floor((max_w - static_cast<double>(OC) * (rhw + sg)) / static_cast<double>(OC * IC)), 16.0, 44.0);
  const double sub_w = std::max(rhw + static_cast<double>(IC) * cell, cap_w + 4);
  const double cap_h = lead >= 1 ? 16 : 0, colhdr_h = 14;
  const double sub_h = cap_h + colhdr_h + static_cast<double>(IR) * cell;
  // column headers "tp=1" when the widest fits a cell, else bare coordinates, else every 5th
  const auto widest = std::to_string(IC - 1);
  const bool full_cols = text_width(fmt::format("{}={}", name(cols_dim), widest), hfs) <= cell - 2;
  const bool bare_cols = text_width(widest, hfs) <= cell - 2;
  const auto col_label = [&](std::int64_t j) {
    if (full_cols) return fmt::format("{}={}", name(cols_dim), j);
    if (bare_cols || (j % 5 == 0 && text_width(std::to_string(j), hfs) <= 5 * cell - 2)) return std::to_string(j);
    return std::string();
  };
  const auto max_rank = mesh.num_ranks() - 1;
  const double rank_fs = std::min(11.0, (cell - 4) / std::max(text_width(std::to_string(max_rank), 1.0), 1e-9));
  std::vector<std::int64_t> coord(static_cast<std::size_t>(n), 0);
  for (std::int64_t g = 0; g < OR * OC; ++g) {
    const double gx = x0 + static_cast<double>(g % OC) * (sub_w + sg), gy = y + static_cast<double>(g / OC) * (sub_h + 12);
    o += fmt::format("<g class=\"mesh-grid\" data-grid=\"{}\">\n", g);
    if (lead >= 1) o += text_lines(gx, gy + 12, 11, 14, {caption_of(g)}, "font-weight=\"bold\"");
    const double cx = gx + rhw, cy = gy + cap_h + colhdr_h;
    for (std::int64_t j = 0; j < IC; ++j)
      if (const auto l = col_label(j); !l.empty())
        o += fmt::format("<text class=\"axis\" x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"middle\" fill=\"#555\">{}</text>\n",
                         cx + (static_cast<double>(j) + 0.5) * cell, cy - 3, hfs, escape_xml(l));
    if (rows_dim >= 0)
      for (std::int64_t i = 0; i < IR; ++i)
        o += fmt::format("<text class=\"axis\" x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"end\" fill=\"#555\">{}</text>\n",
                         cx - 4, cy + (static_cast<double>(i) + 0.5) * cell + 3.5, hfs, escape_xml(fmt::format("{}={}", name(rows_dim), i)));
    // the small grid's ranks: leading coordinates from g, then (i, j)
    auto rest = g;
    for (int m = lead - 1; m >= 0; --m) {
      coord[static_cast<std::size_t>(m)] = rest % mesh.size(m);
      rest /= mesh.size(m);
    }
    for (std::int64_t i = 0; i < IR; ++i)
      for (std::int64_t j = 0; j < IC; ++j) {
        if (rows_dim >= 0) coord[static_cast<std::size_t>(rows_dim)] = i;
        coord[static_cast<std::size_t>(cols_dim)] = j;
        const auto r = mesh.rank_at(coord);
        const double x = cx + static_cast<double>(j) * cell, yy = cy + static_cast<double>(i) * cell;
        o += fmt::format("<g class=\"rank\" data-rank=\"{}\"><title>rank {} coord ({})</title><rect x=\"{:.1f}\" y=\"{:.1f}\" "
                         "width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" stroke=\"#fff\"/>",
                         r, r, fmt::join(coord, ","), x, yy, cell, cell, color(r, mesh.num_ranks()));
        if (rank_fs >= 6)
          o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"{:.1f}\">{}</text>", x + cell / 2,
                           yy + cell / 2 + rank_fs / 3, rank_fs, r);
        o += "</g>\n";
      }
    o += "</g>\n";
  }
  pic.width = std::max(static_cast<double>(OC) * (sub_w + sg) - sg, text_width(legend_lines[0], 12, true));
  pic.height = (y - y0) + static_cast<double>(OR) * (sub_h + 12);
  return pic;
}

}  // namespace

std::string render_svg(const Plan& plan, const Options& opt, bool standalone) {
  const auto states = states_of(plan);
  const Mesh& mesh = plan.mesh();
  const auto R = mesh.num_ranks();
  const double margin = 20, panel = 230;
  const std::int64_t Lr = plan.shape().empty() ? 1 : plan.shape()[static_cast<std::size_t>(opt.dim_row)];
  const std::int64_t Lc = opt.dim_col >= 0 ? plan.shape()[static_cast<std::size_t>(opt.dim_col)] : 1;
  // panel aspect follows the tensor (clamped so the shorter side keeps room for the step labels)
  const double aspect = std::clamp(static_cast<double>(std::max<std::int64_t>(Lr, 1)) / static_cast<double>(std::max<std::int64_t>(Lc, 1)), 0.45, 2.2);
  const double pw = aspect >= 1 ? std::round(panel / aspect) : panel;
  const double ph = aspect >= 1 ? panel : std::round(panel * aspect);
  // the gap between panels holds the step's labels
  double gap = 120;
  for (const auto& s : plan.steps) {
    gap = std::max(gap, text_width(step_title(plan, s), 11, true) + 28);
    gap = std::max(gap, text_width(fmt::format("sent {}", bytes_text(s.bytes_sent)), 10) + 28);
  }
  const double pitch = pw + gap;
  const double states_w = static_cast<double>(states.size()) * pitch - gap;
  // per-step cost bars: label column, bar, value text
  std::vector<std::string> bar_labels, bar_values;
  for (std::size_t k = 0; k < plan.steps.size(); ++k) {
    const Step& s = plan.steps[k];
    bar_labels.push_back(fmt::format("{}. {}", k + 1, to_string(s.kind)));
    bar_values.push_back(fmt::format("{:.3f} (alpha {:.3f} + wire {:.3f} + copy {:.3f})", s.cost_us, s.alpha_us, s.wire_us, s.copy_us));
  }
  bar_labels.emplace_back("plan");
  bar_values.push_back(fmt::format("{:.3f} us", plan.total_cost_us));
  if (plan.runner_up) {
    bar_labels.emplace_back("runner-up");
    bar_values.push_back(fmt::format("{:.3f} us", plan.runner_up->total_cost_us));
  }
  double label_w = 0, value_w = 0;
  for (std::size_t i = 0; i < bar_labels.size(); ++i) {
    label_w = std::max(label_w, text_width(bar_labels[i], 12, bar_labels[i] == "plan") + 12);
    value_w = std::max(value_w, text_width(bar_values[i], 12) + 8);
  }
  const double bar_w = 420;
  const double mesh_max_w = std::max(1060.0, states_w);
  // the picture's width: the widest of mesh, states and bars (text wraps to it)
  const MeshPicture probe = draw_mesh(mesh, 0, 0, mesh_max_w);
  const double inner_w = std::max({1060.0, states_w, probe.width, label_w + bar_w + value_w});
  const double width = std::ceil(inner_w + 2 * margin);
  std::string body;
  double y = 10;
  // title and summary, wrapped to the width
  const auto title = wrap(fmt::format("{} \u2192 {}", plan.src.placements_str(), plan.dst.placements_str()), inner_w, 18, true);
  body += text_lines(margin, y + 18, 18, 22, title, "font-weight=\"bold\"");
  y += 22.0 * static_cast<double>(title.size()) + 4;
  const auto summary = wrap(fmt::format("tensor {} {}, cost model {}, edges {}: total {:.3f} us in {} step(s), workspace {}",
                                        shape_str(plan.shape()), to_string(plan.dtype()), plan.cost_model, to_string(plan.edges),
                                        plan.total_cost_us, plan.steps.size(), bytes_text(plan.peak_bytes)),
                            inner_w, 12);
  body += text_lines(margin, y + 12, 12, 16, summary);
  y += 16.0 * static_cast<double>(summary.size()) + 12;
  // mesh of ranks
  const MeshPicture pic = draw_mesh(mesh, margin, y, mesh_max_w);
  body += "<g id=\"mesh\">\n" + pic.svg + "</g>\n";
  y += pic.height + 20;
  // states: captions above (wrapped to the panel pitch), notes below
  std::vector<std::vector<std::string>> caps, notes;
  std::vector<StateView> views;
  std::size_t cap_lines = 1, note_lines = 1;
  for (std::size_t k = 0; k < states.size(); ++k) {
    views.push_back(view_of(states[k], opt));
    const auto& v = views.back();
    // room up to the next panel; the last panel has the rest of the picture
    const double room = k + 1 < states.size() ? pitch - 14 : inner_w - static_cast<double>(k) * pitch;
    caps.push_back(wrap(fmt::format("{}{}", k == 0 ? "source " : (k + 1 == states.size() ? "target " : ""), v.placements), room, 12, true));
    std::vector<std::string> nl;
    if (!v.partial_note.empty()) nl = wrap(v.partial_note, room, 10);
    for (auto& l : wrap(fmt::format("rows: dim {} ({}){}", opt.dim_row, Lr,
                                    opt.dim_col >= 0 ? fmt::format(", cols: dim {} ({})", opt.dim_col, Lc) : std::string()),
                        room, 10))
      nl.push_back(l);
    notes.push_back(nl);
    cap_lines = std::max(cap_lines, caps.back().size());
    note_lines = std::max(note_lines, nl.size());
  }
  const double states_y = y + 15.0 * static_cast<double>(cap_lines) + 4;
  for (std::size_t k = 0; k < states.size(); ++k) {
    const auto& v = views[k];
    const double x0 = margin + static_cast<double>(k) * pitch, y0 = states_y;
    body += fmt::format("<g class=\"state\" data-state=\"{}\">\n", k);
    body += text_lines(x0, y0 - 8 - 15.0 * static_cast<double>(caps[k].size() - 1), 12, 15, caps[k], "class=\"caption\" font-weight=\"bold\"");
    body += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#f4f4f4\" stroke=\"#999\"/>\n", x0, y0, pw, ph);
    for (const auto& b : v.blocks) {
      const double x = x0 + static_cast<double>(b.c0) / static_cast<double>(Lc) * pw;
      const double by = y0 + static_cast<double>(b.r0) / static_cast<double>(Lr) * ph;
      const double w = static_cast<double>(b.c1 - b.c0) / static_cast<double>(Lc) * pw;
      const double h = static_cast<double>(b.r1 - b.r0) / static_cast<double>(Lr) * ph;
      const std::string label = rank_ranges(b.ranks);
      body += fmt::format("<g class=\"blk\" data-state=\"{}\" data-ranks=\"{}\" data-box=\"{} {} {} {}\"><title>dim {} {}:{}{} — "
                          "rank(s) {}</title>", k, fmt::join(b.ranks, " "), b.r0, b.r1, b.c0, b.c1, opt.dim_row, b.r0, b.r1,
                          opt.dim_col >= 0 ? fmt::format(", dim {} {}:{}", opt.dim_col, b.c0, b.c1) : std::string(), label);
      if (b.ranks.empty()) {
        body += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"#fff\" stroke=\"#ccc\"/>", x, by, w, h);
      } else {
        // replicated blocks: one stripe per owner (up to 8), the first owner's colour beyond that
        const std::size_t stripes = b.ranks.size() <= 8 ? b.ranks.size() : 1;
        for (std::size_t s = 0; s < stripes; ++s)
          body += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"/>",
                              x + w * static_cast<double>(s) / static_cast<double>(stripes), by, w / static_cast<double>(stripes), h,
                              color(b.ranks[s], R));
        body += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\" stroke=\"#333\" stroke-width=\"0.6\"/>",
                            x, by, w, h, v.partial_note.empty() ? "none" : "url(#hatch)");
        // the owners' label, on a white backing so it reads over stripes, only where it fits
        const double fs = std::min({11.0, h * 0.6, (w - 4) / std::max(text_width(label, 1.0) + 0.3, 1e-9)});
        if (fs >= 6) {
          const double tw = text_width(label, fs);
          body += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"#fff\" fill-opacity=\"0.75\"/>"
                              "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\" font-size=\"{:.1f}\">{}</text>",
                              x + w / 2 - tw / 2 - 1, by + h / 2 - fs * 0.62, tw + 2, fs * 1.2, x + w / 2, by + h / 2 + fs / 3, fs, label);
        }
      }
      body += "</g>\n";
    }
    body += text_lines(x0, y0 + ph + 14, 10, 13, notes[k], "fill=\"#444\"");
    body += "</g>\n";
    if (k + 1 < states.size()) {
      const Step& s = plan.steps[k];
      const double ax = x0 + pw + 8, ay = y0 + ph / 2, mid = x0 + pw + gap / 2;
      body += fmt::format("<g class=\"step\" data-step=\"{}\"><line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#444\" "
                          "marker-end=\"url(#arrow)\"/>", k, ax, ay, ax + gap - 16, ay);
      const auto label = [&](double dy, double fs, bool bold, const std::string& t) {
        body += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"middle\"{}>{}</text>", mid, ay + dy, fs,
                            bold ? " font-weight=\"bold\"" : "", escape_xml(t));
      };
      label(-30, 11, true, step_title(plan, s));
      label(-16, 10, false, fmt::format("{:.3f} us", s.cost_us));
      label(16, 10, false, fmt::format("sent {}", bytes_text(s.bytes_sent)));
      label(30, 10, false, fmt::format("pad {}", bytes_text(s.padding_bytes)));
      body += fmt::format("<title>{}: {}</title></g>\n", escape_xml(step_title(plan, s)), escape_xml(s.why));
    }
  }
  y = states_y + ph + 13.0 * static_cast<double>(note_lines) + 30;
  // per-step cost bars, and the runner-up
  const double scale_max = std::max({plan.total_cost_us, plan.runner_up ? plan.runner_up->total_cost_us : 0.0, 1e-9});
  body += fmt::format("<g id=\"costs\"><text x=\"{}\" y=\"{:.1f}\" font-weight=\"bold\">cost per step (us)</text>\n", margin, y);
  y += 12;
  const auto bar = [&](std::string_view cls, std::size_t i, double us, const char* fill, bool bold) {
    const double w = std::max(us / scale_max * bar_w, 1.0);
    body += fmt::format("<g class=\"{}\"><text x=\"{}\" y=\"{:.1f}\"{}>{}</text><rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"14\" "
                        "fill=\"{}\"/><text x=\"{:.2f}\" y=\"{:.1f}\">{}</text></g>\n",
                        cls, margin, y + 11, bold ? " font-weight=\"bold\"" : "", escape_xml(bar_labels[i]), margin + label_w, y, w, fill,
                        margin + label_w + w + 6, y + 11, escape_xml(bar_values[i]));
    y += 22;
  };
  for (std::size_t k = 0; k < plan.steps.size(); ++k) bar(fmt::format("bar\" data-step=\"{}", k), k, plan.steps[k].cost_us, "#4a7bd0", false);
  bar("bar total", plan.steps.size(), plan.total_cost_us, "#2c5aa0", true);
  if (plan.runner_up) {
    bar("bar runner-up", plan.steps.size() + 1, plan.runner_up->total_cost_us, "#bbb", false);
    const auto lines = wrap("runner-up trace: " + runner_up_trace(plan), inner_w, 11);
    body += text_lines(margin, y + 6, 11, 14, lines, "fill=\"#444\"");
    y += 14.0 * static_cast<double>(lines.size());
  }
  body += "</g>\n";
  const double height = std::ceil(y + 16);
  std::string o;
  if (standalone) o += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o += fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"plan\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
                   "font-family=\"sans-serif\" font-size=\"12\">\n", width, height, width, height);
  o += "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
       "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#000\" stroke-opacity=\"0.35\" stroke-width=\"2\"/></pattern>"
       "<marker id=\"arrow\" markerWidth=\"8\" markerHeight=\"8\" refX=\"7\" refY=\"4\" orient=\"auto\"><path d=\"M0,0 L8,4 L0,8 z\" fill=\"#444\"/></marker></defs>\n";
  o += fmt::format("<rect width=\"{}\" height=\"{}\" fill=\"#fff\"/>\n", width, height);
  o += body;
  o += "</svg>\n";
  return o;
}

std::string render_html(const Plan& plan, const Options& opt) {
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>dtensor plan " + escape_xml(plan.trace()) +
                  "</title>\n<style>\nbody{font-family:sans-serif;margin:16px;color:#222}\n"
                  ".blk.dim,.rank.dim{opacity:.18}\n.blk.hl rect:last-of-type{stroke:#000;stroke-width:2.5}\n"
                  "li.rank{display:inline-block;margin:2px 6px;padding:1px 6px;border-radius:4px;cursor:default}\n"
                  "li.rank.hl{outline:2px solid #000}\n#steps li{margin:6px 0}\n.why{color:#555}\n"
                  "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;font-size:12px;text-align:right}\n"
                  "</style></head><body>\n";
  o += fmt::format("<h1>{} &#8594; {}</h1>\n<p>trace <code>{}</code></p>\n", escape_xml(plan.src.placements_str()), escape_xml(plan.dst.placements_str()), escape_xml(plan.trace()));
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
                     escape_xml(step_title(plan, s)), escape_xml(s.from.str()), escape_xml(s.to.str()), bytes_text(s.bytes_sent),
                     bytes_text(s.bytes_received), bytes_text(s.padding_bytes), bytes_text(s.copy_bytes),
                     bytes_text(s.peak_bytes), s.cost_us, s.alpha_us, s.wire_us, s.copy_us, escape_xml(s.why));
  if (plan.steps.empty()) o += "<li class=\"step\">nothing to do: source and target are the same layout</li>\n";
  o += "</ol>\n";
  if (plan.runner_up)
    o += fmt::format("<p>runner-up (cheapest plan with another first step): {:.3f} us, <code>{}</code></p>\n",
                     plan.runner_up->total_cost_us, escape_xml(runner_up_trace(plan)));
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
                       bytes_text(s.bytes_sent), bytes_text(s.padding_bytes), bytes_text(s.copy_bytes), s.cost_us, s.why);
    }
  }
  if (plan.runner_up) o += fmt::format("\nrunner-up: {:.3f} us  {}\n", plan.runner_up->total_cost_us, runner_up_trace(plan));
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

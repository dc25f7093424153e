#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common.hpp"
#include "dtensor/cross_mesh_executor.hpp"
#include "dtensor/error.hpp"
#include "dtensor/viz.hpp"

namespace dtensor::cli {
namespace {

PlanArgs args;
std::string dims_arg, output;

std::string find_chromium() {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "";
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    std::size_t from = 0;
    while (from <= p.size()) {
      const auto colon = p.find(':', from);
      const auto dir = p.substr(from, colon == std::string::npos ? std::string::npos : colon - from);
      const auto candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
      if (colon == std::string::npos) break;
      from = colon + 1;
    }
  }
  return "";
}

// A PNG through headless Chromium: the HTML page is rendered and screenshotted. Without Chromium,
// a clear error (never HTML bytes under a .png name).
void write_png(const std::string& html, const std::string& output) {
  const std::string chromium = find_chromium();
  if (chromium.empty())
    throw InputError(fmt::format("-o {}: writing PNG needs headless Chromium (chromium not found in PATH); write .html "
                                 "or .svg instead", quote_input(output)));
  char dir_template[] = "/tmp/dtensor-show-XXXXXX";
  const char* dir = ::mkdtemp(dir_template);
  if (!dir) throw InputError("cannot create a temporary directory for the PNG rendering");
  const std::string page = std::string(dir) + "/plan.html";
  {
    std::ofstream f(page);
    f << html;
  }
  const auto abs_out = std::filesystem::absolute(output).string();
  auto q = [](const std::string& x) {  // single-quoted for the shell
    std::string r = "'";
    for (char ch : x) r += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return r + "'";
  };
  const std::string cmd = q(chromium) + " --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,1000 " +
                          "--screenshot=" + q(abs_out) + " " + q("file://" + page) + " >/dev/null 2>&1";
  std::filesystem::remove(abs_out);
  const int rc = std::system(cmd.c_str());
  std::filesystem::remove_all(dir);
  std::error_code ec;
  if (rc != 0 || !std::filesystem::exists(abs_out) || std::filesystem::file_size(abs_out, ec) == 0)
    throw InputError(fmt::format("-o {}: headless Chromium did not produce the PNG (exit {})", quote_input(output), rc));
  std::cerr << fmt::format("wrote {} ({} bytes, rendered by {})\n", output, std::filesystem::file_size(abs_out), chromium);
}

}  // namespace

void register_show(CLI::App& app) {
  auto* cmd = app.add_subcommand("show", "pictures of a redistribution plan: HTML/SVG, Graphviz dot, or terminal text");
  add_plan_flags(*cmd, args);
  cmd->add_option("--dims", dims_arg, "the two tensor dims to draw, e.g. 0,1 (default: the first two)");
  cmd->add_option("-o,--output", output,
                  "write to a file; its extension picks the format: .html, .svg, .dot, .txt, or .png (headless Chromium)");
  cmd->get_option("--format")->description("html, svg, dot or text (default: text on the terminal; with -o, the file's extension)");
  cmd->callback([] {
    std::string format = args.format;
    bool png = false;
    if (!output.empty()) {
      const auto ext = std::filesystem::path(output).extension().string();
      std::string by_ext = ext == ".svg" ? "svg" : ext == ".dot" ? "dot" : ext == ".txt" ? "text"
                         : ext == ".html" || ext == ".htm" ? "html" : ext == ".png" ? "png" : "";
      if (by_ext.empty())
        throw InputError(fmt::format("-o {}: unknown extension {} (use .html, .svg, .png, .dot or .txt)", quote_input(output),
                                     quote_input(ext)));
      if (format != "text" && format != by_ext)
        throw InputError(fmt::format("--format {} does not match -o {} ({})", format, quote_input(output), by_ext));
      png = by_ext == "png";
      format = png ? "html" : by_ext;
    }
    if (format != "text" && format != "json" && format != "html" && format != "svg" && format != "dot")
      throw InputError(fmt::format("unknown --format {} for show (expected html, svg, dot or text)", quote_input(format)));
    if (format == "json") throw InputError("show has no json format: use `dtensor plan --format json`");
    PlanArgs plan_args = args;
    plan_args.format = "text";
    // every rank of every state is drawn: bound the picture, not the machine's memory
    static constexpr std::int64_t kMaxDrawnRanks = 65536;
    auto check_size = [](const char* flag, const Mesh& mesh) {
      if (mesh.num_ranks() > kMaxDrawnRanks)
        throw InputError(fmt::format("{} {} has {} ranks; show draws every rank and supports at most {} (use `dtensor "
                                     "plan` for larger meshes)", flag, mesh.str(), mesh.num_ranks(), kMaxDrawnRanks));
    };
    std::optional<CrossMeshPlan> cross;
    std::optional<Plan> single;
    std::optional<CostModel> cost;
    if (!args.to_mesh.empty()) {
      if (format != "text") throw InputError(fmt::format("show --to-mesh draws text only (not {} yet)", format));
      const auto req = make_cross_request(plan_args);
      check_size("--mesh", req.src.mesh());
      check_size("--to-mesh", req.dst.mesh());
      cross = plan_of(req);
    } else {
      const auto req = make_request(plan_args);
      check_size("--mesh", req.src.mesh());
      single = plan_redistribution(req.src, req.dst, req.cost, req.options);
      cost = req.cost;
    }
    const Plan& plan = cross ? cross->pre : *single;
    viz::Options opt;
    const int nd = static_cast<int>(plan.shape().size());
    if (nd == 0) throw InputError("show needs a tensor of at least one dim");
    opt.dim_row = 0;
    opt.dim_col = nd >= 2 ? 1 : -1;
    if (!dims_arg.empty()) {
      std::vector<std::int64_t> d;
      std::size_t from = 0;
      while (from <= dims_arg.size()) {
        const auto comma = dims_arg.find(',', from);
        const auto part = dims_arg.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
        std::int64_t x = 0;
        const auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), x);
        if (part.empty() || ec != std::errc() || p != part.data() + part.size())
          throw InputError(fmt::format("--dims {} must be tensor dims such as 0,1", quote_input(dims_arg)));
        if (x < 0 || x >= nd) throw InputError(fmt::format("--dims names tensor dim {}, out of range for a {}-d tensor", x, nd));
        d.push_back(x);
        if (comma == std::string::npos) break;
        from = comma + 1;
      }
      if (d.empty() || d.size() > 2) throw InputError(fmt::format("--dims {} must name one or two tensor dims", quote_input(dims_arg)));
      if (d.size() == 2 && d[0] == d[1]) throw InputError(fmt::format("--dims '{}' names the same dim twice", dims_arg));
      opt.dim_row = static_cast<int>(d[0]);
      opt.dim_col = d.size() == 2 ? static_cast<int>(d[1]) : -1;
    }
    std::string out;
    if (cross) {
      winsize ws{};
      const int width = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 100;
      auto ranks_of = [](const std::vector<std::int64_t>& r) {
        std::string t;
        for (std::size_t i = 0; i < r.size(); ++i) t += fmt::format("{}{}->{}", i ? " " : "", i, r[i]);
        return t;
      };
      out = explain(*cross);
      out += fmt::format("\nsource mesh {} (mesh rank->world rank: {}), inside it:\n", cross->src.mesh().str(), ranks_of(cross->src_ranks));
      out += viz::render_text(cross->pre, opt, width);
      out += fmt::format("\ntarget mesh {} (mesh rank->world rank: {}), inside it:\n", cross->dst.mesh().str(), ranks_of(cross->dst_ranks));
      out += viz::render_text(cross->post, opt, width);
    } else if (format == "dot") out = viz::render_dot(plan, *cost);
    else if (format == "svg") out = viz::render_svg(plan, opt);
    else if (format == "html") out = viz::render_html(plan, opt);
    else {
      winsize ws{};
      const int width = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 100;
      out = viz::render_text(plan, opt, width);
    }
    if (output.empty()) {
      std::cout << out;
      return;
    }
    if (png) {
      write_png(out, output);
      return;
    }
    std::ofstream f(output);
    if (!f) throw InputError(fmt::format("cannot write {}", quote_input(output)));
    f << out;
    std::cerr << fmt::format("wrote {} ({} bytes)\n", output, out.size());
  });
}

}  // namespace dtensor::cli

#include <fstream>
#include <iostream>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common.hpp"
#include "dtensor/error.hpp"
#include "viz.hpp"

namespace dtensor::cli {
namespace {

PlanArgs args;
std::string dims_arg, output;

}  // namespace

void register_show(CLI::App& app) {
  auto* cmd = app.add_subcommand("show", "pictures of a redistribution plan: HTML/SVG, Graphviz dot, or terminal text");
  add_plan_flags(*cmd, args);
  cmd->add_option("--dims", dims_arg, "the two tensor dims to draw, e.g. 0,1 (default: the first two)");
  cmd->add_option("-o,--output", output, "write to a file: .html (default format) or .svg");
  cmd->callback([] {
    std::string format = args.format;
    if (format == "text" && !output.empty()) format = output.ends_with(".svg") ? "svg" : "html";
    if (format != "text" && format != "json" && format != "html" && format != "svg" && format != "dot")
      throw InputError(fmt::format("unknown --format '{}' for show (expected html, svg, dot or text)", format));
    if (format == "json") throw InputError("show has no json format: use `dtensor plan --format json`");
    PlanArgs plan_args = args;
    plan_args.format = "text";
    const auto req = make_request(plan_args);
    const Plan plan = plan_redistribution(req.src, req.dst, req.cost, req.options);
    viz::Options opt;
    const int nd = static_cast<int>(plan.shape.size());
    if (nd == 0) throw InputError("show needs a tensor of at least one dim");
    opt.dim_row = 0;
    opt.dim_col = nd >= 2 ? 1 : -1;
    if (!dims_arg.empty()) {
      const auto d = parse_shape(dims_arg);
      if (d.empty() || d.size() > 2) throw InputError(fmt::format("--dims '{}' must name one or two tensor dims", dims_arg));
      for (auto x : d)
        if (x >= nd) throw InputError(fmt::format("--dims names tensor dim {}, out of range for a {}-d tensor", x, nd));
      if (d.size() == 2 && d[0] == d[1]) throw InputError(fmt::format("--dims '{}' names the same dim twice", dims_arg));
      opt.dim_row = static_cast<int>(d[0]);
      opt.dim_col = d.size() == 2 ? static_cast<int>(d[1]) : -1;
    }
    std::string out;
    if (format == "dot") out = viz::render_dot(plan, req.cost);
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
    std::ofstream f(output);
    if (!f) throw InputError(fmt::format("cannot write '{}'", output));
    f << out;
    std::cerr << fmt::format("wrote {} ({} bytes)\n", output, out.size());
  });
}

}  // namespace dtensor::cli

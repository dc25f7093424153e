// dtensor tune fit | predict | show: fit the cost model to nccl-tests logs (docs/cost-model.md).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common.hpp"
#include "dtensor/tune.hpp"

namespace dtensor::cli {
namespace {

struct TuneArgs {
  std::vector<std::string> logs;
  std::string ranks, ranks_per_node, collective, output, format = "text", base = "default";
  std::string profile = "default", bytes;
} args;

std::string read_log(const std::string& path) {
  constexpr std::uintmax_t kMax = 64u << 20;
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) throw InputError(fmt::format("log {} does not exist", quote_input(path)));
  if (!std::filesystem::is_regular_file(st)) throw InputError(fmt::format("log {} is not a regular file", quote_input(path)));
  if (std::filesystem::file_size(path, ec) > kMax)
    throw InputError(fmt::format("log {} is larger than {} bytes", quote_input(path), kMax));
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<Collective> collective_flag(const std::string& text) {
  if (text.empty()) return std::nullopt;
  if (auto c = parse_collective(text)) return c;
  throw InputError(fmt::format("--collective {} is not all_gather, reduce_scatter, all_reduce, alltoall or sendrecv",
                               quote_input(text)));
}

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

void run_fit() {
  check_format(args.format);
  if (args.logs.empty()) throw InputError("tune fit needs at least one nccl-tests log");
  if (args.output.empty()) throw InputError("tune fit needs -o PROFILE.json");
  tune::LogOptions opt;
  if (!args.ranks.empty()) opt.ranks = parse_index("--ranks", args.ranks, std::int64_t{1} << 24);
  if (!args.ranks_per_node.empty()) opt.ranks_per_node = parse_index("--ranks-per-node", args.ranks_per_node, std::int64_t{1} << 24);
  opt.collective = collective_flag(args.collective);
  CostModel model = for_flag("--base", [] { return CostModel::load(args.base); });
  if (model.formula == CostModel::Formula::pytorch) throw InputError("--base: fitted curves need a ring-formula profile");
  model.name = "fitted";
  model.curves.clear();
  nlohmann::ordered_json report = nlohmann::ordered_json::array();
  std::string text;
  std::optional<std::int64_t> per_node;
  for (const auto& path : args.logs) {
    const auto log = tune::parse_nccl_log(read_log(path), path, opt);
    const bool inter = log.ranks_per_node < log.ranks;
    if (model.curve(log.collective, inter))
      throw InputError(fmt::format("two logs measure {} on the {} link (the second: {}); fit them separately",
                                   to_string(log.collective), inter ? "inter-node" : "intra-node", quote_input(path)));
    if (inter) {
      if (per_node && *per_node != log.ranks_per_node)
        throw InputError(fmt::format("log {} has {} ranks per node, an earlier one {}", quote_input(path), log.ranks_per_node, *per_node));
      per_node = log.ranks_per_node;
    }
    const auto fit = tune::fit_curve(log.rows, log.collective, inter, log.ranks);
    model.curves.push_back(fit.curve);
    auto ignored = log.ignored;
    ignored.insert(ignored.end(), fit.outliers.begin(), fit.outliers.end());
    nlohmann::ordered_json r;
    r["log"] = path;
    r["collective"] = std::string(to_string(log.collective));
    r["ranks"] = log.ranks;
    r["ranks_per_node"] = log.ranks_per_node;
    r["rows_used"] = fit.rows_used;
    r["median_rel_error"] = fit.median_rel_error;
    r["max_rel_error"] = fit.max_rel_error;
    r["bands"] = nlohmann::ordered_json::array();
    for (const auto& b : fit.curve.bands) r["bands"].push_back({{"up_to_bytes", b.up_to_bytes}, {"alpha_us", b.alpha_us}, {"bw_GBps", b.bw_GBps}});
    r["ignored"] = nlohmann::ordered_json::array();
    for (const auto& i : ignored) r["ignored"].push_back({{"line", i.line}, {"reason", i.reason}});
    report.push_back(r);
    text += fmt::format("{}: {} rows used, median error {:.1f}%, max {:.1f}%\n", path, fit.rows_used, fit.median_rel_error * 100,
                        fit.max_rel_error * 100);
    text += curve_table(fit.curve);
    for (const auto& i : ignored) text += fmt::format("  ignored line {}: {}\n", i.line, i.reason);
  }
  if (per_node) model.devices_per_host = *per_node;
  // what fit writes must load back: validate through the reader
  const std::string json = model.to_json();
  (void)CostModel::from_json(json);
  std::ofstream out(args.output);
  if (!out) throw InputError(fmt::format("-o {} cannot be written", quote_input(args.output)));
  out << nlohmann::json::parse(json).dump(2) << "\n";
  if (args.format == "json") {
    nlohmann::ordered_json j;
    j["profile"] = args.output;
    j["logs"] = report;
    std::cout << j.dump() << "\n";
  } else {
    std::cout << text << fmt::format("wrote {}\n", args.output);
  }
}

void run_predict() {
  check_format(args.format);
  const CostModel model = for_flag("--profile", [] { return CostModel::load(args.profile); });
  const auto c = collective_flag(args.collective);
  if (!c) throw InputError("tune predict needs --collective");
  if (args.ranks.empty()) throw InputError("tune predict needs --ranks N");
  const auto n = parse_index("--ranks", args.ranks, std::int64_t{1} << 24);
  if (n < 2) throw InputError(fmt::format("--ranks {} must be at least 2", n));
  const auto per_node = args.ranks_per_node.empty() ? n : parse_index("--ranks-per-node", args.ranks_per_node, n + 1);
  if (per_node < 1) throw InputError("--ranks-per-node must be at least 1");
  if (args.bytes.empty()) throw InputError("tune predict needs --bytes B[,B...]");
  std::vector<std::int64_t> sizes;
  std::stringstream ss(args.bytes);
  for (std::string b; std::getline(ss, b, ',');) sizes.push_back(parse_bytes("--bytes", b));
  const bool inter = per_node < n;
  nlohmann::ordered_json preds = nlohmann::ordered_json::array();
  std::string text = fmt::format("{} on {} ranks ({} per node), profile {}:\n", to_string(*c), n, per_node, model.name);
  for (auto b : sizes) {
    const double t = predict_collective_us(model, *c, n, inter, static_cast<double>(b));
    preds.push_back({{"bytes", b}, {"time_us", t}});
    text += fmt::format("  {:>16} bytes  {:>14.3f} us\n", b, t);
  }
  if (args.format == "json") {
    nlohmann::ordered_json j;
    j["predictions"] = preds;
    std::cout << j.dump() << "\n";
  } else {
    std::cout << text;
  }
}

void run_show() {
  check_format(args.format);
  const CostModel m = for_flag("PROFILE", [] { return CostModel::load(args.profile); });
  if (args.format == "json") {
    std::cout << m.to_json() << "\n";
    return;
  }
  std::string out = fmt::format("profile {} ({} formula), {} devices per host, local copies {:.1f} GB/s\n", m.name,
                                m.formula == CostModel::Formula::pytorch ? "pytorch" : "ring", m.devices_per_host, m.copy_bw_GBps);
  out += fmt::format("  {:<6} {:>10} {:>16} {:>12} {:>12}\n", "link", "alpha us", "per-peer us", "bw GB/s", "p2p GB/s");
  for (bool inter : {false, true}) {
    const auto& l = m.link(inter);
    out += fmt::format("  {:<6} {:>10.3f} {:>16.3f} {:>12.3f} {:>12.3f}\n", inter ? "inter" : "intra", l.alpha_us,
                       l.alpha_per_peer_us, l.bw_GBps, l.p2p_bw_GBps);
  }
  if (m.curves.empty()) out += "no fitted curves: every collective uses the link's alpha-beta line\n";
  for (const auto& c : m.curves) out += curve_table(c);
  std::cout << out;
}

}  // namespace

void register_tune(CLI::App& app) {
  auto* tune = app.add_subcommand("tune", "fit the cost model to nccl-tests measurements, predict, show profiles");
  tune->require_subcommand(1);
  auto* fit = tune->add_subcommand("fit", "fit size-band curves to nccl-tests logs and write a profile");
  fit->add_option("logs", args.logs, "nccl-tests output files (all_gather_perf, reduce_scatter_perf, all_reduce_perf, "
                                     "alltoall_perf, sendrecv_perf)");
  fit->add_option("--ranks", args.ranks, "ranks of logs without a run header");
  fit->add_option("--ranks-per-node", args.ranks_per_node, "ranks per node (default: from the device list, else all on one node)");
  fit->add_option("--collective", args.collective, "the collective, for logs that do not say");
  fit->add_option("--base", args.base, "profile whose links and copy bandwidth the fitted one keeps (default)");
  fit->add_option("-o,--output", args.output, "the profile to write (JSON, version 2)");
  fit->add_option("--format", args.format, "text or json report on stdout");
  fit->callback(run_fit);
  auto* predict = tune->add_subcommand("predict", "the time the planner charges for one collective");
  predict->add_option("--profile", args.profile, "default, pytorch or a profile file");
  predict->add_option("--collective", args.collective, "all_gather, reduce_scatter, all_reduce, alltoall or sendrecv");
  predict->add_option("--ranks", args.ranks, "group size");
  predict->add_option("--ranks-per-node", args.ranks_per_node, "ranks per node (default: all on one node)");
  predict->add_option("--bytes", args.bytes, "sizes as nccl-tests counts them (1024-based K/M/G suffixes), comma-separated");
  predict->add_option("--format", args.format, "text or json");
  predict->callback(run_predict);
  auto* show = tune->add_subcommand("show", "print a profile as a table");
  show->add_option("profile", args.profile, "default, pytorch or a profile file");
  show->add_option("--format", args.format, "text or json");
  show->callback(run_show);
}

}  // namespace dtensor::cli

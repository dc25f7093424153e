// `dtensor tune storage`: time reads from checkpoint files and fit the profile's storage field
// (tune_storage.hpp, docs/checkpoint.md).
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common.hpp"
#include "dtensor/error.hpp"
#include "dtensor/tune_storage.hpp"

namespace dtensor::cli {
namespace {

struct StorageArgs {
  std::string path, sizes = "64K,1M,16M", repeats = "3", profile = "default", output, format = "text";
  bool keep_cache = false;
} args;

void run_storage() {
  check_format(args.format);
  tune::StorageOptions o;
  o.sizes.clear();
  std::stringstream ss(args.sizes);
  for (std::string b; std::getline(ss, b, ',');) o.sizes.push_back(parse_bytes("--sizes", b));
  o.repeats = static_cast<int>(parse_index("--repeats", args.repeats, 1001));
  o.drop_cache = !args.keep_cache;
  CostModel m = for_flag("--profile", [] { return CostModel::load(args.profile); });
  const auto files = for_flag("PATH", [] { return tune::storage_files(args.path); });
  const auto samples = for_flag("--sizes", [&] { return tune::measure_storage(files, o); });
  m.storage = tune::fit_storage(samples);
  if (args.format == "json") {
    nlohmann::ordered_json j;
    j["files"] = files.size();
    j["drop_cache"] = o.drop_cache ? "posix_fadvise(DONTNEED) per file" : "no";
    j["samples"] = nlohmann::ordered_json::array();
    for (const auto& s : samples) j["samples"].push_back({{"bytes", s.bytes}, {"us", s.us}});
    j["storage"] = {{"read_bw_GBps", m.storage.read_bw_GBps}, {"read_alpha_us", m.storage.read_alpha_us}};
    std::cout << j.dump() << "\n";
  } else {
    std::string out = fmt::format("storage reads from {} file(s) of {}, page cache {}\n", files.size(), args.path,
                                  o.drop_cache ? "dropped per file (posix_fadvise DONTNEED) before each read" : "kept");
    out += fmt::format("  {:>12} {:>6} {:>12} {:>12} {:>10}\n", "bytes", "reads", "median us", "fit us", "GB/s");
    for (const auto& s : tune::storage_medians(samples)) {
      const double fit = m.storage.read_alpha_us + static_cast<double>(s.bytes) / (m.storage.read_bw_GBps * 1e3);
      out += fmt::format("  {:>12} {:>6} {:>12.1f} {:>12.1f} {:>10.3f}\n", s.bytes, s.reads, s.median_us, fit,
                         static_cast<double>(s.bytes) / (s.median_us * 1e3));
    }
    out += fmt::format("fit: read_bw_GBps {:.4g}, read_alpha_us {:.4g} (time = alpha + bytes / bw, per reading rank)\n",
                       m.storage.read_bw_GBps, m.storage.read_alpha_us);
    std::cout << out;
  }
  if (!args.output.empty()) {
    std::ofstream f(args.output);
    if (!(f << m.to_json() << "\n")) throw InputError(fmt::format("-o {} cannot be written", quote_input(args.output)));
    if (args.format == "text") std::cout << fmt::format("profile {} written to {} (its other fields kept)\n", m.name, args.output);
  }
}

}  // namespace

void register_tune_storage(CLI::App& tune) {
  auto* cmd = tune.add_subcommand("storage", "time reads from checkpoint files; fit the profile's storage field");
  cmd->add_option("path", args.path, "a checkpoint directory (its files) or one file")->required();
  cmd->add_option("--sizes", args.sizes, "read sizes (1024-based K/M/G suffixes), comma-separated, two or more")
      ->capture_default_str();
  cmd->add_option("--repeats", args.repeats, "reads per size")->capture_default_str();
  cmd->add_flag("--keep-cache", args.keep_cache, "do not drop the files' pages first (measures the page cache)");
  cmd->add_option("--profile", args.profile, "the profile whose other fields the written one keeps")->capture_default_str();
  cmd->add_option("-o,--output", args.output, "write the profile with the fitted storage field");
  cmd->add_option("--format", args.format, "text or json")->capture_default_str();
  cmd->callback(run_storage);
}

}  // namespace dtensor::cli

// nccl-tests output: every variant seen in published logs (docs/cost-model.md, "Tuning").
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "dtensor/error.hpp"
#include "dtensor/tune.hpp"

namespace dtensor::tune {
namespace {

// Removes Open MPI `--tag-output` tags ("[1,0]<stdout>:", anywhere in the line: a tagged row
// can be split into fragments) and a Slurm `--label` prefix ("0: ") at the start.
std::string clean(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (std::size_t i = 0; i < line.size();) {
    if (line[i] == '[') {
      std::size_t j = i + 1;
      while (j < line.size() && (std::isdigit(static_cast<unsigned char>(line[j])) || line[j] == ',')) ++j;
      for (std::string_view tag : {"]<stdout>:", "]<stderr>:"})
        if (j > i + 1 && line.substr(j, tag.size()) == tag) {
          out += ' ';
          i = j + tag.size();
          goto next;
        }
    }
    out += line[i++] == '\r' ? ' ' : line[i - 1];
  next:;
  }
  std::size_t p = out.find_first_not_of(" \t");
  if (p == std::string::npos) return {};
  std::size_t q = p;
  while (q < out.size() && std::isdigit(static_cast<unsigned char>(out[q]))) ++q;
  if (q > p && q + 1 < out.size() && out[q] == ':' && out[q + 1] == ' ') p = q + 1;  // Slurm label
  p = out.find_first_not_of(" \t", p);
  if (p == std::string::npos) return {};
  const auto e = out.find_last_not_of(" \t");
  return out.substr(p, e - p + 1);
}

std::vector<std::string> words(std::string_view s) {
  std::vector<std::string> w;
  for (std::size_t i = 0; i < s.size();) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    std::size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) w.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return w;
}

std::optional<std::int64_t> to_int(const std::string& s) {
  std::int64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}
std::optional<double> to_double(const std::string& s) {
  if (s.empty() || s.size() > 64) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// The collective a file name or command names ("all_gather_perf", "...-alltoall.txt").
std::optional<Collective> collective_in(std::string_view text) {
  static const std::pair<const char*, Collective> names[] = {
      {"reduce_scatter", Collective::reduce_scatter}, {"all_gather", Collective::all_gather},
      {"all_reduce", Collective::all_reduce},         {"alltoall", Collective::all_to_all},
      {"sendrecv", Collective::send_recv}};
  std::optional<Collective> found;
  for (const auto& [n, c] : names)
    if (text.find(n) != std::string_view::npos) {
      if (found && *found != c) return std::nullopt;  // ambiguous
      found = c;
    }
  return found;
}

}  // namespace

Log parse_nccl_log(std::string_view text, std::string_view name, const LogOptions& options) {
  Log log;
  log.name = std::string(name);
  std::optional<Collective> from_header, from_command;
  std::map<std::string, std::int64_t> ranks_per_host;
  std::int64_t rank_lines = 0;
  std::set<std::string> redops;
  std::vector<std::pair<std::int64_t, double>> ratios;  // busbw / algbw where both are readable
  int line_no = 0;
  bool saw_columns = false;
  for (std::size_t pos = 0; pos <= text.size();) {
    const auto nl = std::min(text.find('\n', pos), text.size());
    const std::string_view raw = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (raw.size() > 4096) {
      log.ignored.push_back({line_no, "line longer than 4096 characters"});
      continue;
    }
    const std::string line = clean(raw);
    if (line.empty()) continue;
    if (line.starts_with("#")) {
      const auto w = words(line);
      if (line.find("Collective test starting:") != std::string::npos && !w.empty()) {
        from_header = parse_collective(w.back());
      } else if (w.size() >= 2 && w[1] == "nThread") {
        log.has_run_header = true;
      } else if (w.size() >= 2 && w[1] == "Using" ) {
        log.has_run_header = true;
      } else if (w.size() >= 8 && w[1] == "Rank" && line.find(" on ") != std::string::npos) {
        ++rank_lines;
        const auto on = std::find(w.begin(), w.end(), "on");
        if (on != w.end() && on + 1 != w.end()) ++ranks_per_host[*(on + 1)];
      } else if (line.starts_with("## ") && line.find("_perf") != std::string::npos) {
        from_command = collective_in(line);
      } else if (std::find(w.begin(), w.end(), "size") != w.end() && std::find(w.begin(), w.end(), "time") != w.end()) {
        saw_columns = true;
      }
      continue;
    }
    // a data row: size count type redop [root] time algbw busbw #wrong [in-place ...]
    const auto w = words(line);
    const auto size = w.empty() ? std::nullopt : to_int(w[0]);
    if (!size || w.size() < 8) {
      log.ignored.push_back({line_no, "not a data row"});
      continue;
    }
    if (*size < 0) {
      log.ignored.push_back({line_no, "negative size"});
      continue;
    }
    // the root column (nccl-tests >= 2.10) is an integer where the time would be
    const bool has_root = w.size() >= 9 && to_int(w[4]).has_value();
    const std::size_t t = has_root ? 5 : 4;
    redops.insert(w[3]);
    const auto time = to_double(w[t]);
    const auto algbw = w.size() > t + 1 ? to_double(w[t + 1]) : std::nullopt;
    const auto busbw = w.size() > t + 2 ? to_double(w[t + 2]) : std::nullopt;
    if (!time) {
      log.ignored.push_back({line_no, fmt::format("out-of-place time {} is not a number", w[t].substr(0, 20))});
      continue;
    }
    if (*size == 0) {
      log.ignored.push_back({line_no, "zero bytes (nothing is moved; the time is launch overhead only)"});
      continue;
    }
    if (*time <= 0) {
      log.ignored.push_back({line_no, "non-positive time"});
      continue;
    }
    if (algbw && busbw && *algbw >= 0.5) ratios.push_back({*size, *busbw / *algbw});
    log.rows.push_back({*size, *time, line_no});
  }
  (void)saw_columns;
  if (log.rows.empty())
    throw InputError(fmt::format("nccl-tests log {}: no data rows (expected lines of size, count, type, redop, root, time, "
                                 "algbw, busbw)", quote_input(name)));
  // the collective: as asked, else as the log says, else as the command or the file name says
  if (options.collective) {
    if (from_header && *from_header != *options.collective)
      throw InputError(fmt::format("nccl-tests log {} measures {}, not {}", quote_input(name), to_string(*from_header),
                                   to_string(*options.collective)));
    log.collective = *options.collective;
  } else if (from_header) {
    log.collective = *from_header;
  } else if (from_command) {
    log.collective = *from_command;
  } else if (const auto c = collective_in(name)) {
    log.collective = *c;
  } else {
    throw InputError(fmt::format("nccl-tests log {} does not say which collective it measures (redop {}); name it "
                                 "with --collective", quote_input(name), redops.empty() ? "?" : *redops.begin()));
  }
  // the ranks: as given, else from the run header's device list (required then); either must
  // agree with the bus-bandwidth factor the log prints (busbw / algbw), which names the group size
  std::optional<double> ratio;
  if (!ratios.empty() && log.collective != Collective::send_recv) {
    std::vector<double> r;
    for (const auto& x : ratios) r.push_back(x.second);
    std::nth_element(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(r.size() / 2), r.end());
    ratio = r[r.size() / 2];
  }
  const auto agrees = [&](std::int64_t n) {
    return !ratio || std::abs(*ratio - bus_factor(log.collective, n)) <= 0.015 * bus_factor(log.collective, n) + 0.005;
  };
  const auto implied = [&]() -> std::string {
    if (!ratio) return "";
    const double x = log.collective == Collective::all_reduce ? 2 / std::max(2 - *ratio, 1e-9) : 1 / std::max(1 - *ratio, 1e-9);
    return fmt::format(" (busbw/algbw {:.4f} means about {:.0f} ranks)", *ratio, x);
  };
  if (options.ranks) {
    log.ranks = *options.ranks;
    if (!agrees(log.ranks))
      throw InputError(fmt::format("nccl-tests log {}: --ranks {} does not match the log's bus bandwidth{}", quote_input(name),
                                   log.ranks, implied()));
  } else if (rank_lines > 0) {
    log.ranks = rank_lines;
    if (!agrees(log.ranks))
      throw InputError(fmt::format("nccl-tests log {} lists {} devices, but its bus bandwidth says otherwise{}; give --ranks N",
                                   quote_input(name), rank_lines, implied()));
  } else {
    throw InputError(fmt::format("nccl-tests log {} has no run header listing its ranks; give --ranks N{}", quote_input(name),
                                 implied()));
  }
  if (log.ranks < 2 || log.ranks > (std::int64_t{1} << 24))
    throw InputError(fmt::format("nccl-tests log {}: {} ranks (a collective needs 2 to 2^24)", quote_input(name), log.ranks));
  if (!ranks_per_host.empty()) {
    std::int64_t most = 0;
    for (const auto& [h, n] : ranks_per_host) most = std::max(most, n);
    log.ranks_per_node = options.ranks_per_node.value_or(most);
  } else {
    log.ranks_per_node = options.ranks_per_node.value_or(log.ranks);
  }
  if (log.ranks_per_node < 1 || log.ranks_per_node > log.ranks)
    throw InputError(fmt::format("nccl-tests log {}: {} ranks per node with {} ranks", quote_input(name), log.ranks_per_node,
                                 log.ranks));
  return log;
}

Log read_nccl_log(const std::string& path, const LogOptions& options) {
  return parse_nccl_log(read_input_file(path, "log", 64u << 20), path, options);
}

}  // namespace dtensor::tune

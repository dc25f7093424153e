#include "dtensor/error.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace dtensor {

std::string read_input_file(const std::string& path, std::string_view what, std::uintmax_t max_bytes) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) throw InputError(fmt::format("{} {} does not exist", what, quote_input(path)));
  if (!std::filesystem::is_regular_file(st))
    throw InputError(fmt::format("{} {} is not a regular file{}", what, quote_input(path),
                                 std::filesystem::is_directory(st) ? " (a directory)" : ""));
  if (std::filesystem::file_size(path, ec) > max_bytes || ec)
    throw InputError(ec ? fmt::format("{} {} cannot be read: {}", what, quote_input(path), ec.message())
                        : fmt::format("{} {} is larger than {} bytes", what, quote_input(path), max_bytes));
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in || (!in.good() && !in.eof())) throw InputError(fmt::format("{} {} cannot be read", what, quote_input(path)));
  return ss.str();
}

std::string bytes_text(std::int64_t b) {
  if (b < 1024) return fmt::format("{} B", b);
  if (b < (std::int64_t{1} << 20)) return fmt::format("{:.1f} KiB", static_cast<double>(b) / 1024);
  if (b < (std::int64_t{1} << 30)) return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1024.0 * 1024));
  return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1024.0 * 1024 * 1024));
}

std::string quote_input(std::string_view text, std::size_t max) {
  std::string out = "\"";
  std::size_t shown = 0;
  for (const char ch : text) {
    if (shown >= max) {
      // never cut inside a UTF-8 character: drop the partial one (its lead and continuation bytes)
      if ((static_cast<unsigned char>(ch) & 0xc0) == 0x80) {
        while (shown > 0 && (static_cast<unsigned char>(out.back()) & 0xc0) == 0x80) {
          out.pop_back();
          --shown;
        }
        if (shown > 0 && static_cast<unsigned char>(out.back()) >= 0xc0) {
          out.pop_back();
          --shown;
        }
      }
      break;
    }
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += ch;
    }
    ++shown;
  }
  out += '"';
  if (shown < text.size()) out += fmt::format(" (first {} of {} characters)", shown, text.size());
  return out;
}

namespace {
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) == std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (same ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}
template <typename Range>
std::string nearest(std::string_view word, const Range& candidates, std::size_t max_distance) {
  std::string best;
  std::size_t best_d = max_distance + 1;
  for (const auto& c : candidates)
    if (const auto d = edit_distance(word, c); d < best_d) {
      best_d = d;
      best = std::string(c);
    }
  return best;
}
}  // namespace

std::string nearest_spelling(std::string_view word, std::initializer_list<std::string_view> candidates,
                             std::size_t max_distance) {
  return nearest(word, candidates, max_distance);
}
std::string nearest_spelling(std::string_view word, const std::vector<std::string>& candidates, std::size_t max_distance) {
  return nearest(word, candidates, max_distance);
}

std::string rank_list(std::vector<std::int64_t> r) {
  std::sort(r.begin(), r.end());
  std::string out;
  for (std::size_t i = 0; i < r.size();) {
    std::size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? fmt::format("{}", r[i]) : fmt::format("{}-{}", r[i], r[j]);
    i = j + 1;
  }
  return out.empty() ? "-" : out;
}

}  // namespace dtensor

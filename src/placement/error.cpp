#include "dtensor/error.hpp"

#include <fmt/format.h>

namespace dtensor {

std::string quote_input(std::string_view text, std::size_t max) {
  std::string out = "\"";
  std::size_t shown = 0;
  for (const char ch : text) {
    if (shown >= max) break;
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

}  // namespace dtensor

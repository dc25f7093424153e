// Strict parsers for the text forms of docs/notation.md and docs/cli.md. Every error names the offending text and
// the 1-based character where parsing stopped.
#include <cctype>
#include <algorithm>
#include <charconv>
#include <limits>

#include "dtensor/error.hpp"
#include "dtensor/layout.hpp"
#include "dtensor/mesh.hpp"
#include "dtensor/placement.hpp"

namespace dtensor {
namespace {

class Cursor {
 public:
  Cursor(std::string_view text, std::string_view what) : text_(text), what_(what) {}

  [[noreturn]] void fail(std::string_view expected) const {
    const std::string found = pos_ < text_.size() ? quote_input(text_.substr(pos_, 1)) : "end of input";
    throw InputError(fmt::format("malformed {} {}: expected {} at character {}, found {}", what_, quote_input(text_),
                                 expected, pos_ + 1, found));
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool done() {
    skip_space();
    return pos_ >= text_.size();
  }
  bool accept(std::string_view token) {
    skip_space();
    if (text_.substr(pos_, token.size()) == token) {
      pos_ += token.size();
      return true;
    }
    return false;
  }
  void expect(std::string_view token) {
    if (!accept(token)) fail(fmt::format("'{}'", token));
  }
  std::int64_t integer() {
    skip_space();
    const char* b = text_.data() + pos_;
    const char* e = text_.data() + text_.size();
    std::int64_t v = 0;
    const char* start = b;
    if (b < e && *b == '+') fail("an integer");
    auto [p, ec] = std::from_chars(b, e, v);
    if (ec == std::errc::result_out_of_range) fail("an integer in range");
    if (ec != std::errc() || p == start) fail("an integer");
    pos_ += static_cast<std::size_t>(p - start);
    return v;
  }
  std::string identifier() {
    skip_space();
    std::size_t b = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    return std::string(text_.substr(b, pos_ - b));
  }
  std::size_t pos() const { return pos_; }
  void set_pos(std::size_t p) { pos_ = p; }
  std::string_view text() const { return text_; }

 private:
  std::string_view text_;
  std::string_view what_;
  std::size_t pos_ = 0;
};

// Optional quotes around a value: whatever opens must close the same way ("max" or 'max').
char open_quote(Cursor& c) {
  if (c.accept("\"")) return '"';
  if (c.accept("'")) return '\'';
  return 0;
}
void close_quote(Cursor& c, char q) {
  if (q == '"') c.expect("\"");
  if (q == '\'') c.expect("'");
}

// "dim=" / "split_factor=" keyword arguments, as PyTorch spells them (optional).
void keyword(Cursor& c, std::string_view name) {
  c.accept(std::string(name) + "=");
}

Placement parse_one(Cursor& c) {
  const std::size_t start = c.pos();
  c.accept("torch.distributed.tensor.");
  c.accept("placement_types.");
  if (c.accept("_StridedShard(")) {
    keyword(c, "dim");
    const auto d = c.integer();
    c.expect(",");
    keyword(c, "split_factor");
    const auto sf = c.integer();
    c.expect(")");
    return Placement::StridedShard(d, sf);
  }
  if (c.accept("_S(") || c.accept("SS(")) {
    const auto d = c.integer();
    c.expect(",");
    const auto sf = c.integer();
    c.expect(")");
    return Placement::StridedShard(d, sf);
  }
  if (c.accept("Shard(") || c.accept("S(")) {
    keyword(c, "dim");
    const auto d = c.integer();
    c.expect(")");
    return Placement::Shard(d);
  }
  if (c.accept("Replicate()")) return Placement::Replicate();
  if (c.accept("Partial(") || c.accept("P(")) {
    if (c.accept(")")) return Placement::Partial(ReduceOp::sum);
    keyword(c, "reduce_op");
    const char q = open_quote(c);
    const std::size_t op_pos = c.pos();
    const std::string op = c.identifier();
    ReduceOp result = ReduceOp::sum;
    try {
      result = parse_reduce_op(op);
    } catch (const Error&) {
      c.set_pos(op_pos);
      c.fail("a Partial op (sum, avg, max, min, product)");
    }
    close_quote(c, q);
    c.expect(")");
    return Placement::Partial(result);
  }
  // Bare words: R, P, Replicate, Partial (placements may follow without a separator: "RS(0)",
  // "RP"); anything else gets the nearest valid spelling.
  // Looks ahead a fixed number of characters, never a whole run of letters: "RRRR..." is linear.
  c.skip_space();
  const std::size_t word_at = c.pos();
  const std::string_view text = c.text();
  auto ident_char = [&](std::size_t i) {
    return i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_');
  };
  for (const auto& [spelled, placement] : {std::pair{std::string_view("Replicate"), Placement::Replicate()},
                                           std::pair{std::string_view("Partial"), Placement::Partial(ReduceOp::sum)}})
    if (text.substr(word_at, spelled.size()) == spelled && !ident_char(word_at + spelled.size())) {
      c.set_pos(word_at + spelled.size());
      return placement;
    }
  if (word_at < text.size() && (text[word_at] == 'R' || text[word_at] == 'P')) {
    const std::size_t n = word_at + 1;
    if (!ident_char(n) || text[n] == 'R' || text[n] == 'P' || text[n] == 'S' || text[n] == '_') {
      c.set_pos(n);
      return text[word_at] == 'R' ? Placement::Replicate() : Placement::Partial(ReduceOp::sum);
    }
  }
  const std::string word = c.identifier();  // only on the way to an error
  c.set_pos(start);
  if (!word.empty()) {
    const auto best = nearest_spelling(word, {"Shard", "Replicate", "Partial", "_StridedShard", "S", "R", "P", "_S"},
                                       word.size() >= 4 ? 2 : 1);
    if (!best.empty())
      c.fail(fmt::format("a placement (S(d), _S(d, sf), R or P(op)); {}: did you mean {}?", quote_input(word), best));
  }
  c.fail("a placement (S(d), _S(d, sf), R or P(op))");
}

}  // namespace

PlacementSpec parse_placements(std::string_view text) {
  // No mesh has more than 8 dims, and no spelling of 8 placements comes near this length.
  constexpr std::size_t kMaxPlacementsText = 4096;
  if (text.size() > kMaxPlacementsText)
    throw InputError(fmt::format("placements text of {} characters exceeds the limit of {}: {}...", text.size(),
                                 kMaxPlacementsText, quote_input(text.substr(0, 40))));
  Cursor c(text, "placements");
  PlacementSpec spec;
  if (c.done()) c.fail("a placement (S(d), _S(d, sf), R or P(op))");
  // PyTorch's own spelling: a tuple or list of placements, e.g. (Shard(dim=0), Replicate())
  char close = 0;
  if (c.accept("(")) close = ')';
  else if (c.accept("[")) close = ']';
  while (!c.done()) {
    if (close && c.accept(std::string(1, close))) {
      if (!c.done()) c.fail("the end after the closing bracket");
      close = 0;
      break;
    }
    spec.placements.push_back(parse_one(c));
    if (spec.placements.size() > static_cast<std::size_t>(Sharding::kMaxMeshDims))
      throw InputError(fmt::format("placements {} name more than {} mesh dims, the most a mesh has",
                                   quote_input(text), Sharding::kMaxMeshDims));
    int order = -1;
    if (c.accept("[")) {
      const auto k = c.integer();
      if (k < 0 || k > 64) {
        throw InputError(fmt::format("shard order position [{}] in placements {} is out of range", k, quote_input(text)));
      }
      order = static_cast<int>(k);
      c.expect("]");
    }
    spec.order.push_back(order);
    if (c.accept(",") && c.done()) c.fail("a placement after ','");
  }
  if (close) c.fail(fmt::format("'{}' closing the sequence", close));
  if (spec.placements.empty()) c.fail("a placement (S(d), _S(d, sf), R or P(op))");
  return spec;
}

std::vector<std::int64_t> parse_shape(std::string_view text) {
  Cursor c(text, "shape");
  std::vector<std::int64_t> shape;
  // 9x5, 9,5, and Python's spellings: (9, 5), [9, 5], torch.Size([9, 5]); () is 0-d
  const bool torch_size = c.accept("torch.Size(");
  std::string close;
  if (c.accept("(")) close = ")";
  else if (c.accept("[")) close = "]";
  if (!close.empty() && c.accept(close)) {
    if (torch_size) c.expect(")");
    if (!c.done()) c.fail("the end of the shape");
    return shape;
  }
  if (c.done() && close.empty() && !torch_size) return shape;
  while (true) {
    const std::size_t at = c.pos();
    const auto v = c.integer();
    if (v < 0) {
      c.set_pos(at);
      throw InputError(fmt::format("tensor size {} in shape {} is negative (size 0 is a valid empty dim)", v, quote_input(text)));
    }
    shape.push_back(v);
    if (!close.empty()) {
      const bool comma = c.accept(",");
      if (c.accept(close)) break;  // (9, 5) and Python's one-element (9,)
      if (!comma && !c.accept("x")) c.fail(fmt::format("',' or '{}'", close));
      continue;
    }
    if (c.done()) break;
    if (!c.accept("x") && !c.accept(",")) c.fail("'x' or ','");
  }
  if (torch_size) c.expect(")");
  if (!c.done()) c.fail("the end of the shape");
  return shape;
}

std::string shape_str(std::span<const std::int64_t> shape) {
  if (shape.empty()) return "()";
  return fmt::format("{}", fmt::join(shape, "x"));
}

Mesh Mesh::parse(std::string_view text) {
  Cursor c(text, "mesh");
  std::vector<std::int64_t> shape;
  std::vector<std::string> names;
  if (c.done()) c.fail("a mesh like 2x4 or dp=2,tp=4");
  // Python's spellings too: (dp=4, tp=2), [2, 4]
  std::string close;
  if (c.accept("(")) close = ")";
  else if (c.accept("[")) close = "]";
  while (true) {
    c.skip_space();
    const std::size_t at = c.pos();
    std::string name;
    const bool may_be_named = shape.empty() || !names.empty();
    if (may_be_named && at < text.size() && (std::isalpha(static_cast<unsigned char>(text[at])) || text[at] == '_')) {
      name = c.identifier();
      c.expect("=");
    }
    if (!names.empty() || (shape.empty() && !name.empty())) {
      if (name.empty()) {
        c.set_pos(at);
        c.fail("a named dim 'name=size' (all mesh dims named or none)");
      }
      names.push_back(name);
    } else if (!name.empty()) {
      c.set_pos(at);
      c.fail("an unnamed size (all mesh dims named or none)");
    }
    const std::size_t size_at = c.pos();
    const auto v = c.integer();
    if (v < 1) {
      c.set_pos(size_at);
      throw InputError(fmt::format("mesh size {} in mesh {} must be at least 1", v, quote_input(text)));
    }
    shape.push_back(v);
    if (!close.empty()) {
      const bool sep = c.accept(",") || c.accept("x");
      if (c.accept(close)) {
        if (!c.done()) c.fail("the end of the mesh");
        break;
      }
      if (!sep) c.fail(fmt::format("',' or '{}'", close));
      continue;
    }
    if (c.done()) break;
    if (!c.accept("x") && !c.accept(",")) c.fail("'x' or ','");
  }
  return Mesh(std::move(shape), std::move(names));
}

}  // namespace dtensor

// Strict parsers for the text forms of docs/notation.md and docs/cli.md. Every error names the offending text and
// the 1-based character where parsing stopped.
#include <cctype>
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

Placement parse_one(Cursor& c) {
  const std::size_t start = c.pos();
  if (c.accept("_StridedShard(")) {
    const auto d = c.integer();
    c.expect(",");
    c.accept("split_factor=");
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
    c.accept("dim=");
    const auto d = c.integer();
    c.expect(")");
    return Placement::Shard(d);
  }
  if (c.accept("Replicate()")) return Placement::Replicate();
  if (c.accept("Partial(") || c.accept("P(")) {
    if (c.accept(")")) return Placement::Partial(ReduceOp::sum);
    c.accept("reduce_op=");
    c.accept("\"");
    c.accept("'");
    const std::size_t op_pos = c.pos();
    const std::string op = c.identifier();
    ReduceOp result = ReduceOp::sum;
    try {
      result = parse_reduce_op(op);
    } catch (const Error&) {
      c.set_pos(op_pos);
      c.fail("a Partial op (sum, avg, max, min, product)");
    }
    c.accept("\"");
    c.accept("'");
    c.expect(")");
    return Placement::Partial(result);
  }
  if (c.accept("Partial")) return Placement::Partial(ReduceOp::sum);
  if (c.accept("R")) return Placement::Replicate();
  if (c.accept("P")) return Placement::Partial(ReduceOp::sum);
  c.set_pos(start);
  c.fail("a placement (S(d), _S(d, sf), R or P(op))");
}

}  // namespace

PlacementSpec parse_placements(std::string_view text) {
  Cursor c(text, "placements");
  PlacementSpec spec;
  if (c.done()) c.fail("a placement (S(d), _S(d, sf), R or P(op))");
  while (!c.done()) {
    spec.placements.push_back(parse_one(c));
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
  return spec;
}

std::vector<std::int64_t> parse_shape(std::string_view text) {
  Cursor c(text, "shape");
  std::vector<std::int64_t> shape;
  if (c.accept("(")) {
    if (c.accept(")") && c.done()) return shape;
    c.fail("')'");
  }
  if (c.done()) return shape;
  while (true) {
    const std::size_t at = c.pos();
    const auto v = c.integer();
    if (v < 0) {
      c.set_pos(at);
      throw InputError(fmt::format("tensor size {} in shape {} is negative (size 0 is a valid empty dim)", v, quote_input(text)));
    }
    shape.push_back(v);
    if (c.done()) break;
    if (!c.accept("x") && !c.accept(",")) c.fail("'x' or ','");
  }
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
    if (c.done()) break;
    if (!c.accept("x") && !c.accept(",")) c.fail("'x' or ','");
  }
  return Mesh(std::move(shape), std::move(names));
}

}  // namespace dtensor

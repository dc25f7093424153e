#include "dtensor/placement.hpp"

#include <ostream>

#include <fmt/compile.h>

#include "dtensor/error.hpp"
#include "hash.hpp"

namespace dtensor {

std::string_view to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
    case ReduceOp::product: return "product";
  }
  return "?";
}

ReduceOp parse_reduce_op(std::string_view text) {
  for (ReduceOp op : kAllReduceOps)
    if (to_string(op) == text) return op;
  throw InputError("unknown Partial op '" + std::string(text) + "' (expected sum, avg, max, min or product)");
}

void Placement::append_to(fmt::memory_buffer& out) const {
  auto it = std::back_inserter(out);
  switch (kind_) {
    case Kind::replicate: out.push_back('R'); return;
    case Kind::shard: fmt::format_to(it, FMT_COMPILE("S({})"), dim_); return;
    case Kind::strided_shard: fmt::format_to(it, FMT_COMPILE("_S({}, {})"), dim_, split_factor_); return;
    case Kind::partial: fmt::format_to(it, FMT_COMPILE("P({})"), to_string(op_)); return;
  }
  out.push_back('?');
}

std::string Placement::str() const {
  fmt::memory_buffer b;
  append_to(b);
  return fmt::to_string(b);
}

std::ostream& operator<<(std::ostream& os, const Placement& p) { return os << p.str(); }

std::size_t hash_value(const Placement& p) noexcept {
  std::uint64_t h = static_cast<std::uint64_t>(p.kind());
  detail::hash_combine(h, static_cast<std::uint64_t>(p.dim()));
  detail::hash_combine(h, static_cast<std::uint64_t>(p.split_factor()));
  detail::hash_combine(h, static_cast<std::uint64_t>(p.op()));
  return static_cast<std::size_t>(detail::mix64(h));
}

}  // namespace dtensor

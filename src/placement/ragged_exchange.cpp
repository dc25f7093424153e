// The transfers of a ragged exchange (ragged_exchange.hpp): pairs of ranks, the overlap of their
// base blocks, and the run of that overlap both pieces hold.
#include "ragged_exchange.hpp"

#include <algorithm>

#include "placement/groups.hpp"

namespace dtensor::detail {

std::vector<int> exchange_group_dims(const RaggedLayout& from) {
  std::vector<int> dims;
  const Sharding& s = from.base().sharding();
  for (int d = 0; d < s.tensor_ndim(); ++d)
    for (const auto& e : s.entries(d)) dims.push_back(e.mesh_dim);
  if (from.ragged()) dims.push_back(from.ragged()->mesh_dim);
  std::sort(dims.begin(), dims.end());
  return dims;
}

ExchangePart exchange_part(const std::vector<IndexSet>& a, Interval pa, const std::vector<IndexSet>& b, Interval pb) {
  ExchangePart p;
  p.box.reserve(a.size());
  for (std::size_t d = 0; d < a.size(); ++d) p.box.push_back(a[d].intersect(b[d]));
  if (box_numel(p.box) == 0) return p;
  // the overlap's elements in each piece are one run of the overlap's own order (positions in a
  // block rise with the overlap's row-major order), so both pieces together hold one run too
  p.lo = std::max(count_before(p.box, a, pa.start), count_before(p.box, b, pb.start));
  p.hi = std::min(count_before(p.box, a, pa.stop), count_before(p.box, b, pb.stop));
  if (p.hi < p.lo) p.hi = p.lo;
  return p;
}

namespace {
// The parts between the rank at `coord` and each member of its group: as the sender (`sending`)
// or as the receiver.
std::vector<ExchangePart> exchange_parts(const RaggedLayout& from, const RaggedLayout& to, const std::vector<std::int64_t>& coord,
                                         bool sending) {
  std::vector<ExchangePart> out;
  // this rank's side once; each peer's side per peer
  const auto& mine = sending ? from : to;
  const auto block = mine.base().indices(coord);
  const auto piece = mine.piece(coord);
  for (const auto& pc : group_members(from.mesh(), coord, exchange_group_dims(from))) {
    auto p = sending ? exchange_part(block, piece, to.base().indices(pc), to.piece(pc))
                     : exchange_part(from.base().indices(pc), from.piece(pc), block, piece);
    if (p.count() == 0) continue;
    p.peer = from.mesh().rank_at(pc);
    out.push_back(std::move(p));
  }
  return out;
}
}  // namespace

std::vector<ExchangePart> exchange_sends(const RaggedLayout& from, const RaggedLayout& to, const std::vector<std::int64_t>& coord) {
  return exchange_parts(from, to, coord, true);
}

std::vector<ExchangePart> exchange_recvs(const RaggedLayout& from, const RaggedLayout& to, const std::vector<std::int64_t>& coord) {
  return exchange_parts(from, to, coord, false);
}

bool contiguous_in(const std::vector<IndexSet>& sub, std::int64_t lo, std::int64_t hi, const std::vector<IndexSet>& block) {
  if (hi <= lo) return true;
  return position_in(sub, hi - 1, block) - position_in(sub, lo, block) == hi - 1 - lo;
}

}  // namespace dtensor::detail

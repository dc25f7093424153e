// What a cross-mesh plan's value and its planner share (cross_mesh_transfer.hpp).
#include "cross_mesh_transfer.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "dtensor/error.hpp"

namespace dtensor::cross_mesh_detail {

void check_rank_list(const char* which, const Mesh& mesh, std::span<const std::int64_t> ranks, std::int64_t world) {
  if (static_cast<std::int64_t>(ranks.size()) != mesh.num_ranks())
    throw InputError(fmt::format("{} mesh {} has {} ranks but its world rank list has {} entries", which, mesh.str(),
                                 mesh.num_ranks(), ranks.size()));
  // checked before any arithmetic on them (the world size is one more than the largest)
  for (auto r : ranks) {
    if (r < 0) throw InputError(fmt::format("{} world rank {} is negative", which, r));
    if (r >= kMaxWorldSize)
      throw InputError(fmt::format("{} world rank {} is not below 2^31 ({})", which, r, kMaxWorldSize));
    if (world >= 0 && r >= world)
      throw InputError(fmt::format("{} world rank {} does not exist in a world of {} ranks", which, r, world));
  }
  std::vector<std::int64_t> sorted(ranks.begin(), ranks.end());
  std::sort(sorted.begin(), sorted.end());
  if (const auto it = std::adjacent_find(sorted.begin(), sorted.end()); it != sorted.end())
    throw InputError(fmt::format("{} world rank {} is listed twice", which, *it));
}

UsedRanks::UsedRanks(std::span<const std::int64_t> a, std::span<const std::int64_t> b) : src_ids(a), dst_ids(b) {
  CompactRanks c = compact_world_ranks(a, b);
  used = c.ids.size();
  src = std::move(c.src);
  dst = std::move(c.dst);
}

std::vector<std::vector<IndexSet>> rank_sets(const Layout& l) {
  std::vector<std::vector<IndexSet>> out;
  const auto n = l.mesh().num_ranks();
  out.reserve(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < n; ++r) out.push_back(l.indices(l.mesh().coord_of_rank(r)));
  return out;
}

std::vector<IndexSet> split_box(std::vector<IndexSet> box, const CrossMeshPlan::Message& m) {
  if (m.row_end < 0) return box;
  const int d = cross_mesh_split_dim(box);
  if (box.empty() || m.row_begin < 0 || m.row_begin >= m.row_end || m.row_end > box[static_cast<std::size_t>(d)].size())
    throw InputError(fmt::format("cross-mesh message (A rank {} to B rank {}) has rows [{}, {}) outside its {} rows", m.from,
                                 m.to, m.row_begin, m.row_end, box.empty() ? 0 : box[static_cast<std::size_t>(d)].size()));
  box[static_cast<std::size_t>(d)] = box[static_cast<std::size_t>(d)].slice(m.row_begin, m.row_end);
  return box;
}

TransferResult finish(std::vector<CrossMeshPlan::Message> messages, const UsedRanks& u, std::int64_t s,
                      std::int64_t devices_per_host, std::int64_t bound) {
  TransferResult t;
  // by receiver (a counting pass), then by sender within each receiver
  {
    std::vector<std::size_t> start(u.dst.size() + 1, 0);
    for (const auto& m : messages) ++start[static_cast<std::size_t>(m.to) + 1];
    for (std::size_t b = 0; b < u.dst.size(); ++b) start[b + 1] += start[b];
    std::vector<CrossMeshPlan::Message> by_to(messages.size());
    std::vector<std::size_t> at(start.begin(), start.end() - 1);
    for (const auto& m : messages) by_to[at[static_cast<std::size_t>(m.to)]++] = m;
    for (std::size_t b = 0; b < u.dst.size(); ++b)
      std::sort(by_to.begin() + static_cast<std::ptrdiff_t>(start[b]), by_to.begin() + static_cast<std::ptrdiff_t>(start[b + 1]),
                [](const auto& x, const auto& y) { return x.from < y.from; });
    messages = std::move(by_to);
  }
  // Peers: a world rank's distinct peers. Its receives come from distinct senders in each receiver's
  // run (ascending); its sends reach a new peer whenever the receiver changes (messages go by
  // receiver); only a world rank on both meshes may meet one peer both ways, and lists its peers.
  std::vector<std::int64_t> sent(u.used, 0), recv(u.used, 0), local(u.used, 0), npeers(u.used, 0);
  std::vector<std::int64_t> last_to(u.used, -1), last_from(u.used, -1);
  std::vector<char> on_src(u.used, 0), on_dst(u.used, 0);
  for (auto w : u.src) on_src[static_cast<std::size_t>(w)] = 1;
  for (auto w : u.dst) on_dst[static_cast<std::size_t>(w)] = 1;
  std::vector<std::vector<std::int64_t>> both_peers(u.used);
  for (const auto& m : messages) {
    const auto wa = static_cast<std::size_t>(u.src[static_cast<std::size_t>(m.from)]);
    const auto wb = static_cast<std::size_t>(u.dst[static_cast<std::size_t>(m.to)]);
    if (wa == wb) {
      local[wa] += m.elements;
      continue;
    }
    sent[wa] += m.elements;
    recv[wb] += m.elements;
    t.transfer_bytes += m.elements * s;
    if (on_dst[wa]) {
      both_peers[wa].push_back(static_cast<std::int64_t>(wb));
    } else if (last_to[wa] != static_cast<std::int64_t>(wb)) {
      last_to[wa] = static_cast<std::int64_t>(wb);
      ++npeers[wa];
    }
    if (on_src[wb]) {
      both_peers[wb].push_back(static_cast<std::int64_t>(wa));
    } else if (last_from[wb] != static_cast<std::int64_t>(wa)) {
      last_from[wb] = static_cast<std::int64_t>(wa);
      ++npeers[wb];
    }
    const auto ida = u.src_ids[static_cast<std::size_t>(m.from)], idb = u.dst_ids[static_cast<std::size_t>(m.to)];
    if (devices_per_host > 0 && ida / devices_per_host != idb / devices_per_host) t.inter_host = true;
  }
  for (std::size_t w = 0; w < u.used; ++w) {
    if (auto& pw = both_peers[w]; !pw.empty()) {
      std::sort(pw.begin(), pw.end());
      npeers[w] = std::unique(pw.begin(), pw.end()) - pw.begin();
    }
    t.busiest_bytes = std::max(t.busiest_bytes, std::max(sent[w], recv[w]) * s);
    t.busiest_peers = std::max(t.busiest_peers, npeers[w]);
    t.copy_bytes = std::max(t.copy_bytes, (sent[w] + recv[w] + local[w]) * s);
  }
  t.bound_bytes = bound * s;
  t.messages = std::move(messages);
  return t;
}

}  // namespace dtensor::cross_mesh_detail

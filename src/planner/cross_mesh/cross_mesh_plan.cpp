// A cross-mesh plan's value (cross_mesh_plan.hpp, docs/cross-mesh.md): its messages' boxes, counts,
// hash, validation, JSON and explanation. The planner that makes one is cross_mesh_planner.cpp.
#include "dtensor/cross_mesh_plan.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cross_mesh_transfer.hpp"
#include "dtensor/error.hpp"
#include "placement/hash.hpp"
#include "placement/json_fields.hpp"
#include "planner/recently_validated.hpp"

namespace dtensor {

using namespace cross_mesh_detail;

int cross_mesh_split_dim(std::span<const IndexSet> box) noexcept {
  for (std::size_t d = 0; d < box.size(); ++d)
    if (box[d].size() > 1) return static_cast<int>(d);
  return 0;
}

std::vector<IndexSet> message_box(const CrossMeshPlan& p, const CrossMeshPlan::Message& m) {
  const auto h = p.pre.dst.indices(p.src.mesh().coord_of_rank(m.from));
  const auto n = p.post.src.indices(p.dst.mesh().coord_of_rank(m.to));
  std::vector<IndexSet> box;
  for (std::size_t d = 0; d < h.size(); ++d) box.push_back(h[d].intersect(n[d]));
  return split_box(std::move(box), m);
}

std::int64_t CrossMeshPlan::collectives() const {
  std::int64_t n = 0;
  for (const auto& st : pre.steps) n += is_communication(st.kind) ? 1 : 0;
  for (const auto& st : post.steps) n += is_communication(st.kind) ? 1 : 0;
  return n + (transfer_bytes > 0 ? 1 : 0);
}

std::uint64_t CrossMeshPlan::hash() const {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  detail::hash_combine(h, pre.hash());
  detail::hash_combine(h, post.hash());
  detail::hash_combine(h, static_cast<std::uint64_t>(world_size));
  for (auto r : src_ranks) detail::hash_combine(h, static_cast<std::uint64_t>(r));
  detail::hash_combine(h, 0x5eed);
  for (auto r : dst_ranks) detail::hash_combine(h, static_cast<std::uint64_t>(r));
  for (const auto& m : messages) {
    detail::hash_combine(h, static_cast<std::uint64_t>(m.from));
    detail::hash_combine(h, static_cast<std::uint64_t>(m.to));
    detail::hash_combine(h, static_cast<std::uint64_t>(m.elements));
    detail::hash_combine(h, static_cast<std::uint64_t>(m.row_begin));
    detail::hash_combine(h, static_cast<std::uint64_t>(m.row_end));
  }
  return h;
}

std::vector<std::int64_t> used_world_ranks(std::span<const std::int64_t> src_ranks, std::span<const std::int64_t> dst_ranks) {
  std::vector<std::int64_t> ids(src_ranks.begin(), src_ranks.end());
  ids.insert(ids.end(), dst_ranks.begin(), dst_ranks.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

CompactRanks compact_world_ranks(std::span<const std::int64_t> src_ranks, std::span<const std::int64_t> dst_ranks) {
  CompactRanks c;
  c.ids = used_world_ranks(src_ranks, dst_ranks);
  auto index = [&](std::span<const std::int64_t> ranks, std::vector<std::int64_t>& out) {
    out.reserve(ranks.size());
    for (auto r : ranks) out.push_back(std::lower_bound(c.ids.begin(), c.ids.end(), r) - c.ids.begin());
  };
  index(src_ranks, c.src);
  index(dst_ranks, c.dst);
  return c;
}

void validate_cross_mesh_plan(const CrossMeshPlan& p) {
  if (p.src.shape() != p.dst.shape() || p.src.dtype() != p.dst.dtype())
    throw InputError("cross-mesh plan: source and target differ in shape or dtype");
  if (p.world_size <= 0) throw InputError(fmt::format("cross-mesh plan: world size {} is not positive", p.world_size));
  if (p.world_size > kMaxWorldSize)
    throw InputError(fmt::format("cross-mesh plan: world size {} is above 2^31 ({})", p.world_size, kMaxWorldSize));
  check_rank_list("source", p.src.mesh(), p.src_ranks, p.world_size);
  check_rank_list("target", p.dst.mesh(), p.dst_ranks, p.world_size);
  if (p.pre.src != p.src) throw InputError("cross-mesh plan: the plan inside A does not start at the source layout");
  if (p.post.dst != p.dst) throw InputError("cross-mesh plan: the plan inside B does not end at the target layout");
  if (p.pre.dst.sharding().has_partial())
    throw InputError(fmt::format("cross-mesh plan: A's intermediate layout {} has a Partial", p.pre.dst.placements_str()));
  if (p.post.src.sharding().has_partial())
    throw InputError(fmt::format("cross-mesh plan: B's intermediate layout {} has a Partial", p.post.src.placements_str()));
  validate_plan(p.pre);
  validate_plan(p.post);
  const auto hold = rank_sets(p.pre.dst);
  const auto need = rank_sets(p.post.src);
  const auto na = static_cast<std::int64_t>(hold.size()), nb = static_cast<std::int64_t>(need.size());
  std::vector<std::int64_t> got(static_cast<std::size_t>(nb), 0);
  for (std::size_t i = 0; i < p.messages.size(); ++i) {
    const auto& m = p.messages[i];
    if (m.from < 0 || m.from >= na || m.to < 0 || m.to >= nb)
      throw InputError(fmt::format("cross-mesh message {} names rank {} of A or {} of B, which do not exist", i, m.from, m.to));
    if (i > 0) {
      const auto& q = p.messages[i - 1];
      if (q.to > m.to || (q.to == m.to && q.from >= m.from))
        throw InputError(fmt::format("cross-mesh message {} is out of order or repeated", i));
    }
    std::vector<IndexSet> whole;
    for (std::size_t d = 0; d < hold[static_cast<std::size_t>(m.from)].size(); ++d)
      whole.push_back(hold[static_cast<std::size_t>(m.from)][d].intersect(need[static_cast<std::size_t>(m.to)][d]));
    const auto box = box_numel(split_box(whole, m));
    if (m.elements <= 0 || m.elements != box)
      throw InputError(fmt::format("cross-mesh message {} (A rank {} to B rank {}) has {} elements; the ranks share {}", i,
                                   m.from, m.to, m.elements, box));
    // two senders to one receiver hold different (so disjoint) blocks, or send disjoint rows of one
    for (std::size_t j = i; j-- > 0 && p.messages[j].to == m.to;) {
      const auto& q = p.messages[j];
      if (hold[static_cast<std::size_t>(q.from)] != hold[static_cast<std::size_t>(m.from)]) continue;
      const bool disjoint = q.row_end >= 0 && m.row_end >= 0 && (q.row_end <= m.row_begin || m.row_end <= q.row_begin);
      if (!disjoint) throw InputError(fmt::format("cross-mesh messages {} and {} send B rank {} the same elements", j, i, m.to));
    }
    got[static_cast<std::size_t>(m.to)] += m.elements;
  }
  for (std::int64_t b = 0; b < nb; ++b)
    if (got[static_cast<std::size_t>(b)] != box_numel(need[static_cast<std::size_t>(b)]))
      throw InputError(fmt::format("cross-mesh plan: B rank {} receives {} of the {} elements it needs", b,
                                   got[static_cast<std::size_t>(b)], box_numel(need[static_cast<std::size_t>(b)])));
}

void validate_cross_mesh_plan_once(const CrossMeshPlan& plan) {
  static detail::RecentlyValidated<CrossMeshPlan> recent;
  recent.check(plan, std::nullopt, [&] { validate_cross_mesh_plan(plan); });
}

std::string CrossMeshPlan::to_json(int indent) const {
  using ordered = nlohmann::ordered_json;
  ordered j;
  j["kind"] = "cross_mesh";
  j["version"] = 1;
  j["world_size"] = world_size;
  j["src_ranks"] = src_ranks;
  j["dst_ranks"] = dst_ranks;
  j["pre"] = ordered::parse(pre.to_json());
  j["post"] = ordered::parse(post.to_json());
  j["messages"] = ordered::array();
  for (const auto& m : messages)
    j["messages"].push_back({{"from", m.from}, {"to", m.to}, {"elements", m.elements}, {"row_begin", m.row_begin},
                             {"row_end", m.row_end}, {"local", world_rank_of_src(m.from) == world_rank_of_dst(m.to)}});
  j["transfer_bytes"] = transfer_bytes;
  j["busiest_bytes"] = busiest_bytes;
  j["balanced_bound_bytes"] = balanced_bound_bytes;
  j["busiest_peers"] = busiest_peers;
  j["inter_host"] = inter_host;
  j["transfer_cost_us"] = transfer_cost_us;
  j["total_cost_us"] = total_cost_us;
  j["collectives"] = collectives();
  j["cost_model"] = cost_model;
  j["hash"] = fmt::format("{:016x}", hash());
  return j.dump(indent);
}

CrossMeshPlan CrossMeshPlan::from_json(std::string_view text) {
  using json = nlohmann::json;
  const json j = detail::parse_json(text, "cross-mesh plan");
  if (!j.is_object()) throw InputError("cross-mesh plan JSON must be an object");
  static const std::set<std::string> known{"kind", "version", "world_size", "src_ranks", "dst_ranks", "pre", "post",
                                           "messages", "transfer_bytes", "busiest_bytes", "balanced_bound_bytes",
                                           "busiest_peers", "inter_host", "transfer_cost_us", "total_cost_us",
                                           "collectives", "cost_model", "hash"};
  for (const auto& [k, v] : j.items())
    if (!known.count(k)) throw InputError(fmt::format("cross-mesh plan JSON has an unknown field {}", quote_input(k)));
  auto field = [&](const json& o, const char* key) -> const json& {
    auto it = o.find(key);
    if (it == o.end()) throw InputError(fmt::format("cross-mesh plan JSON lacks the field '{}'", key));
    return *it;
  };
  auto number = [&](const char* key) {
    const json& v = field(j, key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
      throw InputError(fmt::format("cross-mesh plan JSON field '{}' must be a finite number >= 0, not {}", key,
                                   detail::json_quote(v)));
    return v.get<double>();
  };
  if (field(j, "kind") != "cross_mesh") throw InputError("cross-mesh plan JSON 'kind' must be \"cross_mesh\"");
  if (detail::json_int(field(j, "version"), "version", 1, 1 << 20) != 1) throw InputError("cross-mesh plan JSON version must be 1");
  CrossMeshPlan p;
  p.world_size = detail::json_int(field(j, "world_size"), "world_size", 1, kMaxWorldSize);
  auto plan_of = [&](const char* key) {
    try {
      return Plan::from_json(field(j, key).dump());
    } catch (const InputError& e) {
      throw InputError(fmt::format("cross-mesh plan JSON '{}': {}", key, e.what()));
    }
  };
  p.pre = plan_of("pre");
  p.post = plan_of("post");
  p.src = p.pre.src;
  p.dst = p.post.dst;
  p.src_ranks = detail::json_int_list(field(j, "src_ranks"), "src_ranks", 0, p.world_size - 1);
  p.dst_ranks = detail::json_int_list(field(j, "dst_ranks"), "dst_ranks", 0, p.world_size - 1);
  check_rank_list("source", p.src.mesh(), p.src_ranks, p.world_size);
  check_rank_list("target", p.dst.mesh(), p.dst_ranks, p.world_size);
  const json& cm = field(j, "cost_model");
  if (!cm.is_string()) throw InputError("cross-mesh plan JSON 'cost_model' must be a string");
  p.cost_model = cm.get<std::string>();
  if (p.pre.cost_model != p.cost_model || p.post.cost_model != p.cost_model)
    throw InputError(fmt::format("cross-mesh plan JSON: its parts were planned under cost models {} and {}, the plan under {}",
                                 quote_input(p.pre.cost_model), quote_input(p.post.cost_model), quote_input(p.cost_model)));
  const json& ms = field(j, "messages");
  const auto most = p.src.mesh().num_ranks() * p.dst.mesh().num_ranks();
  if (!ms.is_array() || static_cast<std::int64_t>(ms.size()) > most)
    throw InputError(fmt::format("cross-mesh plan JSON 'messages' must be a list of at most {} messages", most));
  static const std::set<std::string> message_fields{"from", "to", "elements", "row_begin", "row_end", "local"};
  for (std::size_t i = 0; i < ms.size(); ++i) {
    const json& m = ms[i];
    if (!m.is_object()) throw InputError(fmt::format("cross-mesh plan JSON messages[{}] must be an object", i));
    for (const auto& [k, v] : m.items())
      if (!message_fields.count(k)) throw InputError(fmt::format("cross-mesh plan JSON messages[{}] has an unknown field {}", i, quote_input(k)));
    Message x;
    x.from = detail::json_int(field(m, "from"), "from", 0, p.src.mesh().num_ranks() - 1);
    x.to = detail::json_int(field(m, "to"), "to", 0, p.dst.mesh().num_ranks() - 1);
    x.elements = detail::json_int(field(m, "elements"), "elements", 1, INT64_MAX);
    x.row_begin = detail::json_int(field(m, "row_begin"), "row_begin", 0, INT64_MAX);
    x.row_end = detail::json_int(field(m, "row_end"), "row_end", -1, INT64_MAX);
    const json& local = field(m, "local");
    if (!local.is_boolean() || local.get<bool>() != (p.world_rank_of_src(x.from) == p.world_rank_of_dst(x.to)))
      throw InputError(fmt::format("cross-mesh plan JSON messages[{}].local must be {}", i,
                                   p.world_rank_of_src(x.from) == p.world_rank_of_dst(x.to)));
    p.messages.push_back(x);
  }
  validate_cross_mesh_plan(p);
  // the transfer's figures, as its messages give them
  const auto t = finish(p.messages, UsedRanks(p.src_ranks, p.dst_ranks), static_cast<std::int64_t>(itemsize(p.src.dtype())), 0, 0);
  p.transfer_bytes = detail::json_int(field(j, "transfer_bytes"), "transfer_bytes", 0, INT64_MAX);
  p.busiest_bytes = detail::json_int(field(j, "busiest_bytes"), "busiest_bytes", 0, INT64_MAX);
  p.busiest_peers = detail::json_int(field(j, "busiest_peers"), "busiest_peers", 0, INT64_MAX);
  p.balanced_bound_bytes = detail::json_int(field(j, "balanced_bound_bytes"), "balanced_bound_bytes", 0, p.busiest_bytes);
  for (const auto& [name, read, want] : {std::tuple{"transfer_bytes", p.transfer_bytes, t.transfer_bytes},
                                         std::tuple{"busiest_bytes", p.busiest_bytes, t.busiest_bytes},
                                         std::tuple{"busiest_peers", p.busiest_peers, t.busiest_peers}})
    if (read != want)
      throw InputError(fmt::format("cross-mesh plan JSON '{}' is {}, its messages give {}", name, read, want));
  const json& ih = field(j, "inter_host");
  if (!ih.is_boolean()) throw InputError("cross-mesh plan JSON 'inter_host' must be true or false");
  p.inter_host = ih.get<bool>();
  p.transfer_cost_us = number("transfer_cost_us");
  p.total_cost_us = number("total_cost_us");
  const double sum = p.pre.total_cost_us + p.transfer_cost_us + p.post.total_cost_us;
  if (!detail::same_time(p.total_cost_us, sum))
    throw InputError(fmt::format("cross-mesh plan JSON 'total_cost_us' is {}, its parts add up to {}", p.total_cost_us, sum));
  if (detail::json_int(field(j, "collectives"), "collectives", 0, INT64_MAX) != p.collectives())
    throw InputError(fmt::format("cross-mesh plan JSON 'collectives' does not match its parts ({})", p.collectives()));
  const json& h = field(j, "hash");
  if (!detail::json_hash_is(h, p.hash()))
    throw InputError(fmt::format("cross-mesh plan JSON 'hash' is {}, the plan's is {:016x}", detail::json_quote(h), p.hash()));
  return p;
}

std::string explain(const CrossMeshPlan& p) {
  std::string out;
  auto rl = [](const std::vector<std::int64_t>& r) { return rank_list(r); };
  out += fmt::format("cross-mesh {} {} {}: {} on {} (world {}) -> {} on {} (world {})\n", fmt::join(p.src.shape(), "x"),
                     to_string(p.src.dtype()), p.cost_model, p.src.placements_str(), p.src.mesh().str(),
                     rl(p.src_ranks), p.dst.placements_str(), p.dst.mesh().str(), rl(p.dst_ranks));
  out += fmt::format("  inside A: {} ({} steps, {:.1f} us)\n", p.pre.trace(), p.pre.steps.size(), p.pre.total_cost_us);
  std::int64_t local = 0, remote = 0;
  for (const auto& m : p.messages)
    (p.world_rank_of_src(m.from) == p.world_rank_of_dst(m.to) ? local : remote) += 1;
  out += fmt::format(
      "  transfer:  {} -> {}: {} messages between ranks, {} local copies; {} bytes cross, busiest rank {} bytes "
      "(balanced bound {}), {} peers, {}, {:.1f} us\n",
      p.pre.dst.placements_str(), p.post.src.placements_str(), remote, local, p.transfer_bytes, p.busiest_bytes,
      p.balanced_bound_bytes, p.busiest_peers, p.inter_host ? "inter-host" : "intra-host", p.transfer_cost_us);
  out += fmt::format("  inside B: {} ({} steps, {:.1f} us)\n", p.post.trace(), p.post.steps.size(), p.post.total_cost_us);
  out += fmt::format("  total {:.1f} us, {} collectives\n", p.total_cost_us, p.collectives());
  return out;
}

}  // namespace dtensor

// Ragged plans (ragged_plan.hpp): exchanges costed from their transfer lists, and the cheapest
// chain through the meeting points next to each ragged end.
#include "dtensor/ragged_plan.hpp"

#include <algorithm>
#include <map>
#include <cmath>
#include <limits>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "dtensor/error.hpp"
#include "placement/hash.hpp"
#include "placement/json_fields.hpp"
#include "placement/groups.hpp"
#include "placement/blocks.hpp"
#include "placement/ragged_exchange.hpp"

namespace dtensor {
namespace {

bool has_partial(const RaggedLayout& l) { return l.base().sharding().has_partial(); }

void check_same_tensor(const RaggedLayout& a, const RaggedLayout& b) {
  if (a.mesh() != b.mesh() || a.shape() != b.shape() || a.dtype() != b.dtype())
    throw InputError(fmt::format("a ragged plan joins layouts of one mesh, shape and dtype: {} and {}", a.str(), b.str()));
}

// What an exchange takes: one tensor, no Partial, a mesh whose pairs can be visited.
void check_exchange(const RaggedLayout& from, const RaggedLayout& to) {
  check_same_tensor(from, to);
  if (has_partial(from) || has_partial(to))
    throw InputError(fmt::format("an exchange moves no Partial: {} -> {}", from.placements_str(), to.placements_str()));
  if (from.mesh().num_ranks() > detail::kMaxExchangeRanks)
    throw InputError(fmt::format("a ragged exchange on a mesh of {} ranks: at most {} are planned", from.mesh().num_ranks(),
                                 detail::kMaxExchangeRanks));
}

// Stage k must start at `start` (where the stage before ends, or the plan's source).
void check_stage_start(std::size_t k, const RaggedLayout& from, const RaggedLayout& start) {
  if (!(from == start))
    throw InputError(fmt::format("ragged plan stage {} starts at {}, not at {}", k, from.placements_str(), start.placements_str()));
}

}  // namespace

RaggedLayout RaggedStage::from() const { return plan ? RaggedLayout(plan->src) : exchange->from; }
RaggedLayout RaggedStage::to() const { return plan ? RaggedLayout(plan->dst) : exchange->to; }

void check_chain(const RaggedPlan& plan) {
  RaggedLayout at = plan.src;
  for (std::size_t k = 0; k < plan.stages.size(); ++k) {
    const auto& st = plan.stages[k];
    if (st.plan.has_value() == st.exchange.has_value())
      throw InputError(fmt::format("ragged plan stage {} must be exactly one of a plan and an exchange", k));
    check_stage_start(k, st.from(), at);
    at = st.to();
  }
  if (!(at == plan.dst))
    throw InputError(fmt::format("ragged plan: the stages end at {}, not at its target {}", at.placements_str(),
                                 plan.dst.placements_str()));
}
double RaggedStage::cost_us() const noexcept { return plan ? plan->total_cost_us : exchange->cost_us; }

std::vector<Layout> ragged_neighbours(const RaggedLayout& l) {
  if (!l.ragged()) return {};
  std::vector<Layout> out{l.base()};
  const Sharding like = l.base().sharding().with_shard_appended(0, ShardEntry{l.ragged()->mesh_dim, 1, false});
  out.emplace_back(l.mesh(), l.shape(), l.dtype(), like);
  return out;
}

std::vector<std::int64_t> exchange_received(const RaggedLayout& from, const RaggedLayout& to) {
  check_exchange(from, to);
  const Mesh& mesh = from.mesh();
  std::vector<std::int64_t> out(static_cast<std::size_t>(mesh.num_ranks()), 0);
  detail::for_each_exchange_pair(from, to, [&](std::int64_t a, std::int64_t b) {
    if (b == a) return;
    const auto ca = mesh.coord_of_rank(a), cb = mesh.coord_of_rank(b);
    out[static_cast<std::size_t>(b)] +=
        detail::exchange_part(from.base().indices(ca), from.piece(ca), to.base().indices(cb), to.piece(cb)).count();
  });
  return out;
}

RaggedExchange ragged_exchange(const RaggedLayout& from, const RaggedLayout& to, const CostModel& cost) {
  check_exchange(from, to);
  const Mesh& mesh = from.mesh();
  RaggedExchange ex{from, to, {}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  const auto s = static_cast<std::int64_t>(itemsize(from.dtype()));
  // every rank's blocks (shared by the ranks of one block: placement/blocks.hpp) and pieces once;
  // every (sender, receiver) pair once
  const auto R = static_cast<std::size_t>(mesh.num_ranks());
  std::vector<std::vector<std::int64_t>> coords(R);
  const detail::LayoutBlocks from_blocks(from.base()), to_blocks(to.base());
  std::vector<std::vector<IndexSet>> from_boxes(from_blocks.size()), to_boxes(to_blocks.size());
  for (std::size_t k = 0; k < from_blocks.size(); ++k) from_boxes[k] = from_blocks.box(k);
  for (std::size_t k = 0; k < to_blocks.size(); ++k) to_boxes[k] = to_blocks.box(k);
  std::vector<const std::vector<IndexSet>*> fb(R), tb(R);
  std::vector<Interval> fp(R), tp(R);
  for (std::size_t r = 0; r < R; ++r) {
    coords[r] = mesh.coord_of_rank(static_cast<std::int64_t>(r));
    fb[r] = &from_boxes[static_cast<std::size_t>(from_blocks.block_of(static_cast<std::int64_t>(r)))];
    tb[r] = &to_boxes[static_cast<std::size_t>(to_blocks.block_of(static_cast<std::int64_t>(r)))];
    fp[r] = from.piece(coords[r]);
    tp[r] = to.piece(coords[r]);
  }
  std::vector<std::int64_t> sent(R), received(R), copies(R), own(R), scratch(R), send_peers(R), recv_peers(R);
  std::uint32_t crossed = 0;
  if (!to.is_ragged() && to.base() == from.base()) {
    // Into its own base (an all-gather-v): the ranks of one base block in one exchange group each
    // send their piece to every other member, whose target is the whole block. Every pair of a block has the same
    // part from one sender (the receivers' blocks and pieces are equal), so the figures follow
    // per block from one part per sender: O(ranks), where the pair walk is O(ranks^2).
    // (the groups: the ranks of one block that share their coordinates off the exchange's mesh dims)
    const detail::LayoutBlocks& blocks = from_blocks;
    const auto group_dims = detail::exchange_group_dims(from);
    std::vector<std::vector<std::int64_t>> groups;
    for (std::size_t k = 0; k < blocks.size(); ++k) {
      std::map<std::int64_t, std::size_t> by_group;
      for (auto r : blocks.members(k)) {
        const auto [it, fresh] = by_group.emplace(detail::exchange_group_index(mesh, coords[static_cast<std::size_t>(r)], group_dims),
                                                  groups.size());
        if (fresh) groups.emplace_back();
        groups[it->second].push_back(r);
      }
    }
    for (const auto& mem : groups) {
      if (mem.size() < 2) {  // alone: its part is its own
        const auto a = static_cast<std::size_t>(mem.front());
        const auto n = detail::exchange_part(*fb[a], fp[a], *tb[a], tp[a]).count();
        copies[a] += n;
        own[a] += n;
        continue;
      }
      std::int64_t total = 0, unpacked = 0, senders = 0;
      std::vector<std::int64_t> n_of(mem.size()), unpack_of(mem.size());
      for (std::size_t i = 0; i < mem.size(); ++i) {
        const auto a = static_cast<std::size_t>(mem[i]);
        const auto b = static_cast<std::size_t>(mem[i == 0 ? 1 : 0]);  // any other member: the same part
        const auto p = detail::exchange_part(*fb[a], fp[a], *tb[b], tp[b]);
        const auto n = p.count();
        if (n == 0) continue;
        const auto others = static_cast<std::int64_t>(mem.size()) - 1;
        copies[a] += n;  // its own part (the same box and positions as every receiver's)
        own[a] += n;
        sent[a] += n * others;
        send_peers[a] += others;
        if (!detail::contiguous_in(p.box, p.lo, p.hi, *fb[a])) copies[a] += n * others, scratch[a] += n * others;
        n_of[i] = n;
        unpack_of[i] = detail::contiguous_in(p.box, p.lo, p.hi, *tb[b]) ? 0 : n;
        total += n;
        unpacked += unpack_of[i];
        ++senders;
      }
      for (std::size_t i = 0; i < mem.size(); ++i) {
        const auto b = static_cast<std::size_t>(mem[i]);
        received[b] += total - n_of[i];
        recv_peers[b] += senders - (n_of[i] > 0 ? 1 : 0);
        copies[b] += unpacked - unpack_of[i];
        scratch[b] += unpacked - unpack_of[i];
      }
      if (senders > 0)  // every mesh dim on which the block's members differ is crossed
        for (std::size_t i = 1; i < mem.size(); ++i)
          for (int m = 0; m < mesh.ndim(); ++m)
            if (coords[static_cast<std::size_t>(mem[i])][static_cast<std::size_t>(m)] !=
                coords[static_cast<std::size_t>(mem[0])][static_cast<std::size_t>(m)])
              crossed |= 1u << m;
    }
  } else {
  detail::for_each_exchange_pair(from, to, [&](std::int64_t sender, std::int64_t receiver) {
    const auto a = static_cast<std::size_t>(sender), b = static_cast<std::size_t>(receiver);
    const auto& pc = coords[b];
    const auto p = detail::exchange_part(*fb[a], fp[a], *tb[b], tp[b]);
    const auto n = p.count();
    if (n == 0) return;
    if (a == b) {  // its own part: a local copy
      copies[a] += n;
      own[a] += n;
      return;
    }
    for (int m = 0; m < mesh.ndim(); ++m)
      if (pc[static_cast<std::size_t>(m)] != coords[a][static_cast<std::size_t>(m)]) crossed |= 1u << m;
    sent[a] += n;
    ++send_peers[a];
    if (!detail::contiguous_in(p.box, p.lo, p.hi, *fb[a])) {  // packed into scratch
      copies[a] += n;
      scratch[a] += n;
    }
    received[b] += n;
    ++recv_peers[b];
    if (!detail::contiguous_in(p.box, p.lo, p.hi, *tb[b])) {  // unpacked from scratch
      copies[b] += n;
      scratch[b] += n;
    }
  });
  }
  for (std::size_t r = 0; r < R; ++r) {
    ex.bytes_sent = std::max(ex.bytes_sent, sent[r] * s);
    ex.bytes_received = std::max(ex.bytes_received, received[r] * s);
    ex.copy_bytes = std::max(ex.copy_bytes, copies[r] * s);
    ex.own_bytes = std::max(ex.own_bytes, own[r] * s);
    ex.peers = std::max({ex.peers, send_peers[r], recv_peers[r]});
    ex.scratch_elems = std::max(ex.scratch_elems, scratch[r]);
  }
  Traffic t;
  t.kind = Traffic::Kind::direct;
  t.peers = ex.peers;
  for (int m = 0; m < mesh.ndim(); ++m)
    if (crossed & (1u << m)) {
      ex.mesh_dims.push_back(m);
      t.inter_host = t.inter_host || cost.is_inter_host(mesh.shape(), m);
    }
  t.bytes = static_cast<double>(std::max(ex.bytes_sent, ex.bytes_received));
  t.copy_bytes = static_cast<double>(ex.copy_bytes);
  if (ex.peers == 0) t.kind = Traffic::Kind::local;  // a local cut: copies only
  const StepTime st = cost.time(t);
  ex.alpha_us = st.alpha_us;
  ex.wire_us = st.wire_us;
  ex.copy_us = st.copy_us;
  ex.cost_us = st.total_us();
  return ex;
}

std::vector<Layout> plain_meeting_points(const Mesh& mesh, const std::vector<std::int64_t>& shape, DType dtype) {
  // {R, S(d)} on every mesh dim, every shard order of a dim split twice or more: counted first, so
  // a mesh or tensor too large for the whole set costs nothing to refuse
  const int md = mesh.ndim(), nd = static_cast<int>(shape.size());
  std::vector<Layout> out;
  if (mesh.num_ranks() > kRaggedEnumerationRanks || nd == 0) return out;
  double count = 1;
  for (int m = 0; m < md; ++m) count *= nd + 1;
  if (count * 6 > static_cast<double>(kRaggedEnumerationStates)) return out;  // orders: at most 3! per assignment here
  std::vector<int> pick(static_cast<std::size_t>(md), 0);
  while (true) {
    std::vector<std::vector<ShardEntry>> dims(static_cast<std::size_t>(nd));
    for (int m = 0; m < md; ++m)
      if (pick[static_cast<std::size_t>(m)] > 0) dims[static_cast<std::size_t>(pick[static_cast<std::size_t>(m)] - 1)].push_back({m, 1, false});
    // every order of each dim's entries (the permutations of each list, combined)
    auto orders = [&](auto&& self, std::size_t d) -> void {
      if (d == dims.size()) {
        out.emplace_back(mesh, shape, dtype, Sharding(md, dims, std::vector<std::optional<ReduceOp>>(static_cast<std::size_t>(md))));
        return;
      }
      auto& e = dims[d];
      std::sort(e.begin(), e.end(), [](const ShardEntry& a, const ShardEntry& b) { return a.mesh_dim < b.mesh_dim; });
      do self(self, d + 1);
      while (std::next_permutation(e.begin(), e.end(), [](const ShardEntry& a, const ShardEntry& b) { return a.mesh_dim < b.mesh_dim; }));
    };
    orders(orders, 0);
    int m = md;
    while (m-- > 0) {
      if (++pick[static_cast<std::size_t>(m)] <= nd) break;
      pick[static_cast<std::size_t>(m)] = 0;
    }
    if (m < 0) return out;
  }
}

RaggedPlan plan_ragged(const RaggedLayout& src, const RaggedLayout& dst, const CostModel& cost, const PlanOptions& options) {
  check_same_tensor(src, dst);
  RaggedPlan best{src, dst, cost.name, {}, 0};
  if (src == dst) return best;
  PlanOptions inner = options;
  inner.runner_up = false;
  if (!src.is_ragged() && !dst.is_ragged()) {
    best.stages.push_back({plan_redistribution(src.base(), dst.base(), cost, options), std::nullopt});
    best.total_cost_us = best.stages[0].cost_us();
    return best;
  }
  std::optional<std::string> blocked;  // the first exchange refused (too many pairs, too many ranks)
  auto exchange = [&](const RaggedLayout& a, const RaggedLayout& b) -> std::optional<RaggedStage> {
    if (has_partial(a) || has_partial(b)) return std::nullopt;
    try {
      return RaggedStage{std::nullopt, ragged_exchange(a, b, cost)};
    } catch (const InputError& e) {
      if (!blocked) blocked = e.what();
      return std::nullopt;  // another chain may still do
    }
  };
  auto ordinary = [&](const Layout& a, const Layout& b) -> std::optional<RaggedStage> {
    try {
      return RaggedStage{plan_redistribution(a, b, cost, inner), std::nullopt};
    } catch (const InputError&) {
      return std::nullopt;  // a constraint (peak bytes, say) that blocks this chain
    }
  };
  double best_cost = std::numeric_limits<double>::infinity();
  auto consider = [&](std::vector<RaggedStage> stages) {
    double total = 0;
    for (const auto& st : stages) total += st.cost_us();
    // ties keep the earlier candidate (the order below is fixed: the same plan on every rank)
    if (total < best_cost) {
      best_cost = total;
      best.stages = std::move(stages);
    }
  };
  // Meeting points: every plain non-Partial layout on a small mesh, else each ragged end's neighbours.
  std::vector<Layout> all = plain_meeting_points(src.mesh(), src.shape(), src.dtype());
  auto points_near = [&](const RaggedLayout& end, const RaggedLayout& other) {
    std::vector<Layout> pts = all.empty() ? ragged_neighbours(end) : all;
    if (all.empty() && !other.is_ragged() && !has_partial(other)) pts.push_back(other.base());
    return pts;
  };
  // a chain: [exchange src -> a] [plan a -> b] [exchange b -> dst] (each exchange costed once)
  std::unordered_map<Layout, std::optional<RaggedStage>> from_src, to_dst;
  auto chain = [&](const Layout* a, const Layout* b) {
    std::vector<RaggedStage> stages;
    const Layout& from = a ? *a : src.base();
    const Layout& to = b ? *b : dst.base();
    if (a) {
      auto it = from_src.find(*a);
      if (it == from_src.end()) it = from_src.emplace(*a, exchange(src, RaggedLayout(*a))).first;
      if (!it->second) return;
      stages.push_back(*it->second);
    }
    if (!(from == to)) {
      auto p = ordinary(from, to);
      if (!p) return;
      stages.push_back(std::move(*p));
    }
    if (b) {
      auto it = to_dst.find(*b);
      if (it == to_dst.end()) it = to_dst.emplace(*b, exchange(RaggedLayout(*b), dst)).first;
      if (!it->second) return;
      stages.push_back(*it->second);
    }
    consider(std::move(stages));
  };
  if (src.is_ragged() && dst.is_ragged()) {
    if (auto e = exchange(src, dst)) consider({*e});
    // one meeting point, or a plan between a point near either end and a neighbour of the other
    const auto near_src = points_near(src, dst), near_dst = points_near(dst, src);
    const auto nb_src = ragged_neighbours(src), nb_dst = ragged_neighbours(dst);
    for (const auto& a : near_src) chain(&a, &a);
    for (const auto& a : near_src)
      for (const auto& b : nb_dst) chain(&a, &b);
    for (const auto& a : nb_src)
      for (const auto& b : near_dst) chain(&a, &b);
  } else if (src.is_ragged()) {
    for (const auto& a : points_near(src, dst)) chain(&a, nullptr);
  } else {
    for (const auto& b : points_near(dst, src)) chain(nullptr, &b);
  }
  if (!std::isfinite(best_cost))
    throw InputError(fmt::format("no ragged plan from {} to {}: every chain is blocked{}", src.str(), dst.placements_str(),
                                 blocked ? " (" + *blocked + ")" : std::string()));
  best.total_cost_us = best_cost;
  return best;
}

std::string RaggedPlan::trace() const {
  std::string out = src.placements_str();
  for (const auto& st : stages) {
    if (st.plan) {
      const auto t = st.plan->trace();
      out += t.substr(st.plan->src.placements_str().size());
    } else {
      out += "=>" + st.exchange->to.placements_str();
    }
  }
  return out;
}

std::uint64_t RaggedPlan::hash() const {
  std::string canon = fmt::format("{}|{}|{}", src.str(), dst.placements_str(), cost_model);
  for (const auto& st : stages) {
    if (st.plan) canon += fmt::format(";plan:{:016x}", st.plan->hash());
    else
      canon += fmt::format(";exchange:{}:{}:{}", st.exchange->to.placements_str(), fmt::join(st.exchange->mesh_dims, ","),
                           std::llround(st.exchange->cost_us * 1e6));
  }
  return detail::fnv1a(canon.data(), canon.size());
}

std::string RaggedPlan::to_json() const {
  nlohmann::ordered_json j;
  j["src"] = nlohmann::ordered_json::parse(dtensor::to_json(src));
  j["dst"] = nlohmann::ordered_json::parse(dtensor::to_json(dst));
  j["cost_model"] = cost_model;
  j["total_cost_us"] = total_cost_us;
  j["trace"] = trace();
  j["plan_hash"] = fmt::format("{:016x}", hash());
  j["stages"] = nlohmann::ordered_json::array();
  for (const auto& st : stages) {
    nlohmann::ordered_json s;
    if (st.plan) {
      s["kind"] = "plan";
      s["plan"] = nlohmann::ordered_json::parse(st.plan->to_json());
    } else {
      const auto& e = *st.exchange;
      s["kind"] = "exchange";
      s["from"] = e.from.placements_str();
      s["to"] = e.to.placements_str();
      s["mesh_dims"] = e.mesh_dims;
      s["bytes_sent"] = e.bytes_sent;
      s["bytes_received"] = e.bytes_received;
      s["copy_bytes"] = e.copy_bytes;
      s["own_bytes"] = e.own_bytes;
      s["peers"] = e.peers;
      s["alpha_us"] = e.alpha_us;
      s["wire_us"] = e.wire_us;
      s["copy_us"] = e.copy_us;
      s["cost_us"] = e.cost_us;
    }
    j["stages"].push_back(s);
  }
  return j.dump();
}

RaggedPlan RaggedPlan::from_json(std::string_view text) {
  const auto j = detail::parse_json(text, "ragged plan");
  if (!j.is_object()) throw InputError("ragged plan JSON must be an object");
  for (const auto& [k, v] : j.items())
    if (k != "src" && k != "dst" && k != "cost_model" && k != "total_cost_us" && k != "trace" && k != "plan_hash" && k != "stages")
      throw InputError(fmt::format("ragged plan JSON: unknown field {}", quote_input(k)));
  auto need = [&](const nlohmann::json& o, const char* f, const std::string& where) -> const nlohmann::json& {
    const auto it = o.find(f);
    if (it == o.end()) throw InputError(fmt::format("{} lacks '{}'", where, f));
    return *it;
  };
  RaggedPlan p{ragged_layout_from_json(need(j, "src", "ragged plan JSON").dump()),
               ragged_layout_from_json(need(j, "dst", "ragged plan JSON").dump()), "", {}, 0};
  check_same_tensor(p.src, p.dst);
  const auto& cm = need(j, "cost_model", "ragged plan JSON");
  if (!cm.is_string()) throw InputError("ragged plan JSON field 'cost_model' must be a string");
  p.cost_model = cm.get<std::string>();
  const auto& total = need(j, "total_cost_us", "ragged plan JSON");
  if (!total.is_number() || !std::isfinite(total.get<double>()) || total.get<double>() < 0)
    throw InputError("ragged plan JSON field 'total_cost_us' must be a finite time >= 0");
  p.total_cost_us = total.get<double>();
  const auto& stages = need(j, "stages", "ragged plan JSON");
  if (!stages.is_array() || stages.size() > 64) throw InputError("ragged plan JSON field 'stages' must be a list of at most 64 stages");
  const CostModel unit_model;  // exchanges' counts do not depend on the model; only their times do
  for (std::size_t k = 0; k < stages.size(); ++k) {
    const auto& st = stages[k];
    const std::string where = fmt::format("ragged plan stage {}", k);
    if (!st.is_object()) throw InputError(fmt::format("{} must be an object", where));
    const auto& kind = need(st, "kind", where);
    const RaggedLayout from = k == 0 ? p.src : p.stages.back().to();
    if (kind == "plan") {
      Plan plan = Plan::from_json(need(st, "plan", where).dump());
      check_stage_start(k, RaggedLayout(plan.src), from);
      p.stages.push_back({std::move(plan), std::nullopt});
      continue;
    }
    if (kind != "exchange") throw InputError(fmt::format("{}: kind must be \"plan\" or \"exchange\"", where));
    for (const auto& [key, v] : st.items())
      if (key != "kind" && key != "from" && key != "to" && key != "mesh_dims" && key != "bytes_sent" && key != "bytes_received" &&
          key != "copy_bytes" && key != "own_bytes" && key != "peers" && key != "alpha_us" && key != "wire_us" &&
          key != "copy_us" && key != "cost_us")
        throw InputError(fmt::format("{}: unknown field {}", where, quote_input(key)));
    auto text = [&](const char* f) {
      const auto& v = need(st, f, where);
      if (!v.is_string()) throw InputError(fmt::format("{}.{} must be a string", where, f));
      return v.get<std::string>();
    };
    const RaggedLayout a = RaggedLayout::parse(p.src.mesh(), p.src.shape(), p.src.dtype(), text("from"));
    check_stage_start(k, a, from);  // before its counts are recomputed
    const RaggedLayout b = RaggedLayout::parse(p.src.mesh(), p.src.shape(), p.src.dtype(), text("to"));
    RaggedExchange ex = ragged_exchange(a, b, unit_model);
    const std::pair<const char*, std::int64_t> counts[] = {{"bytes_sent", ex.bytes_sent}, {"bytes_received", ex.bytes_received},
                                                            {"copy_bytes", ex.copy_bytes}, {"own_bytes", ex.own_bytes},
                                                            {"peers", ex.peers}};
    for (const auto& [f, want] : counts) {
      const auto got = detail::json_int(need(st, f, where), f, 0, std::int64_t{1} << 62);
      if (got != want) throw InputError(fmt::format("{}: {} is {}; the layouts give {}", where, f, got, want));
    }
    const auto dims = detail::json_int_list(need(st, "mesh_dims", where), "mesh_dims", 0, Sharding::kMaxMeshDims - 1);
    if (dims != std::vector<std::int64_t>(ex.mesh_dims.begin(), ex.mesh_dims.end()))
      throw InputError(fmt::format("{}: mesh_dims ({}) are not the ones its transfers cross ({})", where, fmt::join(dims, ","),
                                   fmt::join(ex.mesh_dims, ",")));
    for (auto [f, field] : {std::pair{"alpha_us", &ex.alpha_us}, {"wire_us", &ex.wire_us}, {"copy_us", &ex.copy_us}, {"cost_us", &ex.cost_us}}) {
      const auto& v = need(st, f, where);
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
        throw InputError(fmt::format("{}.{} must be a finite time >= 0", where, f));
      *field = v.get<double>();  // the plan's own model's times
    }
    p.stages.push_back({std::nullopt, std::move(ex)});
  }
  check_chain(p);
  // derived figures recomputed: the total is the stages' sum, and the trace and hash, where the
  // file states them, are the plan's (an edited one is refused)
  double sum = 0;
  for (const auto& st : p.stages) sum += st.cost_us();
  if (!detail::same_time(p.total_cost_us, sum))
    throw InputError(fmt::format("ragged plan JSON 'total_cost_us' is {}, its stages add up to {}", p.total_cost_us, sum));
  if (j.contains("trace") && (!j["trace"].is_string() || j["trace"].get<std::string>() != p.trace()))
    throw InputError(fmt::format("ragged plan JSON 'trace' is {}, the plan's is {}", detail::json_quote(j["trace"]), quote_input(p.trace())));
  if (j.contains("plan_hash") && !detail::json_hash_is(j["plan_hash"], p.hash()))
    throw InputError(fmt::format("ragged plan JSON 'plan_hash' is {}, the plan's is {:016x}", detail::json_quote(j["plan_hash"]), p.hash()));
  return p;
}

std::string RaggedPlan::explain() const {
  std::string out = fmt::format("ragged plan {} -> {} on {} {} {} ({})\n", src.placements_str(), dst.placements_str(),
                                src.mesh().str(), shape_str(src.shape()), to_string(src.dtype()), cost_model);
  if (stages.empty()) return out + "  nothing to do: the layouts are equal\n";
  for (std::size_t k = 0; k < stages.size(); ++k) {
    const auto& st = stages[k];
    if (st.plan) {
      out += fmt::format("  {}. plan      {:>9.2f} us  {}\n", k + 1, st.plan->total_cost_us, st.plan->trace());
      for (const auto& s : st.plan->steps)
        out += fmt::format("       {} over mesh dims [{}]: {} B sent, {} B received, {:.2f} us\n", to_string(s.kind),
                           fmt::join(s.mesh_dims, ","), s.bytes_sent, s.bytes_received, s.cost_us);
    } else {
      const auto& e = *st.exchange;
      out += fmt::format("  {}. exchange  {:>9.2f} us  {} => {}: {} B sent, {} B received, {} peers, {} B copied "
                         "({} B packing, {} B own part){}\n", k + 1, e.cost_us, e.from.placements_str(), e.to.placements_str(),
                         e.bytes_sent, e.bytes_received, e.peers, e.copy_bytes, e.copy_bytes - e.own_bytes, e.own_bytes,
                         e.peers == 0 ? " (a local cut)" : "");
    }
  }
  return out + fmt::format("  total {:.2f} us  {}\n", total_cost_us, trace());
}

}  // namespace dtensor

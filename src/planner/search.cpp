// Dijkstra over the redistribution graph, built lazily from the source (states are generated
// when first reached, edges when a state is settled), on Boost.Graph's d-ary heap.
//
// Tie-break (documented in docs/planner.md): paths compare by total cost quantised to
// picoseconds, then by step count. Among equal (cost, steps) the first path found wins, and
// paths are found in a fixed order: states are settled by (f, estimated total steps, deeper
// first, discovery index) and a state's edges are relaxed in enumerate_edges order (relabel,
// then per mesh dim ascending: local_chunk, local_fill, all_reduce, reduce_scatter, all_gather,
// all_to_all; then flattened collectives by mesh-dim mask; direct last). Everything is a pure
// function of the inputs, so every rank computes the bit-identical plan.
#include <boost/graph/detail/d_ary_heap.hpp>
#include <boost/property_map/property_map.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <queue>
#include <limits>
#include <unordered_map>

#include "dtensor/error.hpp"
#include "dtensor/planner.hpp"
#include "edges.hpp"
#include "search.hpp"

namespace dtensor {
namespace {

// g = cost so far; f = g + lower bound to the target (A*; the bound is consistent, so a state
// is final when settled and the result is exactly Dijkstra's optimum).
struct Dist {
  std::int64_t cost_ps = std::numeric_limits<std::int64_t>::max();
  std::int64_t f_ps = std::numeric_limits<std::int64_t>::max();
  std::int32_t steps = 0;
  std::uint32_t id = 0;
  std::int32_t f_steps = 0;  // steps so far plus the bound's steps still to take
  // Which relaxation set it: (the settle index of its predecessor, the edge's index there).
  // Among equal (cost, steps) the lowest wins: the first found when every edge is relaxed as
  // its source is settled, whatever order deferred edges are costed in.
  std::uint64_t relaxed_by = 0;
  [[nodiscard]] bool better_than(const Dist& o) const {
    if (cost_ps != o.cost_ps) return cost_ps < o.cost_ps;
    if (steps != o.steps) return steps < o.steps;
    return relaxed_by < o.relaxed_by;
  }
};
struct DistLess {
  bool operator()(const Dist& a, const Dist& b) const {
    if (a.f_ps != b.f_ps) return a.f_ps < b.f_ps;
    if (a.f_steps != b.f_steps) return a.f_steps < b.f_steps;
    if (a.steps != b.steps) return a.steps > b.steps;  // on a plateau of equal estimates, deeper first
    return a.id < b.id;
  }
};

struct DistMap {
  using key_type = std::size_t;
  using value_type = Dist;
  using reference = const Dist&;
  using category = boost::readable_property_map_tag;
  const std::vector<Dist>* v;
};
inline const Dist& get(const DistMap& m, std::size_t k) { return (*m.v)[k]; }

struct HeapIndexMap {
  using key_type = std::size_t;
  using value_type = std::size_t;
  using reference = std::size_t&;
  using category = boost::read_write_property_map_tag;
  std::vector<std::size_t>* v;
};
inline std::size_t get(const HeapIndexMap& m, std::size_t k) { return (*m.v)[k]; }
inline void put(const HeapIndexMap& m, std::size_t k, std::size_t x) { (*m.v)[k] = x; }

// A search's per-state arrays. Use marks them busy and, when done, empties them (keeping their
// capacity unless it grew past a million states).
struct SearchScratch {
  std::vector<Dist> dist;
  std::vector<std::size_t> heap_pos;
  std::vector<std::int64_t> pred;
  struct PredEdge {
    StepKind kind;
    DimList group;
    std::uint16_t perm;  // the relabeling that made the state canonical (StateTable::perms; 0: none)
  };
  std::vector<PredEdge> pred_edge;
  std::vector<char> settled;
  std::vector<std::uint32_t> disc;
  std::vector<std::uint32_t> first;  // (TiedRunnerUp) the source's edge a state's best path starts with
  // (TiedRunnerUp) another relaxation of a state as cheap, in as many steps, as its label, whose
  // path starts with another edge out of the source (pred < 0: none found)
  struct Tied {
    std::int64_t pred = -1;
    PredEdge edge{};
    std::uint32_t first = 0;
    std::uint64_t relaxed_by = 0;
  };
  std::vector<Tied> tied;
  // the search's deferred edges (a min-heap by key, then by the relaxation's order)
  struct Deferred {
    std::int64_t key;
    std::uint64_t relaxed_by;
    std::uint32_t from, index;
    bool operator>(const Deferred& o) const { return key != o.key ? key > o.key : relaxed_by > o.relaxed_by; }
  };
  std::vector<Deferred> deferred;
  bool busy = false;
  struct Use {
    SearchScratch& s;
    explicit Use(SearchScratch& x) : s(x) {
      s.busy = true;
      s.clear();
    }
    ~Use() {
      s.clear();
      if (s.dist.capacity() > (std::size_t{1} << 20)) s = SearchScratch{};
      // (a large search's deferred edges are not kept: at most 1.5 MiB stay with the thread)
      if (s.deferred.capacity() > (std::size_t{1} << 16)) std::vector<Deferred>().swap(s.deferred);
      s.busy = false;
    }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
  };
  void clear() {
    dist.clear();
    heap_pos.clear();
    pred.clear();
    pred_edge.clear();
    settled.clear();
    disc.clear();
    first.clear();
    tied.clear();
    deferred.clear();
  }
};

}  // namespace

std::optional<Found> search(const GraphContext& ctx, std::int64_t budget, const SearchModes& modes) {
  const FirstEdge* const forbidden = modes.forbidden;
  Settled* const all = modes.all;
  SourceClassProbe* const probe = modes.probe;
  TiedRunnerUp* const tie = modes.tie;
  constexpr std::uint32_t kUnseen = std::numeric_limits<std::uint32_t>::max();
  const std::uint32_t src = ctx.intern(ctx.src), dst = ctx.intern(ctx.dst);
  // The per-state arrays live in this thread's scratch, reused across searches (a query runs two;
  // a search on a context made inside another, if ever, gets its own).
  thread_local SearchScratch shared;
  SearchScratch own;
  SearchScratch& S = shared.busy ? own : shared;
  const SearchScratch::Use use(S);
  auto& dist = S.dist;
  auto& heap_pos = S.heap_pos;
  auto& pred = S.pred;
  auto& pred_edge = S.pred_edge;
  auto& settled = S.settled;
  auto& disc = S.disc;  // this search's discovery index per state id
  auto& first = S.first;
  auto& tied_at = S.tied;
  std::uint32_t discovered = 0;
  auto grow = [&] {
    const std::size_t n = ctx.table.states.size();
    if (dist.size() >= n) return;
    if (dist.capacity() < n) {  // grow geometrically, all arrays at once
      const std::size_t cap = std::max<std::size_t>({64, 2 * n, dist.capacity() * 2});
      dist.reserve(cap);
      heap_pos.reserve(cap);
      pred.reserve(cap);
      pred_edge.reserve(cap);
      settled.reserve(cap);
      disc.reserve(cap);
      if (tie) {
        first.reserve(cap);
        tied_at.reserve(cap);
      }
    }
    dist.resize(n);
    heap_pos.resize(n, static_cast<std::size_t>(-1));
    pred.resize(n, -1);
    pred_edge.resize(n);
    settled.resize(n, 0);
    disc.resize(n, kUnseen);
    if (tie) {
      first.resize(n, 0);
      tied_at.resize(n);
    }
  };
  grow();
  disc[src] = discovered++;
  dist[src] = Dist{0, bound_ps(ctx.table.bound[src]), 0, disc[src], ctx.table.bound[src].steps};
  const bool with_direct = ctx.edges == EdgeSet::all;
  using Heap = boost::d_ary_heap_indirect<std::size_t, 4, HeapIndexMap, DistMap, DistLess>;
  Heap heap(DistMap{&dist}, HeapIndexMap{&heap_pos});
  heap.push(src);
  // Deferred edges (docs/planner.md): an edge out of a settled state is costed only when its
  // floor estimate (cost so far + the edge's floor + the next state's bound; a direct step's
  // floor from what the state lacks) is at most the estimate of the next state to settle: before
  // that it can change neither which state settles next nor any settled state's cost. With a
  // memory budget the search costs every edge when it meets it (its peak decides whether it is
  // taken at all) and does not cost edges that cannot beat the best plan found so far.
  // (a min-heap over the scratch's list, as std::priority_queue with std::greater keeps it)
  struct {
    std::vector<SearchScratch::Deferred>& v;
    [[nodiscard]] bool empty() const noexcept { return v.empty(); }
    [[nodiscard]] const SearchScratch::Deferred& top() const noexcept { return v.front(); }
    void push(const SearchScratch::Deferred& d) {
      v.push_back(d);
      std::push_heap(v.begin(), v.end(), std::greater<>{});
    }
    void pop() {
      std::pop_heap(v.begin(), v.end(), std::greater<>{});
      v.pop_back();
    }
  } deferred{S.deferred};
  using Deferred = SearchScratch::Deferred;
  const bool defer = budget < 0;
  constexpr std::uint32_t kDirect = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t settle_index = 0;
  constexpr std::uint16_t same = 0;  // the identity relabeling
  // (tie) The best two relaxations of the target whose paths start with different edges out of
  // the source (an edge's index there: the low half of relaxed_by, which the source's settle
  // index 0 leaves alone). The best is the target's label; the other, when it ties with it in
  // cost and steps, is a runner-up.
  struct TargetLabel {
    Dist d;
    std::size_t from = 0;
    SearchScratch::PredEdge edge{};
    std::uint32_t first = 0;
    bool set = false;
  };
  TargetLabel best1, best2;
  auto relax = [&](std::size_t u, std::uint32_t v, StepKind kind, const DimList& group, std::uint16_t perm, double cost_us,
                   std::uint64_t relaxed_by) {
    if (settled[v]) return;
    const Dist& du = dist[u];
    const std::int64_t g = du.cost_ps + quantise(cost_us);
    Dist nd{g, g + bound_ps(ctx.table.bound[v]), du.steps + 1, disc[v], du.steps + 1 + ctx.table.bound[v].steps, relaxed_by};
    const std::uint32_t starts = tie ? (u == src ? static_cast<std::uint32_t>(relaxed_by) : first[u]) : 0;
    if (tie && v == dst) {
      const TargetLabel x{nd, u, {kind, group, perm}, starts, true};
      if (!best1.set || x.d.better_than(best1.d)) {
        if (best1.set && best1.first != x.first) best2 = best1;
        best1 = x;
      } else if (x.first != best1.first && (!best2.set || x.d.better_than(best2.d))) {
        best2 = x;
      }
    }
    if (tie && v != dst) {
      // Two paths into v as cheap and as long, from different edges out of the source: the one
      // that does not become v's label is kept (the lowest relaxation order among such), so that
      // a plan through v has a tied runner-up through the other.
      const Dist& old = dist[v];
      auto& t = tied_at[v];
      if (nd.cost_ps == old.cost_ps && nd.steps == old.steps) {
        if (nd.better_than(old)) {
          if (first[v] != starts && (t.pred < 0 || t.first == starts || old.relaxed_by < t.relaxed_by))
            t = {pred[v], pred_edge[v], first[v], old.relaxed_by};
        } else if (first[v] != starts && (t.pred < 0 || relaxed_by < t.relaxed_by)) {
          t = {static_cast<std::int64_t>(u), {kind, group, perm}, starts, relaxed_by};
        }
      } else if (nd.better_than(old)) {
        t.pred = -1;
      }
    }
    if (!nd.better_than(dist[v])) return;
    dist[v] = nd;
    pred[v] = static_cast<std::int64_t>(u);
    pred_edge[v] = {kind, group, perm};
    if (tie) first[v] = starts;
    heap.push_or_update(v);
  };
  // The plan along `path` (state ids from the source to the target), each step the edge its
  // state was relaxed by (the one into path[at] `edge` when given). With interchangeable mesh dims the
  // path's states are canonical: the plan's layout at each point is sigma(canonical state), and
  // its step the canonical edge's kind over sigma(group).
  auto path_of = [&](const std::vector<std::size_t>& path, std::size_t at, const SearchScratch::PredEdge* edge) {
    Found f;
    Relabeling sigma;
    bool relabeled = false;
    Sharding real_from = ctx.table.states[path[0]];
    for (std::size_t k = 1; k < path.size(); ++k) {
      const auto& [kind, group, perm_id] = k == at && edge ? *edge : pred_edge[path[k]];
      const auto from = path[k - 1];
      Sharding real_to = ctx.table.states[path[k]];
      DimList real_group = group;
      relabeled = relabeled || perm_id != same;
      if (relabeled) {
        // the edge reached perm(t) for the layout t it made from the canonical state: the plan
        // reaches sigma(t), and sigma becomes sigma o perm^-1
        // (part by part: the mesh dims' and the tensor dims')
        const Relabeling& perm = ctx.table.perms[perm_id];
        Relabeling next;
        for (int m = 0; m < ctx.mesh.ndim(); ++m)
          next.mesh[static_cast<std::size_t>(perm.mesh[static_cast<std::size_t>(m)])] = sigma.mesh[static_cast<std::size_t>(m)];
        for (int d = 0; d < static_cast<int>(ctx.shape.size()); ++d)
          next.tensor[static_cast<std::size_t>(perm.tensor[static_cast<std::size_t>(d)])] = sigma.tensor[static_cast<std::size_t>(d)];
        real_to = ctx.relabel(real_to, next);
        real_group = DimList{};
        for (int m : group.span()) real_group.push(sigma.mesh[static_cast<std::size_t>(m)]);
        // a gather over mesh dims of several tensor dims lists them in tensor-dim order
        // (edges.cpp), which exchanging tensor dims changes: listed again from the real layout
        if (kind == StepKind::all_gather && real_group.size() > 1) {
          std::uint32_t mask = 0;
          for (int m : real_group.span()) mask |= 1u << m;
          (void)all_gather_group(real_from, mask, real_group);  // (a real gather: its mask is a suffix)
        }
        // a flattened all_reduce's dims are listed ascending (edges.cpp); its result does not
        // depend on their order
        if (kind == StepKind::all_reduce) std::sort(real_group.v.begin(), real_group.v.begin() + real_group.n);
        sigma = next;
      }
      if (!relabeled && kind == StepKind::direct && ctx.table.direct_at[from] >= 0)  // costed already: reuse its transfers' counts
        f.steps.push_back(complete_direct_step(ctx, ctx.direct_step(static_cast<std::uint32_t>(from)),
                                               ctx.table.direct_dims[static_cast<std::size_t>(ctx.table.direct_at[from])],
                                               real_from, real_to));
      else
        f.steps.push_back(make_step(ctx, kind, real_group.span(), real_from, real_to, true));
      real_from = std::move(real_to);
      f.total_cost_us += f.steps.back().cost_us;
    }
    return f;
  };
  std::optional<Found> found;
  std::size_t extra = 0;  // states settled beyond the optimum's estimate (with `all`)
  while (true) {
    while (!deferred.empty() && (heap.empty() || deferred.top().key <= dist[heap.top()].f_ps)) {
      const Deferred d = deferred.top();
      deferred.pop();
      if (d.index == kDirect) {
        if (settled[dst]) continue;
        const Step& st = ctx.direct_step(d.from);
        relax(d.from, dst, StepKind::direct, {}, same, st.cost_us, d.relaxed_by);
        continue;
      }
      auto& e = ctx.table.edge_list[d.from][d.index];
      if (settled[e.to]) continue;
      ctx.cost_edge(d.from, e);
      relax(d.from, e.to, e.kind, e.group, e.perm, e.cost_us, d.relaxed_by);
    }
    if (heap.empty()) break;
    const std::size_t u = heap.top();
    if (found && dist[u].f_ps > all->limit_ps()) break;
    if (found && dist[u].f_ps > all->optimum_ps && extra++ >= all->max_extra) {
      all->complete = false;
      break;
    }
    heap.pop();
    settled[u] = 1;
    const std::uint64_t settled_as = static_cast<std::uint64_t>(settle_index++) << 32;
    if (u == dst && !found) {
      // the states of the best path into v, from the source
      auto path_to = [&](std::int64_t v) {
        std::vector<std::size_t> p;
        for (; v >= 0; v = pred[static_cast<std::size_t>(v)]) p.push_back(static_cast<std::size_t>(v));
        std::reverse(p.begin(), p.end());
        return p;
      };
      const std::vector<std::size_t> path = path_to(static_cast<std::int64_t>(u));
      Found f = path_of(path, 0, nullptr);
      f.cost_ps = dist[dst].cost_ps;
      // The best path into `from`, then `edge` into path[rest], then the plan's states from there:
      // as cheap as the plan, in as many steps, so a runner-up when its first step is another.
      auto offer_tie = [&](std::int64_t from, const SearchScratch::PredEdge& edge, std::size_t rest) {
        std::vector<std::size_t> p = path_to(from);
        const std::size_t at = p.size();
        p.insert(p.end(), path.begin() + static_cast<std::ptrdiff_t>(rest), path.end());
        Found r = path_of(p, at, &edge);
        r.cost_ps = f.cost_ps;
        const Step &a = f.steps.front(), &b = r.steps.front();
        if (a.kind != b.kind || a.mesh_dims != b.mesh_dims || a.to != b.to) tie->found = std::move(r);
      };
      // a relaxation of the target as cheap, in as many steps, from another first edge: the
      // runner-up (unless its first step is the plan's after all: then the runner-up search)
      if (tie && best2.set && best2.d.cost_ps == f.cost_ps && best2.d.steps == dist[dst].steps)
        offer_tie(static_cast<std::int64_t>(best2.from), best2.edge, path.size() - 1);
      // else a state of the plan reached as cheaply, in as many steps, from another first edge:
      // that path, then the plan's rest, is a runner-up (the first such state from the source)
      for (std::size_t k = 1; tie && !tie->found && k + 1 < path.size(); ++k) {
        const auto& t = tied_at[path[k]];
        if (t.pred >= 0 && t.first != first[path[k]]) offer_tie(t.pred, t.edge, k);
      }
      if (!all) return f;
      found = std::move(f);
      all->optimum_ps = dist[dst].cost_ps;
      continue;
    }
    if (u == dst) continue;
    auto& out = ctx.edges_of(static_cast<std::uint32_t>(u));
    grow();  // new states were interned
    const Dist du = dist[u];
    // (memory budget) The cost of the best path to the target found so far: an edge into v whose
    // cost so far plus v's bound already exceeds it cannot be on a plan at most that costly, so it
    // is not costed (nor discovered: no plan this search returns passes through it).
    auto cutoff = [&] { return disc[dst] != kUnseen ? dist[dst].cost_ps : std::numeric_limits<std::int64_t>::max(); };
    // The edges are met in their order: met means discovered (a discovery index for the settle
    // order's last tie-break), then relaxed, or deferred with its floor estimate.
    auto meet = [&](std::uint32_t v, StepKind kind, const DimList& group, std::uint16_t perm) {
      if (u == src && forbidden && forbidden->matches(kind, group, ctx.table.states[v], perm)) return false;
      if (disc[v] == kUnseen) {
        disc[v] = discovered++;
        dist[v] = Dist{std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::max(), 0, disc[v], 0,
                       std::numeric_limits<std::uint64_t>::max()};
      }
      return !settled[v];
    };
    std::int64_t from_max = -1;  // the state's largest local shard, once a floor needs it
    for (std::uint32_t k = 0; k < out.size(); ++k) {
      auto& e = out[k];
      if (probe && e.to == probe->class_id) {  // (settled or not: the source's own state is)
        ctx.cost_edge(static_cast<std::uint32_t>(u), e);
        probe->best_ps = std::min(probe->best_ps, du.cost_ps + quantise(e.cost_us));
      }
      if (settled[e.to]) continue;
      if (!defer) {
        // (an edge a search met once is met by the searches after it on this context)
        if (!e.met && du.cost_ps > cutoff() - bound_ps(ctx.table.bound[e.to])) continue;
        e.met = true;
        ctx.cost_edge(static_cast<std::uint32_t>(u), e);
        if (e.peak_bytes <= budget && meet(e.to, e.kind, e.group, e.perm)) relax(u, e.to, e.kind, e.group, e.perm, e.cost_us, settled_as | k);
        continue;
      }
      if (!meet(e.to, e.kind, e.group, e.perm)) continue;
      if (e.costed) {  // by an earlier search on this context
        relax(u, e.to, e.kind, e.group, e.perm, e.cost_us, settled_as | k);
        continue;
      }
      const double floor = ctx.edge_floor(static_cast<std::uint32_t>(u), e, from_max);
      deferred.push({du.cost_ps + quantise_bound(floor) + bound_ps(ctx.table.bound[e.to]), settled_as | k,
                     static_cast<std::uint32_t>(u), k});
    }
    // direct is the most expensive edge to cost (every rank's transfers): deferred with its
    // floor (one peer, the bytes this state still lacks at p2p bandwidth, the copies), or with a
    // budget skipped when even that floor cannot beat the target's current cost.
    if (with_direct && direct_allowed(ctx, ctx.table.states[u])) {
      const std::int64_t floor = du.cost_ps + quantise_bound(ctx.direct_floor_us(static_cast<std::uint32_t>(u)));
      if (defer) {
        if (meet(dst, StepKind::direct, {}, same)) deferred.push({floor, settled_as | out.size(), static_cast<std::uint32_t>(u), kDirect});
      } else if (floor <= cutoff()) {
        const Step& d = ctx.direct_step(static_cast<std::uint32_t>(u));
        if (d.peak_bytes <= budget && meet(dst, StepKind::direct, {}, same)) relax(u, dst, StepKind::direct, {}, same, d.cost_us, settled_as | out.size());
      }
    }
  }
  if (all && found) {
    all->cost_ps.assign(ctx.table.states.size(), -1);
    for (std::size_t v = 0; v < settled.size(); ++v)
      if (settled[v]) all->cost_ps[v] = dist[v].cost_ps;
  }
  return found;
}

// Smallest budget that admits any plan: minimise the largest step peak along the path.
std::int64_t smallest_feasible_budget(const GraphContext& ctx) {
  const std::int64_t max_states = ctx.table.max_states;
  std::unordered_map<Sharding, std::int64_t> best{{ctx.src, 0}};
  using Item = std::pair<std::int64_t, std::size_t>;
  std::vector<Sharding> states{ctx.src};
  std::priority_queue<Item, std::vector<Item>, std::greater<>> pq;
  pq.push({0, 0});
  std::vector<Edge> edges;
  while (!pq.empty()) {
    auto [b, u] = pq.top();
    pq.pop();
    const Sharding cur = states[u];
    if (best[cur] < b) continue;
    if (cur == ctx.dst) return b;
    enumerate_edges(ctx, cur, edges);
    for (auto& [to, kind, group, step] : edges) {
      const auto nb = std::max(b, step.peak_bytes);
      auto it = best.find(to);
      if (it != best.end() && it->second <= nb) continue;
      best[to] = nb;
      if (static_cast<std::int64_t>(states.size()) >= max_states)
        throw InputError(fmt::format("no plan within the memory budget was found in {} states (PlanOptions::max_states)",
                                max_states));
      states.push_back(to);
      pq.push({nb, states.size() - 1});
    }
  }
  return -1;
}

}  // namespace dtensor

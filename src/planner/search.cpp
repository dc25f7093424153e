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
#include "dtensor/explore.hpp"
#include "dtensor/planner.hpp"
#include "graph.hpp"

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

std::int64_t quantise(double us) { return std::llround(us * 1e6); }
// Bounds round down, with a margin for the rounding of each edge's quantised cost.
std::int64_t quantise_bound(double us) { return std::max<std::int64_t>(0, static_cast<std::int64_t>(us * 1e6) - 64); }
// A state's bound in the search's picoseconds: exact where the bound says so.
std::int64_t bound_ps(const SearchBound& b) { return b.exact_ps >= 0 ? b.exact_ps : quantise_bound(b.us); }

struct Found {
  std::vector<Step> steps;
  double total_cost_us = 0;
  std::int64_t cost_ps = 0;  // the search's own (quantised) cost of the path
};

// Where the source is not fixed by the interchangeable dims' relabelings, its canonical state
// stands for the source and for its relabelings alike: a path that reaches it may be a real path
// to a relabeling of the source or one back to the source itself (which the runner-up must not
// take). The runner-up search records its edges into that state (`class_id`): the least cost so
// far plus step over them, in the search's picoseconds (plan_on decides from it).
struct SourceClassProbe {
  std::uint32_t class_id = 0;
  std::int64_t best_ps = std::numeric_limits<std::int64_t>::max();
};

// (the plan search, when a runner-up is asked for) A path into the target as cheap as the plan,
// with as many steps, whose first step is another: a runner-up (no path with another first step
// costs less, nor as much in fewer steps), found without a second search.
struct TiedRunnerUp {
  std::optional<Found> found;
};

// optimal_plans with a slack: at most this many states settled beyond the optimum's estimate,
// and at most this many arcs tried while listing the paths (counts: every rank stops alike).
constexpr std::size_t kMaxSlackStates = 4096;
constexpr std::size_t kMaxPathVisits = 1 << 16;

// What a search leaves behind for optimal_plans: every state settled with its exact cost so far
// (picoseconds), once the loop has settled every state whose estimate is at most the optimum.
//
// With `slack_ps`, every state whose estimate is at most the optimum + slack, as long as at most
// `max_extra` states beyond the optimum's are settled (a count, so every rank stops alike);
// past it `complete` is false and the states up to the optimum are still all settled.
struct Settled {
  std::vector<std::int64_t> cost_ps;  // per state id; -1: not settled
  std::int64_t optimum_ps = -1;
  std::int64_t slack_ps = 0;
  std::size_t max_extra = std::numeric_limits<std::size_t>::max();
  bool complete = true;
  [[nodiscard]] std::int64_t limit_ps() const { return complete ? optimum_ps + slack_ps : optimum_ps; }
};

struct FirstEdge {
  StepKind kind;
  DimList mesh_dims;
  Sharding to;
  // the relabeling that made `to` canonical (StateTable::perms): two steps out of the source can
  // differ only in it (one kind over one group, along two interchangeable tensor dims)
  std::uint16_t perm = 0;
  bool matches(StepKind k, const DimList& dims, const Sharding& t, std::uint16_t p) const {
    return k == kind && dims == mesh_dims && p == perm && t == to;
  }
};


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

// Cheapest path under `budget` (< 0: unbounded), optionally never starting with `forbidden`.
// States are the context's interned ids (shared with the other search of the same query, with
// their bounds and edge lists); ties still break by this search's own discovery order.
//
// With `all` set, the search goes on after settling the target until every state whose estimate
// (cost so far + bound) is at most the optimum is settled, and reports their costs there: every
// state of every optimal path is among them (the bound is admissible).
std::optional<Found> search(const GraphContext& ctx, std::int64_t budget, const FirstEdge* forbidden,
                            Settled* all = nullptr, SourceClassProbe* probe = nullptr, TiedRunnerUp* tie = nullptr) {
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

}  // namespace

RedistributionGraph::RedistributionGraph(const Layout& src, const Layout& dst, const CostModel& cost, EdgeSet edges)
    : cost_(std::make_unique<const CostModel>(cost)), ctx_(new GraphContext(src, dst, *cost_, edges)) {}
RedistributionGraph::~RedistributionGraph() { delete ctx_; }
std::vector<GraphEdge> RedistributionGraph::edges(const Sharding& from, bool records) const {
  std::vector<Edge> raw;
  enumerate_edges(*ctx_, from, raw, records);
  std::vector<GraphEdge> out;
  for (auto& e : raw) {
    if (!records) {  // the light records still name their dims
      if (e.kind == StepKind::direct) {
        e.step = make_step(*ctx_, e.kind, {}, from, e.to, true);
      } else {
        e.step.mesh_dims = e.group.vec();
        for (int d = 0; d < from.tensor_ndim(); ++d)
          if (from.entries(d) != e.to.entries(d)) e.step.tensor_dims.push_back(d);
      }
    }
    out.push_back({std::move(e.to), std::move(e.step)});
  }
  return out;
}
const Sharding& RedistributionGraph::source() const { return ctx_->src; }
const Sharding& RedistributionGraph::target() const { return ctx_->dst; }

void GraphContext::charge(std::int64_t bytes) const {
  table.search_bytes += bytes;
  if (table.search_bytes > table.max_search_bytes)
    throw InputError(fmt::format("planning {} -> {} needs more than {} bytes of search state (PlanOptions::max_search_bytes, "
                                 "CLI --max-search-memory); the mesh and tensor have too many intermediate layouts to "
                                 "search within it", src.str(), dst.str(), table.max_search_bytes));
}

StateKey GraphContext::key_of(const Sharding& s) const {
  StateKey k;
  for (int m = 0; m < s.mesh_ndim(); ++m)
    if (const auto op = s.partial(m)) k.set(m, static_cast<std::uint16_t>(0x4000 | static_cast<unsigned>(*op)));
  for (int d = 0; d < s.tensor_ndim(); ++d) {
    const auto es = s.entries(d);
    for (std::size_t i = 0; i < es.size(); ++i) {
      const auto kind = std::find(shard_kinds.begin(), shard_kinds.end(), std::pair{es[i].split_factor, es[i].strided});
      if (kind == shard_kinds.end())  // (no edge makes one: only a caller's own layout can have it)
        throw std::logic_error("GraphContext::key_of: " + s.str() + " has a shard kind that neither the source nor the target has");
      k.set(es[i].mesh_dim, static_cast<std::uint16_t>(0x8000 | d << 9 | static_cast<int>(i) << 6 |
                                                       static_cast<int>(kind - shard_kinds.begin())));
    }
  }
  return k;
}

StateKey GraphContext::key_after(const StateKey& k, const Sharding& from, const Move& mv, const DimList& group) const noexcept {
  StateKey r = k;
  switch (mv.op) {
    case Move::Op::target: return dst_key_;
    case Move::Op::append: {
      // after the entries of dim d, less the one the mesh dim leaves there (all_to_all within a
      // dim: the last, so no other entry moves)
      const int m = mv.entry.mesh_dim;
      const std::uint16_t was = k.role(m);
      const bool on_d = (was & 0x8000) != 0 && (was >> 9 & 0xf) == mv.d;
      const int at = static_cast<int>(from.entries(mv.d).size()) - (on_d ? 1 : 0);
      r.set(m, static_cast<std::uint16_t>(0x8000 | mv.d << 9 | at << 6 | mv.kind));
      return r;
    }
    case Move::Op::partial: r.set(mv.m, static_cast<std::uint16_t>(0x4000 | static_cast<unsigned>(mv.rop))); return r;
    case Move::Op::replicate: r.set(mv.m, 0); return r;
    case Move::Op::replicated:
      for (int m = 0; m < from.mesh_ndim(); ++m)
        if ((mv.mask >> m) & 1u) r.set(m, 0);
      return r;
    case Move::Op::scatter: {
      int at = static_cast<int>(from.entries(mv.d).size());
      for (int m : group.span()) r.set(m, static_cast<std::uint16_t>(0x8000 | mv.d << 9 | at++ << 6));  // (plain: kind 0)
      return r;
    }
  }
  return r;
}

StateKey GraphContext::relabeled_key(const StateKey& k, const DimPerm& p) const noexcept {
  StateKey r;
  for (int m = 0; m < mesh.ndim(); ++m) r.set(p[static_cast<std::size_t>(m)], k.role(m));
  return r;
}

std::uint32_t GraphContext::add_state(const Sharding& s, const StateKey& key, std::uint64_t h, std::size_t slot) const {
  auto& T = table;
  if (static_cast<std::int64_t>(T.states.size()) >= T.max_states) {
    throw InputError(fmt::format("planning {} -> {} explored more than {} states (PlanOptions::max_states, CLI --max-states); the "
                                 "mesh and tensor have too many intermediate layouts to search exhaustively",
                                 src.str(), dst.str(), T.max_states));
  }
  charge(static_cast<std::int64_t>(2 * sizeof(Sharding) + sizeof(SearchBound) + 160));
  const auto id = static_cast<std::uint32_t>(T.states.size());
  T.bound.push_back(bounds.lower_bound(s));
  T.states.push_back(s);
  T.keys.push_back(key);
  T.edge_list.emplace_back();
  T.edges_done.push_back(0);
  T.direct_at.push_back(-1);
  T.direct_floor.push_back(-1);
  T.state_ids.insert(id, h, slot);
  return id;
}

template <typename Make>
std::uint32_t GraphContext::intern_key(const StateKey& k, Make&& make) const {
  const std::uint64_t h = k.hash();
  std::size_t slot = 0;
  if (const std::int64_t id = table.state_ids.find(k, h, table.keys, slot); id >= 0) return static_cast<std::uint32_t>(id);
  return add_state(make(), k, h, slot);
}

std::uint32_t GraphContext::intern(const Sharding& s) const {
  return intern_key(key_of(s), [&]() -> const Sharding& { return s; });
}

void GraphContext::use_symmetry() {
  sym_classes.clear();
  tensor_sym_classes.clear();
  sym_mask_ = 0;
  sym_flat_n_ = 0;
  src_moves = false;
  for (int m = 0; m < Sharding::kMaxMeshDims; ++m) mesh_rep_[static_cast<std::size_t>(m)] = static_cast<std::int8_t>(m);
  if (edges != EdgeSet::all) return;
  const int md = mesh.ndim();
  std::array<int, Sharding::kMaxMeshDims> root{};
  for (int m = 0; m < md; ++m) root[static_cast<std::size_t>(m)] = m;
  auto find = [&](int m) {
    while (root[static_cast<std::size_t>(m)] != m) m = root[static_cast<std::size_t>(m)];
    return m;
  };
  for (int i = 0; i < md; ++i)
    for (int j = i + 1; j < md; ++j) {
      if (mesh.size(i) < 2 || mesh.size(i) != mesh.size(j) ||
          cost.is_inter_host(mesh.shape(), i) != cost.is_inter_host(mesh.shape(), j))
        continue;
      DimPerm swap = identity_perm();
      swap[static_cast<std::size_t>(i)] = static_cast<std::int8_t>(j);
      swap[static_cast<std::size_t>(j)] = static_cast<std::int8_t>(i);
      const std::span<const std::int8_t> sw(swap.data(), static_cast<std::size_t>(md));
      if (dst.with_mesh_dims_relabeled(sw) != dst) continue;
      if (!bounds.sample_invariant(i, j)) continue;
      root[static_cast<std::size_t>(find(j))] = find(i);  // transpositions that join generate every permutation of the class
      // The source may change: it is interned as it is, and only the states after it
      // canonically. Some relabeling moves it exactly when one of these transpositions does
      // (they generate them all, and ones that fix it compose into ones that fix it).
      src_moves = src_moves || src.with_mesh_dims_relabeled(sw) != src;
    }
  for (int m = 0; m < md; ++m) {
    const int r = find(m);
    if (r == m) continue;
    auto it = std::find_if(sym_classes.begin(), sym_classes.end(), [&](const auto& c) { return c.front() == r; });
    if (it == sym_classes.end()) sym_classes.push_back({r, m});
    else it->push_back(m);
  }
  for (auto& c : sym_classes) std::sort(c.begin(), c.end());
  for (const auto& c : sym_classes)
    for (int m : c) {
      sym_mask_ |= 1u << m;
      sym_flat_[sym_flat_n_++] = static_cast<std::int8_t>(m);
      mesh_rep_[static_cast<std::size_t>(m)] = static_cast<std::int8_t>(c.front());
    }
  // Interchangeable tensor dims: no entry in the source or the target (both stay as they are
  // when the dims are exchanged), some earlier tensor dim longer than the mesh has ranks, and
  // either one length or lengths that every product of mesh dims divides (no strided entry at
  // either end, so no step makes one). Every layout splits that earlier dim into at most as many
  // parts as there are ranks, so some rank holds two or more of its indices: a gather or
  // reduce_scatter along any later dim is never contiguous (step_buffers), whichever of the
  // exchanged dims it runs along. Everything else a step costs (bytes, peers, copies, peaks) and
  // every bound reads the dims' lengths and entries only: with one length the exchanged layout
  // reads the same values; with divisible lengths every split of either dim is even, each rank's
  // range along a dim is its length times a fraction that the entries alone fix, and what is
  // counted is a product over tensor dims of such ranges' sizes and overlaps, the same with the
  // lengths exchanged.
  const int nd = static_cast<int>(shape.size());
  int first = 0;  // the first tensor dim after one longer than the mesh has ranks
  while (first < nd && shape[static_cast<std::size_t>(first)] <= mesh.num_ranks()) ++first;
  ++first;
  auto free_dim = [&](int i) { return src.entries(i).empty() && dst.entries(i).empty(); };
  auto plain = [](const Sharding& s) {
    for (int d = 0; d < s.tensor_ndim(); ++d)
      for (const auto& e : s.entries(d))
        if (e.strided || e.split_factor != 1) return false;
    return true;
  };
  const bool even_splits = plain(src) && plain(dst);
  // the dims' class key: their length, or -1 for every length that the mesh's rank count divides
  auto length_key = [&](int i) -> std::int64_t {
    const std::int64_t n = shape[static_cast<std::size_t>(i)];
    return even_splits && n > 0 && n % mesh.num_ranks() == 0 ? -1 : n;
  };
  std::uint32_t placed = 0;  // (no allocation unless some class has two dims: most queries have none)
  for (int i = first; i < nd; ++i) {
    if ((placed >> i) & 1u || !free_dim(i)) continue;
    for (int j = i + 1; j < nd; ++j) {
      if ((placed >> j) & 1u || !free_dim(j) || length_key(j) != length_key(i)) continue;
      if (!((placed >> i) & 1u)) {
        tensor_sym_classes.push_back({i});
        placed |= 1u << i;
      }
      tensor_sym_classes.back().push_back(j);
      placed |= 1u << j;
    }
  }
  // Edges record their relabeling as a 16-bit index (SearchEdge::perm), so the relabelings that
  // can occur, the classes' permutations together, stay below 65,536: the mesh classes' (at most
  // 8! = 40,320) first, then each tensor class, cut to the dims that still fit (none when not two).
  std::uint64_t order = 1;
  for (const auto& c : sym_classes)
    for (std::uint64_t k = 2; k <= c.size(); ++k) order *= k;
  for (auto& c : tensor_sym_classes) {
    std::size_t keep = 0;
    while (keep < c.size() && order * (keep + 1) < 65536) order *= ++keep;
    c.resize(keep < 2 ? 0 : keep);
  }
  std::erase_if(tensor_sym_classes, [](const auto& c) { return c.empty(); });
  // the relabeling table, with the identity as 0, only for a query that merges
  if (merges() && table.perms.empty()) (void)relabeling_id(Relabeling{});
}

namespace {
// The identity tensor permutation as relabeling_id's key reads it (two words of its bytes).
const std::array<std::uint64_t, 2> kTensorIdentityWords = [] {
  std::array<std::uint64_t, 2> w{};
  std::memcpy(w.data(), Relabeling::kTensorIdentity.data(), sizeof w);
  return w;
}();
}  // namespace

std::uint16_t GraphContext::relabeling_id(const Relabeling& p) const {
  static_assert(sizeof(DimPerm) == 8 && sizeof(TensorPerm) == 16);
  StateTable::RelabelingKey key{};
  std::memcpy(&key.words[0], p.mesh.data(), 8);
  std::memcpy(&key.words[1], p.tensor.data(), 16);
  // (relabelings of mesh dims alone by their mesh word: one word to hash and compare)
  std::uint16_t id = static_cast<std::uint16_t>(table.perms.size());
  bool fresh = false;
  if (key.words[1] == kTensorIdentityWords[0] && key.words[2] == kTensorIdentityWords[1]) {
    const auto r = table.mesh_perm_ids.try_emplace(key.words[0], id);
    id = r.first->second;
    fresh = r.second;
  } else {
    const auto r = table.perm_ids.try_emplace(key, id);
    id = r.first->second;
    fresh = r.second;
  }
  if (fresh) {
    charge(static_cast<std::int64_t>(sizeof(Relabeling) + 48));
    table.perms.push_back(p);
  }
  return id;
}

namespace {
// The stable order of a class's dims by `less` (equal ones keep their class order), written into
// the relabeling `p` (p[dim] = the class slot the dim goes to); false, and `p` left as it is,
// when the class is in order already (most are). An insertion sort: a class has at most 16 dims.
template <typename Perm, typename Less>
[[gnu::always_inline]] inline bool order_class(const std::vector<int>& cls, Less&& less, Perm& p) {
  const std::size_t n = cls.size();
  std::size_t k = 1;
  while (k < n && !less(cls[k], cls[k - 1])) ++k;
  if (k == n) return false;
  std::array<int, Sharding::kMaxTensorDims> order{};
  for (k = 0; k < n; ++k) {
    const int x = cls[k];
    std::size_t j = k;
    for (; j > 0 && less(x, order[j - 1]); --j) order[j] = order[j - 1];
    order[j] = x;
  }
  for (k = 0; k < n; ++k) p[static_cast<std::size_t>(order[k])] = static_cast<std::int8_t>(cls[k]);
  return true;
}
}  // namespace

bool GraphContext::canonical_perm(const Sharding& s, Relabeling& r) const {
  r = Relabeling{};
  if (tensor_sym_classes.empty()) return canonical_mesh_perm(s, r.mesh);
  // Interchangeable tensor dims first: ordered by their entries, each read as (its mesh dim's
  // class, or the mesh dim where it has none; strided; split factor), in shard order, a prefix
  // first. No mesh relabeling changes that order, so the mesh dims' roles are then read on the
  // permuted layout. Dims whose entries read the same keep their order (those two layouts may
  // then be interned apart: fewer merges, never a wrong one).
  auto less = [&](int a, int b) {
    const auto ea = s.entries(a), eb = s.entries(b);
    for (std::size_t k = 0; k < ea.size() && k < eb.size(); ++k) {
      const auto& x = ea[k];
      const auto& y = eb[k];
      const int rx = mesh_rep_[static_cast<std::size_t>(x.mesh_dim)], ry = mesh_rep_[static_cast<std::size_t>(y.mesh_dim)];
      if (rx != ry) return rx < ry;
      if (x.strided != y.strided) return y.strided;
      if (x.split_factor != y.split_factor) return x.split_factor < y.split_factor;
    }
    return ea.size() < eb.size();
  };
  bool moved = false;
  for (const auto& cls : tensor_sym_classes) moved = order_class(cls, less, r.tensor) || moved;
  if (!moved) return canonical_mesh_perm(s, r.mesh);
  (void)canonical_mesh_perm(s.with_tensor_dims_permuted(std::span<const std::int8_t>(r.tensor.data(), static_cast<std::size_t>(s.tensor_ndim()))),
                            r.mesh);
  return true;
}

bool GraphContext::canonical_mesh_perm(const Sharding& s, DimPerm& p) const {
  if (sym_classes.empty()) return false;
  // A mesh dim's role in `s`: Replicate, Partial(op), or the entry it is (tensor dim, position
  // in the shard order, strided, split factor). Relabelings within a class permute the roles
  // among its dims; the canonical one gives them to the class's dims in ascending role order.
  // Dims of equal roles (Replicate, one Partial op) give the same layout in either order. A role
  // compares as (kind, op or tensor dim, position, strided) packed in one word, then the split
  // factor (only the class dims' roles are filled in).
  struct Role {
    std::uint64_t key;
    std::int64_t sf;
    bool operator<(const Role& o) const { return key != o.key ? key < o.key : sf < o.sf; }
  };
  std::array<Role, Sharding::kMaxMeshDims> role;  // NOLINT: the class dims' entries are set here (no memset)
  for (std::size_t k = 0; k < sym_flat_n_; ++k) {
    const int m = sym_flat_[k];
    const auto op = s.partial(m);
    role[static_cast<std::size_t>(m)] = {op ? (std::uint64_t{1} << 48) | static_cast<std::uint64_t>(*op) << 32 : 0, 0};
  }
  for (int d = 0; d < s.tensor_ndim(); ++d) {  // the sharded ones: one pass over the entries
    const auto es = s.entries(d);
    for (std::size_t k = 0; k < es.size(); ++k)
      if ((sym_mask_ >> es[k].mesh_dim) & 1u)
        role[static_cast<std::size_t>(es[k].mesh_dim)] = {(std::uint64_t{2} << 48) | static_cast<std::uint64_t>(d) << 32 |
                                                              static_cast<std::uint64_t>(k) << 1 | (es[k].strided ? 1u : 0u),
                                                          es[k].split_factor};
  }
  // the class's dims by role, equal roles in class order
  auto less = [&](int a, int b) { return role[static_cast<std::size_t>(a)] < role[static_cast<std::size_t>(b)]; };
  bool moved = false;
  for (const auto& cls : sym_classes) moved = order_class(cls, less, p) || moved;
  return moved;
}

bool GraphContext::canonical_key_perm(const StateKey& k, DimPerm& p) const {
  // canonical_mesh_perm's order on the key's roles (which compare as its roles do)
  auto less = [&](int a, int b) { return k.role(a) < k.role(b); };
  bool moved = false;
  for (const auto& cls : sym_classes) moved = order_class(cls, less, p) || moved;
  return moved;
}

bool GraphContext::canonical_key(const StateKey& k, Relabeling& r, StateKey& c) const {
  r = Relabeling{};
  StateKey t = k;
  bool moved = false;
  if (!tensor_sym_classes.empty()) {
    // canonical_perm's order of interchangeable tensor dims, read on the key: per dim its
    // entries' (mesh dim's class, shard kind) by position
    std::array<std::array<std::uint16_t, Sharding::kMaxMeshDims>, Sharding::kMaxTensorDims> seq;  // NOLINT: read below len only
    std::array<std::uint8_t, Sharding::kMaxTensorDims> len{};
    for (int m = 0; m < mesh.ndim(); ++m) {
      const std::uint16_t role = k.role(m);
      if (!(role & 0x8000)) continue;
      const int d = role >> 9 & 0xf, pos = role >> 6 & 7;
      seq[static_cast<std::size_t>(d)][static_cast<std::size_t>(pos)] =
          static_cast<std::uint16_t>(mesh_rep_[static_cast<std::size_t>(m)] << 6 | (role & 0x3f));
      len[static_cast<std::size_t>(d)] = std::max<std::uint8_t>(len[static_cast<std::size_t>(d)], static_cast<std::uint8_t>(pos + 1));
    }
    auto less = [&](int a, int b) {
      const auto& sa = seq[static_cast<std::size_t>(a)];
      const auto& sb = seq[static_cast<std::size_t>(b)];
      const std::size_t la = len[static_cast<std::size_t>(a)], lb = len[static_cast<std::size_t>(b)];
      for (std::size_t i = 0; i < la && i < lb; ++i)
        if (sa[i] != sb[i]) return sa[i] < sb[i];
      return la < lb;
    };
    for (const auto& cls : tensor_sym_classes) moved = order_class(cls, less, r.tensor) || moved;
    if (moved)
      for (int m = 0; m < mesh.ndim(); ++m) {
        const std::uint16_t role = k.role(m);
        if (!(role & 0x8000)) continue;
        const int d = r.tensor[static_cast<std::size_t>(role >> 9 & 0xf)];
        t.set(m, static_cast<std::uint16_t>((role & ~(0xf << 9)) | d << 9));
      }
  }
  const bool mesh_moved = canonical_key_perm(t, r.mesh);
  c = mesh_moved ? relabeled_key(t, r.mesh) : t;
  return moved || mesh_moved;
}

Sharding GraphContext::canonical(const Sharding& s, Relabeling& p) const { return canonical_perm(s, p) ? relabel(s, p) : s; }

std::vector<SearchEdge>& GraphContext::edges_of(std::uint32_t id) const {
  auto& T = table;
  if (!T.edges_done[id]) {
    // collected in a reused scratch list, then copied once at its final size (no regrowth)
    thread_local std::vector<SearchEdge> scratch;
    scratch.clear();
    const Sharding from = T.states[id];  // interning may grow `states`
    // On the states' keys: a move changes the roles of the mesh dims it touches, and the next
    // layout is made only when its key is new. Every state met is canonical but the source may
    // not be. Without interchangeable tensor dims, from a canonical state a step over no mesh dim
    // of a class leaves the class dims' roles in their order (it changes their entries' positions
    // only by removing the last entries of a tensor dim or appending after them; a relabel or
    // direct step makes the target, which every relabeling fixes): its layout is canonical as it
    // is, without asking. With interchangeable tensor dims a step over any mesh dim may change
    // their entries, and so their order: every next layout is made canonical.
    const StateKey k0 = T.keys[id];
    DimPerm p0 = identity_perm();
    const bool untouched_canonical = tensor_sym_classes.empty() && (!merges() || !canonical_key_perm(k0, p0));
    enumerate_moves(*this, from, [&](StepKind kind, const DimList& group, const Move& mv) {
      const StateKey k = key_after(k0, from, mv, group);
      if (k == k0 || !move_keeps_ops_mixable(from, mv)) return;
      std::uint32_t touched = 0;  // (the group: every mesh dim whose role the move changes)
      for (int m : group.span()) touched |= 1u << m;
      Relabeling p;
      StateKey c;
      if ((untouched_canonical && (touched & sym_mask_) == 0) || !canonical_key(k, p, c)) {
        scratch.push_back({intern_key(k, [&] { return mv.apply(from, dst, group); }), kind, group});
        return;
      }
      scratch.push_back({intern_key(c, [&] { return relabel(mv.apply(from, dst, group), p); }), kind, group, relabeling_id(p)});
    });
    charge(static_cast<std::int64_t>(scratch.size() * sizeof(SearchEdge) + 64));
    T.edge_list[id].assign(scratch.begin(), scratch.end());
    T.edges_done[id] = 1;
  }
  return T.edge_list[id];
}

namespace {
void keep_cost(SearchEdge& e, const Step& st) {
  e.cost_us = st.cost_us;
  e.peak_bytes = st.peak_bytes;
  e.costed = true;
}
}  // namespace

void GraphContext::cost_edge(std::uint32_t from, SearchEdge& e) const {
  if (e.costed) return;
  if (e.perm == 0) return keep_cost(e, make_step(*this, e.kind, e.group.span(), table.states[from], table.states[e.to], false));
  // the step reaches the layout the edge made, which its canonical state relabels (perm)
  const int tensor_moves = tensor_sym_classes.empty() ? 0 : static_cast<int>(shape.size());
  const Sharding made = relabel(table.states[e.to], table.perms[e.perm].inverse(mesh.ndim(), tensor_moves));
  keep_cost(e, make_step(*this, e.kind, e.group.span(), table.states[from], made, false));
}

double GraphContext::edge_floor(std::uint32_t from, SearchEdge& e, std::int64_t& from_max) const {
  if (e.floor_us < 0) {
    if (from_max < 0) from_max = geo.numel_stats(table.states[from]).max;
    e.floor_us = bounds.edge_floor_us(e.kind, e.group.span(), table.states[from], from_max);
  }
  return e.floor_us;
}

double GraphContext::direct_floor_us(std::uint32_t u) const {
  // (once per state: the runner-up search meets the plan search's states again)
  double& kept = table.direct_floor[u];
  if (kept < 0) kept = compute_direct_floor_us(u);
  return kept;
}

// A floor of the direct step's cost from state `u`. The step costs its latency (one peer at
// least) and wire time: the busiest rank's bytes, at least what the state lacks (`missing`), at
// its link's p2p bandwidth or on a fitted send/recv curve (Bounds::direct_comm_floor_us; under
// PyTorch's formula only the latency). And (ring formulas) it copies: it packs what its busiest
// rank sends, unpacks what it receives (Bounds' `traffic`: at least `missing`) and writes the
// target's largest shard. And it costs at least the state's bound, whose terms price received
// bytes at the fastest receive rate, which for a direct step includes unpacking them: so also
// at least the bound without its last-step term (which charges the target's copy) plus the
// copies other than unpacking what the busiest rank lacks.
double GraphContext::compute_direct_floor_us(std::uint32_t u) const {
  const GraphContext& ctx = *this;
  const LinkParams& L = ctx.bounds.optimistic().intra;  // bound_link's constants, computed once per query
  const LinkParams& X = ctx.bounds.optimistic().inter;
  const auto& bu = ctx.table.bound[u];
  // with nothing missing a direct step is local copies only (no peers, no latency)
  // (a step whose transfers cross a host boundary is priced on the inter-host link)
  const double bytes = static_cast<double>(bu.missing * ctx.geo.itemsize());
  if (ctx.cost.formula == CostModel::Formula::pytorch)  // (latency only, as this floor always took there)
    return bu.missing == 0 ? 0.0 : std::min(L.alpha_us, X.alpha_us) + std::min(L.alpha_per_peer_us, X.alpha_per_peer_us);
  const double comm = bu.missing == 0 ? 0.0 : ctx.bounds.direct_comm_floor_us(bytes, bu.enters_host);
  const double copies = ctx.bounds.direct_copy_floor_us(std::max(bu.missing, bu.traffic));
  const double unpack = ctx.bounds.direct_copy_floor_us(bu.missing) - ctx.bounds.direct_copy_floor_us(0);
  const double before_last = bu.before_last_us >= 0 ? bu.before_last_us : bu.us;
  return std::max({comm + copies, before_last + copies - unpack, bu.us});
}

const Step& GraphContext::direct_step(std::uint32_t id) const {
  auto& T = table;
  if (T.direct_at[id] < 0) {
    charge(static_cast<std::int64_t>(sizeof(Step) + sizeof(DimList) + 64));
    T.direct_at[id] = static_cast<std::int32_t>(T.direct_steps.size());
    DimList crossed;
    T.direct_steps.push_back(make_step(*this, StepKind::direct, {}, T.states[id], dst, false, &crossed));
    T.direct_dims.push_back(crossed);
  }
  return T.direct_steps[static_cast<std::size_t>(T.direct_at[id])];
}

namespace {

// The options' bounds on the context; returns the memory budget (< 0: none).
std::int64_t apply_options(GraphContext& ctx, const PlanOptions& options) {
  if (options.max_search_bytes <= 0)
    throw InputError(fmt::format("max search bytes {} must be positive", options.max_search_bytes));
  ctx.table.max_search_bytes = options.max_search_bytes;
  ctx.table.max_states = options.max_states;
  if (options.max_peak_bytes && *options.max_peak_bytes < 0)
    throw InputError(fmt::format("max peak bytes {} must not be negative", *options.max_peak_bytes));
  return options.max_peak_bytes.value_or(-1);
}

[[noreturn]] void refuse(const GraphContext& ctx, std::int64_t budget, const Layout& src, const Layout& dst, EdgeSet edges) {
  const auto need = smallest_feasible_budget(ctx);
  if (budget >= 0 && need >= 0)
    throw InputError(fmt::format("no plan from {} to {} fits in {} peak bytes; the smallest budget that admits a plan "
                                 "is {} bytes", src.placements_str(), dst.placements_str(), budget, need));
  throw InputError(fmt::format("no plan from {} to {} with edge set {}", src.placements_str(), dst.placements_str(), to_string(edges)));
}

Plan plan_of(const Layout& src, const Layout& dst, const CostModel& cost, EdgeSet edges, Found found) {
  Plan plan;
  plan.src = src;
  plan.dst = dst;
  plan.cost_model = cost.name;
  plan.edges = edges;
  plan.steps = std::move(found.steps);
  plan.total_cost_us = found.total_cost_us;
  for (const auto& s : plan.steps) plan.peak_bytes = std::max(plan.peak_bytes, s.peak_bytes);
  lower_buffers(plan);
  return plan;
}

// The optimal plan on `ctx` and, when asked, its runner-up (the same search with the chosen first
// step forbidden): what plan_redistribution returns.
Plan plan_on(const GraphContext& ctx, std::int64_t budget, const Layout& src, const Layout& dst, const CostModel& cost,
             EdgeSet edges, const PlanOptions& options) {
  TiedRunnerUp tie;
  auto best = search(ctx, budget, nullptr, nullptr, nullptr, options.runner_up ? &tie : nullptr);
  if (!best) refuse(ctx, budget, src, dst, edges);
  const std::int64_t best_ps = best->cost_ps;
  Plan plan = plan_of(src, dst, cost, edges, std::move(*best));
  if (options.runner_up && !plan.steps.empty() && tie.found) {  // a path as cheap with another first step
    RunnerUp r;
    r.total_cost_us = tie.found->total_cost_us;
    r.trace = trace_of(plan.src.sharding(), tie.found->steps);
    r.steps = std::move(tie.found->steps);
    plan.runner_up = std::move(r);
  } else if (options.runner_up && !plan.steps.empty()) {
    // the group the search generated the first edge with (a direct step's is empty: its
    // record lists the mesh dims its transfers cross)
    const Step& s0 = plan.steps[0];
    // (the search meets its first edges' layouts as canonical states)
    Relabeling p;
    const DimList first_group = s0.kind == StepKind::direct ? DimList{} : DimList(s0.mesh_dims);
    Sharding first_to = ctx.canonical(s0.to, p);
    const FirstEdge first{s0.kind, first_group, std::move(first_to), ctx.merges() ? ctx.relabeling_id(p) : std::uint16_t{0}};
    SourceClassProbe probe;
    if (ctx.src_moves) probe.class_id = ctx.intern(ctx.canonical(ctx.src, p));
    auto ru = search(ctx, budget, &first, nullptr, ctx.src_moves ? &probe : nullptr);
    // Every relabeling of the source costs best->cost_ps to the target (its plan is the plan
    // relabeled), so a path through the source's canonical state costs at least what reaching
    // it costs plus that. When such a path could be the runner-up, it could be a real path to a
    // relabeling of the source (which the merged search cannot tell from a path back to the
    // source): the runner-up is then searched over every layout, as without merging.
    if (ctx.src_moves && probe.best_ps != std::numeric_limits<std::int64_t>::max() &&
        probe.best_ps + best_ps <= (ru ? ru->cost_ps : std::numeric_limits<std::int64_t>::max())) {
      GraphContext raw(src, dst, cost, edges);
      (void)apply_options(raw, options);
      const FirstEdge raw_first{s0.kind, first_group, s0.to};
      ru = search(raw, budget, &raw_first);
    }
    if (ru) {
      RunnerUp r;
      r.total_cost_us = ru->total_cost_us;
      r.trace = trace_of(plan.src.sharding(), ru->steps);
      r.steps = std::move(ru->steps);
      plan.runner_up = std::move(r);
    }
  }
  return plan;
}

}  // namespace

Plan plan_redistribution(const Layout& src, const Layout& dst, const CostModel& cost, const PlanOptions& options) {
  const EdgeSet edges = edge_set_of(cost, options);
  GraphContext ctx(src, dst, cost, edges);
  const std::int64_t budget = apply_options(ctx, options);
  ctx.use_symmetry();
  return plan_on(ctx, budget, src, dst, cost, edges, options);
}

std::vector<Plan> optimal_plans(const Layout& src, const Layout& dst, const CostModel& cost, const PlanOptions& options,
                                std::size_t max_plans, double slack_us) {
  return near_optimal_plans(src, dst, cost, options, max_plans, slack_us, 0.0);
}

std::vector<Plan> near_optimal_plans(const Layout& src, const Layout& dst, const CostModel& cost, const PlanOptions& options,
                                     std::size_t max_plans, double slack_us, double latency_share) {
  if (max_plans == 0) throw InputError("max_plans must be at least 1");
  if (!std::isfinite(slack_us) || slack_us < 0 || slack_us > 1e9)
    throw InputError(fmt::format("slack {} us must be a time from 0 to 1e9 us", slack_us));
  if (!std::isfinite(latency_share) || latency_share < 0 || latency_share > 1e3)
    throw InputError(fmt::format("latency share {} must be from 0 to 1000", latency_share));
  const EdgeSet edges = edge_set_of(cost, options);
  // The planner's own plan, searched as plan_redistribution does (one state per class of
  // interchangeable mesh dims' relabelings)...
  GraphContext own(src, dst, cost, edges);
  const std::int64_t budget = apply_options(own, options);
  own.use_symmetry();
  std::vector<Plan> out;
  out.push_back(plan_on(own, budget, src, dst, cost, edges, options));
  const std::size_t own_steps = out.front().steps.size();
  if (max_plans == 1 || own_steps == 0) return out;
  // ... and the others over every layout, relabelings included (they are other plans): on the
  // same context (its states, bounds and costed edges reused) when there was nothing to merge
  // (there the same searches first: the slack search's budget below counts the states they met)
  std::optional<GraphContext> every;
  if (own.merges()) {
    every.emplace(src, dst, cost, edges);
    (void)apply_options(*every, options);
    (void)plan_on(*every, budget, src, dst, cost, edges, options);
  }
  const GraphContext& ctx = every ? *every : own;
  // Every state whose estimate is at most the optimum (+ slack), settled with its exact cost (on
  // the same context: the states, bounds and costed edges the first search made are reused).
  Settled all;
  double own_latency = 0;
  for (const auto& st : out.front().steps) own_latency += st.alpha_us;
  all.slack_ps = quantise(slack_us + latency_share * own_latency);
  // beyond the optimum's states, at most as many more as the plan's search met (at least 512, at
  // most 4096): the slack about doubles the search at most. The floor keeps a tight bound (a
  // search that meets few states) from starving the slack search of the states it must settle.
  if (all.slack_ps > 0) all.max_extra = std::min(kMaxSlackStates, std::max<std::size_t>(512, ctx.table.states.size()));
  (void)search(ctx, budget, nullptr, &all);
  const std::int64_t limit = all.limit_ps();

  // The arcs a plan within the limit can take: (u, v) both settled (a state on such a plan has an
  // estimate at most the limit, so it was settled with its exact cost), within the budget, and
  // cost(u) + step within the limit. With no slack these are the tight edges, cost(u) + step ==
  // cost(v): they hold every optimal path.
  struct Arc {
    std::uint32_t to;
    StepKind kind;
    DimList group;
    std::int64_t cost_ps;
  };
  const std::uint32_t s_id = ctx.intern(ctx.src), d_id = ctx.intern(ctx.dst);
  const auto& C = all.cost_ps;
  const std::size_t n = C.size();
  std::vector<std::vector<Arc>> arcs(n);
  for (std::uint32_t u = 0; u < n; ++u) {
    if (C[u] < 0 || u == d_id) continue;
    std::int64_t from_max = -1;
    for (auto& e : ctx.edges_of(u)) {
      if (e.to >= n || C[e.to] < 0) continue;
      // not costed when even its floor and the next state's bound pass the limit
      if (!e.costed && C[u] + quantise_bound(ctx.edge_floor(u, e, from_max)) + bound_ps(ctx.table.bound[e.to]) > limit)
        continue;
      ctx.cost_edge(u, e);
      if (budget >= 0 && e.peak_bytes > budget) continue;
      const std::int64_t c = quantise(e.cost_us);
      if (C[u] + c <= limit && (all.slack_ps > 0 || C[u] + c == C[e.to])) arcs[u].push_back({e.to, e.kind, e.group, c});
    }
    if (edges == EdgeSet::all && direct_allowed(ctx, ctx.table.states[u]) &&
        C[u] + quantise_bound(ctx.direct_floor_us(u)) <= limit) {
      const Step& d = ctx.direct_step(u);
      const std::int64_t c = quantise(d.cost_us);
      if ((budget < 0 || d.peak_bytes <= budget) && C[u] + c <= limit && (all.slack_ps > 0 || C[u] + c == all.optimum_ps))
        arcs[u].push_back({d_id, StepKind::direct, {}, c});
    }
  }
  // From each state: the least cost to the target over these arcs (exact: a plan within the
  // limit uses only them) and the fewest arcs to it (a backward Dijkstra and a backward BFS).
  constexpr std::int64_t kFar = std::numeric_limits<std::int64_t>::max();
  std::vector<std::vector<std::pair<std::uint32_t, std::int64_t>>> back(n);
  for (std::uint32_t u = 0; u < n; ++u)
    for (const auto& a : arcs[u]) back[a.to].emplace_back(u, a.cost_ps);
  std::vector<std::int64_t> rest(n, kFar), hops(n, kFar);
  {
    using Item = std::pair<std::int64_t, std::uint32_t>;
    std::priority_queue<Item, std::vector<Item>, std::greater<>> pq;
    rest[d_id] = 0;
    pq.push({0, d_id});
    while (!pq.empty()) {
      const auto [r, v] = pq.top();
      pq.pop();
      if (r > rest[v]) continue;
      for (const auto& [u, c] : back[v])
        if (r + c < rest[u]) {
          rest[u] = r + c;
          pq.push({rest[u], u});
        }
    }
    std::vector<std::uint32_t> queue{d_id};
    hops[d_id] = 0;
    for (std::size_t q = 0; q < queue.size(); ++q)
      for (const auto& [u, c] : back[queue[q]])
        if (hops[u] == kFar) {
          hops[u] = hops[queue[q]] + 1;
          queue.push_back(u);
        }
  }
  // Every path within the limit of at most the plan's step count that visits no state twice,
  // depth first in the edge order (an arc is taken only when the target stays within reach in cost
  // and steps), at most kMaxPathVisits arcs tried; then the cheapest first (ties: the order
  // found), the planner's own plan skipped.
  struct Candidate {
    std::int64_t cost_ps;
    std::vector<const Arc*> path;
  };
  std::vector<Candidate> found;
  std::vector<const Arc*> path;
  std::vector<char> on_path(n, 0);  // paths visit a state once (a plan never returns to a layout)
  std::size_t visits = 0;
  auto dfs = [&](auto&& self, std::uint32_t u, std::int64_t g, std::int64_t left) -> void {
    if (u == d_id) {
      found.push_back({g, path});
      return;
    }
    on_path[u] = 1;
    for (const auto& a : arcs[u]) {
      if (visits >= kMaxPathVisits || (all.slack_ps == 0 && found.size() > max_plans)) break;
      if (on_path[a.to] || rest[a.to] == kFar || g + a.cost_ps + rest[a.to] > limit || hops[a.to] + 1 > left) continue;
      ++visits;
      path.push_back(&a);
      self(self, a.to, g + a.cost_ps, left - 1);
      path.pop_back();
    }
    on_path[u] = 0;
  };
  if (rest[s_id] != kFar) dfs(dfs, s_id, 0, static_cast<std::int64_t>(own_steps));
  std::stable_sort(found.begin(), found.end(), [](const Candidate& a, const Candidate& b) { return a.cost_ps < b.cost_ps; });
  for (const auto& cand : found) {
    if (out.size() >= max_plans) break;
    Found f;
    std::uint32_t at = s_id;
    for (const Arc* a : cand.path) {
      f.steps.push_back(make_step(ctx, a->kind, a->group.span(), ctx.table.states[at], ctx.table.states[a->to], true));
      f.total_cost_us += f.steps.back().cost_us;
      at = a->to;
    }
    bool same = f.steps.size() == out.front().steps.size();
    for (std::size_t k = 0; same && k < f.steps.size(); ++k) {
      const Step& x = f.steps[k];
      const Step& y = out.front().steps[k];
      same = x.kind == y.kind && x.mesh_dims == y.mesh_dims && x.to == y.to;
    }
    if (!same) out.push_back(plan_of(src, dst, cost, edges, std::move(f)));
  }
  return out;
}

}  // namespace dtensor

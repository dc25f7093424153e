#pragma once
// Independent brute-force oracle for SPEC §2, written from the spec text alone: it materialises
// the global tensor of element ids and splits it literally (torch.chunk on lists, the strided
// chunk-of-chunks rule, composition in shard order). It shares no code with the library.
#include <algorithm>
#include <functional>
#include <cstdint>
#include <string>
#include <vector>

namespace oracle {

using List = std::vector<std::int64_t>;

// torch.chunk(list, n): pieces of ceil(L/n), empty pieces at the end.
inline std::vector<List> chunk(const List& l, std::int64_t n) {
  std::vector<List> out(static_cast<std::size_t>(n));
  const std::int64_t L = static_cast<std::int64_t>(l.size());
  const std::int64_t c = L == 0 ? 0 : (L + n - 1) / n;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = i * c; k < std::min((i + 1) * c, L); ++k) out[static_cast<std::size_t>(i)].push_back(l[static_cast<std::size_t>(k)]);
  return out;
}

inline List strided_pick(const List& l, std::int64_t sf, std::int64_t n, std::int64_t i) {
  List out;
  for (const auto& outer : chunk(l, sf)) {
    const auto pieces = chunk(outer, n);
    const auto& p = pieces[static_cast<std::size_t>(i)];
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

// A placement as PyTorch writes it: kind 'R', 'S' (Shard), 'T' (StridedShard) or a Partial:
// 'P' sum, 'A' avg, 'M' max, 'N' min, 'X' product.
struct Pl {
  char kind;
  int dim = 0;
  std::int64_t sf = 1;
  int pos = -1;  // [k] or -1
};

inline std::string text(const std::vector<Pl>& pls) {
  std::string s;
  for (const auto& p : pls) {
    if (p.kind == 'R') s += "R";
    else if (p.kind == 'P') s += "P";
    else if (p.kind == 'A') s += "P(avg)";
    else if (p.kind == 'M') s += "P(max)";
    else if (p.kind == 'N') s += "P(min)";
    else if (p.kind == 'X') s += "P(product)";
    else if (p.kind == 'S') s += "S(" + std::to_string(p.dim) + ")";
    else s += "_S(" + std::to_string(p.dim) + ", " + std::to_string(p.sf) + ")";
    if (p.pos >= 0) s += "[" + std::to_string(p.pos) + "]";
  }
  return s;
}

// Per tensor dim: the global indices the rank at `coord` holds, in local order.
inline std::vector<List> owned(const std::vector<std::int64_t>& mesh, const std::vector<std::int64_t>& shape,
                               const std::vector<Pl>& pls, const std::vector<std::int64_t>& coord) {
  std::vector<List> out;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    List cur;
    for (std::int64_t k = 0; k < shape[d]; ++k) cur.push_back(k);
    // mesh dims sharding d, in shard order: by [k] when given, else ascending mesh dim
    std::vector<std::pair<int, std::size_t>> order;
    for (std::size_t m = 0; m < pls.size(); ++m)
      if ((pls[m].kind == 'S' || pls[m].kind == 'T') && pls[m].dim == static_cast<int>(d))
        order.push_back({pls[m].pos >= 0 ? pls[m].pos : static_cast<int>(m), m});
    std::sort(order.begin(), order.end());
    for (const auto& [key, m] : order) {
      const auto n = mesh[m];
      const auto i = coord[m];
      if (pls[m].kind == 'S') cur = chunk(cur, n)[static_cast<std::size_t>(i)];
      else cur = strided_pick(cur, pls[m].sf, n, i);
    }
    out.push_back(cur);
  }
  return out;
}

// The rank's local tensor, as the row-major list of global linear element ids, obtained by
// literally indexing the materialised global tensor of ids.
inline List local_ids(const std::vector<std::int64_t>& shape, const std::vector<List>& sets) {
  List global;
  std::int64_t numel = 1;
  for (auto s : shape) numel *= s;
  for (std::int64_t k = 0; k < numel; ++k) global.push_back(k);
  List out;
  if (numel == 0) return out;
  std::vector<std::size_t> idx(shape.size(), 0);
  for (const auto& s : sets)
    if (s.empty()) return out;
  while (true) {
    std::int64_t lin = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) lin = lin * shape[d] + sets[d][idx[d]];
    out.push_back(global[static_cast<std::size_t>(lin)]);
    std::size_t d = shape.size();
    while (d > 0) {
      --d;
      if (++idx[d] < sets[d].size()) break;
      idx[d] = 0;
      if (d == 0) return out;
    }
    if (shape.empty()) return out;
  }
}

// Every shape of `nd` dims with sizes from `sizes`.
template <typename F>
void for_each_shape(int nd, const std::vector<std::int64_t>& sizes, F&& f) {
  std::vector<std::size_t> pick(static_cast<std::size_t>(nd), 0);
  while (true) {
    std::vector<std::int64_t> shape;
    for (auto i : pick) shape.push_back(sizes[i]);
    f(shape);
    std::size_t k = 0;
    for (; k < pick.size(); ++k) {
      if (++pick[k] < sizes.size()) break;
      pick[k] = 0;
    }
    if (k == pick.size()) return;
  }
}

inline bool is_partial(const Pl& p) { return p.kind == 'P' || p.kind == 'A' || p.kind == 'M' || p.kind == 'N' || p.kind == 'X'; }
inline bool is_shard(const Pl& p) { return p.kind == 'S' || p.kind == 'T'; }

// Every layout whose per-mesh-dim placements come from `options`, with every shard order, and
// Partial ops that mix (only sum with avg).
inline std::vector<std::vector<Pl>> layouts(int mesh_ndim, int tensor_ndim, const std::vector<Pl>& options) {
  std::vector<std::vector<Pl>> out;
  std::vector<std::size_t> pick(static_cast<std::size_t>(mesh_ndim), 0);
  while (true) {
    std::vector<Pl> pls;
    for (auto i : pick) pls.push_back(options[i]);
    bool valid = true;
    char op = 0;
    for (const auto& p : pls) {
      if (!is_partial(p)) continue;
      if (p.dim >= tensor_ndim && is_shard(p)) valid = false;
      if (!op) op = p.kind;
      else if (op != p.kind && !((op == 'P' || op == 'A') && (p.kind == 'P' || p.kind == 'A'))) valid = false;
    }
    for (const auto& p : pls)
      if (is_shard(p) && p.dim >= tensor_ndim) valid = false;
    if (valid) {
      std::vector<std::vector<int>> groups(static_cast<std::size_t>(tensor_ndim));
      for (int m = 0; m < mesh_ndim; ++m)
        if (is_shard(pls[static_cast<std::size_t>(m)])) groups[static_cast<std::size_t>(pls[static_cast<std::size_t>(m)].dim)].push_back(m);
      std::function<void(std::size_t)> rec = [&](std::size_t d) {
        if (d == groups.size()) {
          out.push_back(pls);
          return;
        }
        const auto g = groups[d];
        if (g.size() < 2) {
          rec(d + 1);
          return;
        }
        std::vector<int> perm(g.size());
        for (std::size_t k = 0; k < g.size(); ++k) perm[k] = static_cast<int>(k);
        do {
          for (std::size_t k = 0; k < g.size(); ++k) pls[static_cast<std::size_t>(g[k])].pos = perm[k];
          rec(d + 1);
        } while (std::next_permutation(perm.begin(), perm.end()));
        for (int m : g) pls[static_cast<std::size_t>(m)].pos = -1;
      };
      rec(0);
    }
    std::size_t k = 0;
    for (; k < pick.size(); ++k) {
      if (++pick[k] < options.size()) break;
      pick[k] = 0;
    }
    if (k == pick.size()) break;
  }
  return out;
}

}  // namespace oracle

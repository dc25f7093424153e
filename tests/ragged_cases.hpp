#pragma once
// RaggedShard cases for the tests, with the oracle written from the definition alone: a rank's
// piece is its base block's element ids (oracle.hpp's literal split, the ragged mesh dim read as
// Replicate), cut into units of |block| / sum(units) elements, units[0..i) before it.
#include <cstdint>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "oracle.hpp"

namespace ragged_cases {

struct Case {
  std::vector<oracle::Pl> base;  // the ragged mesh dim holds 'R' here
  int rdim = -1;                 // -1: not ragged
  int k = 1;                     // dims (0..k-1)
  std::vector<std::int64_t> units;
};

inline std::string text(const Case& c) {
  std::string s;
  for (std::size_t m = 0; m < c.base.size(); ++m) {
    if (static_cast<int>(m) != c.rdim) {
      s += oracle::text({c.base[m]});
      continue;
    }
    s += "RaggedShard((";
    for (int d = 0; d < c.k; ++d) s += std::to_string(d) + (c.k == 1 || d + 1 < c.k ? "," : "");
    s += "),(";
    for (std::size_t i = 0; i < c.units.size(); ++i) s += (i ? "," : "") + std::to_string(c.units[i]);
    s += "))";
  }
  return s;
}

// The ids of the rank's piece (its whole block when not ragged), row-major.
inline oracle::List piece(const std::vector<std::int64_t>& mesh, const std::vector<std::int64_t>& shape, const Case& c,
                          const std::vector<std::int64_t>& coord) {
  const auto block = oracle::local_ids(shape, oracle::owned(mesh, shape, c.base, coord));
  if (c.rdim < 0) return block;
  const std::int64_t sum = std::accumulate(c.units.begin(), c.units.end(), std::int64_t{0});
  const std::int64_t unit = static_cast<std::int64_t>(block.size()) / sum;
  const auto i = static_cast<std::size_t>(coord[static_cast<std::size_t>(c.rdim)]);
  const std::int64_t lo = unit * std::accumulate(c.units.begin(), c.units.begin() + static_cast<std::ptrdiff_t>(i), std::int64_t{0});
  return oracle::List(block.begin() + lo, block.begin() + lo + unit * c.units[i]);
}

// Whether `f(n, row)` holds on every rank's block: its element count and its trailing row (the
// product of its extents from dim k on), from the literal split.
template <class F>
bool every_block(const std::vector<std::int64_t>& mesh, const std::vector<std::int64_t>& shape, const Case& c, F&& f) {
  std::vector<std::int64_t> coord(mesh.size(), 0);
  while (true) {
    const auto sets = oracle::owned(mesh, shape, c.base, coord);
    std::int64_t n = 1, row = 1;
    for (std::size_t d = 0; d < sets.size(); ++d) {
      n *= static_cast<std::int64_t>(sets[d].size());
      if (static_cast<int>(d) >= c.k) row *= static_cast<std::int64_t>(sets[d].size());
    }
    if (!f(n, row)) return false;
    std::size_t m = mesh.size();
    while (m-- > 0) {
      if (++coord[m] < mesh[m]) break;
      coord[m] = 0;
    }
    if (m == static_cast<std::size_t>(-1)) return true;
  }
}

// Whether the definition admits the case: on every block the units' sum divides its size and
// every rank's piece holds whole trailing rows (the caller keeps Partial out and the mesh dims before rdim R).
inline bool valid(const std::vector<std::int64_t>& mesh, const std::vector<std::int64_t>& shape, const Case& c) {
  if (c.rdim < 0) return true;
  const std::int64_t sum = std::accumulate(c.units.begin(), c.units.end(), std::int64_t{0});
  if (sum == 0 || c.k < 1 || c.k > static_cast<int>(shape.size())) return false;
  return every_block(mesh, shape, c, [&](std::int64_t n, std::int64_t row) {
    if (n % sum != 0) return false;
    // every piece [unit * units before it, + its own units) starts and stops on a row boundary
    std::int64_t before = 0;
    for (const auto u : c.units) {
      if (row > 0 && u > 0 && ((n / sum) * before % row != 0 || (n / sum) * (before + u) % row != 0)) return false;
      before += u;
    }
    return true;
  });
}

// Whether a valid case's unit cuts a trailing row on some block (admitted only because every piece
// still holds whole rows: the layouts veScale accepts beyond "the unit is whole rows").
inline bool unit_cuts_row(const std::vector<std::int64_t>& mesh, const std::vector<std::int64_t>& shape, const Case& c) {
  if (c.rdim < 0) return false;
  const std::int64_t sum = std::accumulate(c.units.begin(), c.units.end(), std::int64_t{0});
  return !every_block(mesh, shape, c, [&](std::int64_t n, std::int64_t row) { return !(row > 0 && sum > 0 && (n / sum) % row != 0); });
}

// A random ragged case on `mesh` for an nd-d tensor: a ragged mesh dim with only Replicate before
// it, Shard, _StridedShard (split factor 2) or Replicate after it, k in 1..nd, units from {0, 1, 2} (sum > 0).
inline Case random_ragged(const std::vector<std::int64_t>& mesh, int nd, std::mt19937_64& rng) {
  Case c;
  const int md = static_cast<int>(mesh.size());
  c.rdim = static_cast<int>(rng() % static_cast<std::uint64_t>(md));
  for (int m = 0; m < md; ++m) {
    if (m <= c.rdim || rng() % 3 == 0) c.base.push_back({'R'});
    else if (rng() % 4 == 0) c.base.push_back({'T', static_cast<int>(rng() % static_cast<std::uint64_t>(nd)), 2});
    else c.base.push_back({'S', static_cast<int>(rng() % static_cast<std::uint64_t>(nd)), 1});
  }
  c.k = 1 + static_cast<int>(rng() % static_cast<std::uint64_t>(nd));
  do {
    c.units.clear();
    for (std::int64_t i = 0; i < mesh[static_cast<std::size_t>(c.rdim)]; ++i) c.units.push_back(static_cast<std::int64_t>(rng() % 3));
  } while (std::accumulate(c.units.begin(), c.units.end(), std::int64_t{0}) == 0);
  return c;
}

// Plain cases: R, P(sum), S(d) or _S(d, 2) on every mesh dim (valid combinations drawn at random).
inline Case random_plain(const std::vector<std::int64_t>& mesh, int nd, std::mt19937_64& rng, bool allow_partial) {
  Case c;
  for (std::size_t m = 0; m < mesh.size(); ++m) {
    const auto o = rng() % static_cast<std::uint64_t>(nd + (allow_partial ? 2 : 1));
    if (o == 0) c.base.push_back({'R'});
    else if (static_cast<int>(o) <= nd) c.base.push_back({rng() % 4 == 0 ? 'T' : 'S', static_cast<int>(o) - 1, rng() % 4 == 0 ? 2 : 1});
    else c.base.push_back({'P'});
  }
  for (auto& p : c.base)
    if (p.kind == 'T' && p.sf == 1) p.kind = 'S';  // a strided split of factor 2, else a plain one
  for (auto& p : c.base)
    if (p.kind == 'S') p.sf = 1;
  return c;
}

}  // namespace ragged_cases

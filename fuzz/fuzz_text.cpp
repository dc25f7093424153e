// libFuzzer: the text parsers (mesh, shape, dtype, placements, whole layout, RaggedShard layouts). Whatever parses must
// print and parse back to the same layout, and small layouts must own exactly what the
// independent oracle says.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "../tests/oracle.hpp"
#include "../tests/ragged_cases.hpp"
#include "dtensor/error.hpp"
#include "dtensor/layout.hpp"
#include "dtensor/ragged.hpp"

using namespace dtensor;

namespace {

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n", what.c_str());
  std::abort();
}

std::vector<oracle::Pl> pls_of(const Layout& l) {
  std::vector<oracle::Pl> out;
  const auto& sh = l.sharding();
  for (int m = 0; m < l.mesh().ndim(); ++m) {
    oracle::Pl p{'R'};
    if (auto op = sh.partial(m)) {
      p.kind = *op == ReduceOp::sum ? 'P' : *op == ReduceOp::avg ? 'A' : *op == ReduceOp::max ? 'M' : *op == ReduceOp::min ? 'N' : 'X';
    } else if (const int d = sh.shard_dim_of(m); d >= 0) {
      const auto es = sh.entries(d);
      for (std::size_t k = 0; k < es.size(); ++k)
        if (es[k].mesh_dim == m) {
          p.kind = es[k].strided ? 'T' : 'S';
          p.dim = d;
          p.sf = es[k].split_factor;
          p.pos = es.size() > 1 ? static_cast<int>(k) : -1;
        }
    }
    out.push_back(p);
  }
  return out;
}

void check(const Layout& l) {
  const Layout back = Layout::parse(l.str());
  if (!(back == l)) finding("layout text round trip: " + l.str() + " came back as " + back.str());
  if (l.numel() > 4096 || l.mesh().num_ranks() > 64) return;
  for (auto n : l.shape())
    if (n > 4096) return;  // the oracle lists every index of every dim (even when another dim is 0)
  const auto pls = pls_of(l);
  for (const auto& p : pls)
    if (p.sf > 64) return;  // the oracle materialises split factors as lists
  for (std::int64_t p = 0; p < l.mesh().num_ranks(); ++p) {
    const auto c = l.mesh().coord_at(p);
    const auto want = oracle::owned(l.mesh().shape(), l.shape(), pls, c);
    const auto got = l.indices(c);
    for (std::size_t d = 0; d < got.size(); ++d)
      if (got[d].materialize() != want[d]) finding("ownership differs from the oracle for " + l.str());
  }
}

// A RaggedShard layout: text round trip, and small ones own exactly the oracle's pieces.
void check_ragged(const RaggedLayout& l) {
  const RaggedLayout back = RaggedLayout::parse(l.str());
  if (!(back == l)) finding("ragged layout text round trip: " + l.str() + " came back as " + back.str());
  if (!(ragged_layout_from_json(to_json(l)) == l)) finding("ragged layout JSON round trip: " + l.str());
  if (!l.is_ragged() || l.base().numel() > 4096 || l.mesh().num_ranks() > 64) return;
  for (auto n : l.shape())
    if (n > 4096) return;
  ragged_cases::Case c{pls_of(l.base()), l.ragged()->mesh_dim, l.ragged()->prefix_dims, l.ragged()->units};
  for (const auto& p : c.base)
    if (p.sf > 64) return;
  if (!ragged_cases::valid(l.mesh().shape(), l.shape(), c)) finding("the oracle refuses a ragged layout the library took: " + l.str());
  for (std::int64_t r = 0; r < l.mesh().num_ranks(); ++r) {
    const auto coord = l.mesh().coord_of_rank(r);
    std::vector<std::int64_t> got;
    for (const auto& run : l.owned_runs(coord))
      for (auto x = run.start; x < run.stop; ++x) got.push_back(x);
    if (got != ragged_cases::piece(l.mesh().shape(), l.shape(), c, coord)) finding("ragged piece differs from the oracle for " + l.str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  try {  // the whole text form
    check(Layout::parse(in));
  } catch (const InputError&) {
  }
  try {  // the same, RaggedShard allowed
    check_ragged(RaggedLayout::parse(in));
  } catch (const InputError&) {
  }
  // one field per line: mesh, shape, dtype, placements
  std::vector<std::string_view> f;
  std::size_t from = 0;
  while (f.size() < 4) {
    const auto nl = in.find('\n', from);
    f.push_back(in.substr(from, nl == std::string_view::npos ? std::string_view::npos : nl - from));
    if (nl == std::string_view::npos) break;
    from = nl + 1;
  }
  if (f.size() < 4) return 0;
  try {
    check(Layout::parse(Mesh::parse(f[0]), parse_shape(f[1]), parse_dtype(f[2]), f[3]));
  } catch (const InputError&) {
  }
  try {
    check_ragged(RaggedLayout::parse(Mesh::parse(f[0]), parse_shape(f[1]), parse_dtype(f[2]), f[3]));
  } catch (const InputError&) {
  }
  return 0;
}

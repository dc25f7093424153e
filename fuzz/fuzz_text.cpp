// libFuzzer: the text parsers (mesh, shape, dtype, placements, whole layout). Whatever parses must
// print and parse back to the same layout, and small layouts must own exactly what the
// independent oracle says.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "../tests/oracle.hpp"
#include "dtensor/error.hpp"
#include "dtensor/layout.hpp"

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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  try {  // the whole text form
    check(Layout::parse(in));
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
  return 0;
}

// Canonical layouts: construction from PyTorch placements, validation (one place builds every
// placement error) and printing.
#include "dtensor/layout.hpp"

#include <algorithm>
#include <charconv>
#include <ostream>

#include "dtensor/error.hpp"
#include "hash.hpp"

namespace dtensor {
namespace {

void validate_partials(const std::vector<std::optional<ReduceOp>>& partial) {
  std::optional<std::pair<int, ReduceOp>> first;
  for (std::size_t m = 0; m < partial.size(); ++m) {
    if (!partial[m]) continue;
    if (!first) {
      first = {static_cast<int>(m), *partial[m]};
      continue;
    }
    if (!mixable(first->second, *partial[m]))
      throw InputError(fmt::format("Partial ops P({}) on mesh dim {} and P({}) on mesh dim {} cannot be mixed "
                              "(only sum and avg mix)", first->second, first->first, *partial[m], m));
  }
}

}  // namespace

Sharding::Sharding(int mesh_ndim, const std::vector<std::vector<ShardEntry>>& dims,
                   const std::vector<std::optional<ReduceOp>>& partial) {
  if (mesh_ndim < 1 || mesh_ndim > kMaxMeshDims)
    throw InputError(fmt::format("a mesh of {} dims is not supported (1 to {})", mesh_ndim, kMaxMeshDims));
  if (dims.size() > static_cast<std::size_t>(kMaxTensorDims))
    throw InputError(fmt::format("a tensor of {} dims is not supported (at most {})", dims.size(), kMaxTensorDims));
  if (static_cast<int>(partial.size()) != mesh_ndim)
    throw InputError(fmt::format("sharding has {} partial slots for a {}-d mesh", partial.size(), mesh_ndim));
  mesh_ndim_ = static_cast<std::uint8_t>(mesh_ndim);
  tensor_ndim_ = static_cast<std::uint8_t>(dims.size());
  std::vector<int> used(static_cast<std::size_t>(mesh_ndim), -1);
  std::size_t n = 0;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    start_[d] = static_cast<std::uint8_t>(n);
    for (const auto& e : dims[d]) {
      if (e.mesh_dim < 0 || e.mesh_dim >= mesh_ndim)
        throw InputError(fmt::format("mesh dim {} is out of range for a {}-d mesh", e.mesh_dim, mesh_ndim));
      if (e.split_factor < 1)
        throw InputError(fmt::format("split_factor {} on mesh dim {} must be at least 1", e.split_factor, e.mesh_dim));
      if (!e.strided && e.split_factor != 1)
        throw InputError(fmt::format("a plain Shard on mesh dim {} cannot have split_factor {}", e.mesh_dim, e.split_factor));
      auto& u = used[static_cast<std::size_t>(e.mesh_dim)];
      if (u != -1)
        throw InputError(fmt::format("mesh dim {} shards tensor dims {} and {}", e.mesh_dim, u, d));
      u = static_cast<int>(d);
      if (partial[static_cast<std::size_t>(e.mesh_dim)])
        throw InputError(fmt::format("mesh dim {} is both sharded and Partial", e.mesh_dim));
      entries_[n++] = e;
    }
  }
  for (std::size_t d = dims.size(); d <= static_cast<std::size_t>(kMaxTensorDims); ++d) start_[d] = static_cast<std::uint8_t>(n);
  for (std::size_t m = 0; m < partial.size(); ++m) partial_[m] = partial[m] ? static_cast<std::int8_t>(*partial[m]) : -1;
  validate_partials(partial);
}

Sharding Sharding::replicated(int mesh_ndim, int tensor_ndim) {
  return Sharding(mesh_ndim, std::vector<std::vector<ShardEntry>>(static_cast<std::size_t>(tensor_ndim)),
                  std::vector<std::optional<ReduceOp>>(static_cast<std::size_t>(mesh_ndim)));
}

Sharding Sharding::from_placements(std::span<const Placement> placements, std::span<const int> order,
                                   int tensor_ndim) {
  const int mesh_ndim = static_cast<int>(placements.size());
  if (!order.empty() && order.size() != placements.size())
    throw InputError(fmt::format("{} shard-order positions for {} placements", order.size(), placements.size()));
  auto pos_of = [&](int m) { return order.empty() ? -1 : order[static_cast<std::size_t>(m)]; };
  std::vector<std::vector<int>> mesh_dims_of(static_cast<std::size_t>(tensor_ndim));
  std::vector<std::optional<ReduceOp>> partial(static_cast<std::size_t>(mesh_ndim));
  std::vector<std::int64_t> dim_of(static_cast<std::size_t>(mesh_ndim), -1);
  for (int m = 0; m < mesh_ndim; ++m) {
    const Placement& p = placements[static_cast<std::size_t>(m)];
    if (!p.is_any_shard()) {
      if (pos_of(m) >= 0)
        throw InputError(fmt::format("shard order position [{}] on mesh dim {} follows {}, which is not a shard",
                                pos_of(m), m, p.str()));
      if (p.is_partial()) partial[static_cast<std::size_t>(m)] = p.op();
      continue;
    }
    std::int64_t d = p.dim();
    if (d < -tensor_ndim || d >= tensor_ndim)
      throw InputError(fmt::format("tensor dim {} of {} on mesh dim {} is out of range for a {}-d tensor", p.dim(),
                              p.str(), m, tensor_ndim));
    if (d < 0) d += tensor_ndim;
    if (p.is_strided_shard() && p.split_factor() < 1)
      throw InputError(fmt::format("split_factor {} of {} on mesh dim {} must be at least 1", p.split_factor(),
                              p.str(), m));
    dim_of[static_cast<std::size_t>(m)] = d;
    mesh_dims_of[static_cast<std::size_t>(d)].push_back(m);
  }
  std::vector<std::vector<ShardEntry>> dims(static_cast<std::size_t>(tensor_ndim));
  for (int d = 0; d < tensor_ndim; ++d) {
    const auto& ms = mesh_dims_of[static_cast<std::size_t>(d)];
    if (ms.empty()) continue;
    std::vector<int> given, missing;
    for (int m : ms) (pos_of(m) >= 0 ? given : missing).push_back(m);
    std::vector<int> ordered(ms.size(), -1);
    if (given.empty()) {
      ordered = ms;
    } else {
      if (!missing.empty())
        throw InputError(fmt::format("shard order of tensor dim {}: position given for mesh dim(s) {} but missing "
                                "for mesh dim(s) {} (give [k] for all or none)",
                                d, fmt::join(given, ","), fmt::join(missing, ",")));
      for (int m : ms) {
        const int k = pos_of(m);
        if (k >= static_cast<int>(ms.size()))
          throw InputError(fmt::format("shard order position [{}] on mesh dim {} is out of range: tensor dim {} is "
                                  "sharded by {} mesh dim(s), positions 0..{}",
                                  k, m, d, ms.size(), ms.size() - 1));
        if (ordered[static_cast<std::size_t>(k)] != -1)
          throw InputError(fmt::format("shard order position [{}] is given twice for tensor dim {} (mesh dims {} and {})",
                                  k, d, ordered[static_cast<std::size_t>(k)], m));
        ordered[static_cast<std::size_t>(k)] = m;
      }
    }
    for (int m : ordered) {
      const Placement& p = placements[static_cast<std::size_t>(m)];
      dims[static_cast<std::size_t>(d)].push_back(
          {m, p.is_strided_shard() ? p.split_factor() : 1, p.is_strided_shard()});
    }
  }
  return Sharding(mesh_ndim, std::move(dims), std::move(partial));
}

Sharding Sharding::parse(std::string_view text, int mesh_ndim, int tensor_ndim) {
  const PlacementSpec spec = parse_placements(text);
  if (static_cast<int>(spec.placements.size()) != mesh_ndim)
    throw InputError(fmt::format("placements {} name {} mesh dim(s) but the mesh has {}", quote_input(text),
                            spec.placements.size(), mesh_ndim));
  return from_placements(spec.placements, spec.order, tensor_ndim);
}

bool Sharding::has_partial() const noexcept {
  for (int m = 0; m < mesh_ndim_; ++m)
    if (partial_[static_cast<std::size_t>(m)] >= 0) return true;
  return false;
}

// The entry over `mesh_dim` in the flat list (grouped by tensor dim): its tensor dim and its
// index within that dim's entries, or (-1, -1). The planner asks this for every state it meets.
std::pair<int, int> Sharding::locate(int mesh_dim) const noexcept {
  const int n = entry_count();
  for (int k = 0; k < n; ++k)
    if (entries_[static_cast<std::size_t>(k)].mesh_dim == mesh_dim) {
      int d = 0;
      while (start_[static_cast<std::size_t>(d) + 1] <= k) ++d;
      return {d, k - start_[static_cast<std::size_t>(d)]};
    }
  return {-1, -1};
}

int Sharding::shard_dim_of(int mesh_dim) const noexcept { return locate(mesh_dim).first; }

int Sharding::position_of(int mesh_dim) const noexcept { return locate(mesh_dim).second; }

bool Sharding::is_last_in_order(int mesh_dim) const noexcept {
  for (int d = 0; d < tensor_ndim_; ++d) {
    const auto es = entries(d);
    if (!es.empty() && es.back().mesh_dim == mesh_dim) return true;
  }
  return false;
}

Placement Sharding::placement(int mesh_dim) const {
  for (int d = 0; d < tensor_ndim_; ++d)
    for (const auto& e : entries(d))
      if (e.mesh_dim == mesh_dim)
        return e.strided ? Placement::StridedShard(static_cast<std::int64_t>(d), e.split_factor)
                         : Placement::Shard(static_cast<std::int64_t>(d));
  if (auto p = partial(mesh_dim)) return Placement::Partial(*p);
  return Placement::Replicate();
}

std::vector<Placement> Sharding::placements() const {
  std::vector<Placement> out;
  for (int m = 0; m < mesh_ndim(); ++m) out.push_back(placement(m));
  return out;
}

std::vector<int> Sharding::printed_order() const {
  std::vector<int> out(static_cast<std::size_t>(mesh_ndim_), -1);
  for (int d = 0; d < tensor_ndim_; ++d)
    if (const auto es = entries(d); es.size() >= 2)
      for (std::size_t k = 0; k < es.size(); ++k) out[static_cast<std::size_t>(es[k].mesh_dim)] = static_cast<int>(k);
  return out;
}

std::string Sharding::str() const {
  // Placement::str per mesh dim and the printed order, written in place (plans print every
  // state of their trace: no temporary strings)
  std::string s;
  s.reserve(static_cast<std::size_t>(mesh_ndim_) * 8);
  char buf[24];
  auto number = [&](std::int64_t v) {
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    s.append(buf, r.ptr);
  };
  for (int m = 0; m < mesh_ndim_; ++m) {
    const auto [d, k] = locate(m);
    if (d < 0) {
      if (const auto p = partial(m)) {
        s += "P(";
        s += to_string(*p);
        s += ')';
      } else {
        s += 'R';
      }
      continue;
    }
    const auto& e = entries_[static_cast<std::size_t>(start_[static_cast<std::size_t>(d)] + k)];
    s += e.strided ? "_S(" : "S(";
    number(d);
    if (e.strided) {
      s += ", ";
      number(e.split_factor);
    }
    s += ')';
    if (entries(d).size() >= 2) {  // the printed order: the entry's position in its dim's order
      s += '[';
      number(k);
      s += ']';
    }
  }
  return s;
}

Sharding Sharding::with_replicate(int mesh_dim) const noexcept {
  Sharding s = *this;
  s.partial_[static_cast<std::size_t>(mesh_dim)] = -1;
  const int n = entry_count();
  for (int k = 0; k < n; ++k) {
    if (s.entries_[static_cast<std::size_t>(k)].mesh_dim != mesh_dim) continue;
    std::copy(s.entries_.begin() + k + 1, s.entries_.begin() + n, s.entries_.begin() + k);
    s.entries_[static_cast<std::size_t>(n - 1)] = ShardEntry{};
    // every offset past entry k moves down by one: over slots 1..kMaxTensorDims (slot 0 is always
    // 0), a fixed trip count the compiler turns into one vector operation
    const auto at = static_cast<std::uint8_t>(k);
    for (std::size_t d = 1; d <= static_cast<std::size_t>(kMaxTensorDims); ++d)
      s.start_[d] = static_cast<std::uint8_t>(s.start_[d] - (s.start_[d] > at ? 1 : 0));
    break;
  }
  return s;
}

Sharding Sharding::with_replicated(std::uint32_t mesh_dims) const noexcept {
  Sharding s = *this;
  for (int m = 0; m < mesh_ndim_; ++m)
    if ((mesh_dims >> m) & 1u) s.partial_[static_cast<std::size_t>(m)] = -1;
  // the kept entries moved down in order, each tensor dim's offset where its first lands
  std::uint8_t kept = 0;
  for (int d = 0; d < tensor_ndim_; ++d) {
    const int first = start_[static_cast<std::size_t>(d)], end = start_[static_cast<std::size_t>(d) + 1];
    s.start_[static_cast<std::size_t>(d)] = kept;
    for (int k = first; k < end; ++k)
      if (!((mesh_dims >> entries_[static_cast<std::size_t>(k)].mesh_dim) & 1u)) s.entries_[kept++] = entries_[static_cast<std::size_t>(k)];
  }
  for (std::size_t d = tensor_ndim_; d < s.start_.size(); ++d) s.start_[d] = kept;  // (unused slots: the count)
  for (std::size_t k = kept; k < static_cast<std::size_t>(entry_count()); ++k) s.entries_[k] = ShardEntry{};
  return s;
}

Sharding Sharding::with_shard_appended(int tensor_dim, ShardEntry entry) const noexcept {
  Sharding s = with_replicate(entry.mesh_dim);
  const int n = s.entry_count();
  const int at = s.start_[static_cast<std::size_t>(tensor_dim) + 1];
  for (int j = n; j > at; --j) s.entries_[static_cast<std::size_t>(j)] = s.entries_[static_cast<std::size_t>(j) - 1];
  s.entries_[static_cast<std::size_t>(at)] = entry;
  for (std::size_t d = static_cast<std::size_t>(tensor_dim) + 1; d < s.start_.size(); ++d) ++s.start_[d];
  return s;
}

Sharding Sharding::with_partial(int mesh_dim, ReduceOp op) const noexcept {
  Sharding s = with_replicate(mesh_dim);
  s.partial_[static_cast<std::size_t>(mesh_dim)] = static_cast<std::int8_t>(op);
  return s;
}

Sharding Sharding::with_mesh_dims_relabeled(std::span<const std::int8_t> to) const noexcept {
  Sharding s = *this;
  for (int m = 0; m < mesh_ndim_; ++m) s.partial_[static_cast<std::size_t>(to[static_cast<std::size_t>(m)])] = partial_[static_cast<std::size_t>(m)];
  for (int k = 0, n = entry_count(); k < n; ++k) {
    auto& e = s.entries_[static_cast<std::size_t>(k)];
    e.mesh_dim = to[static_cast<std::size_t>(e.mesh_dim)];
  }
  return s;
}

Sharding Sharding::with_tensor_dims_permuted(std::span<const std::int8_t> to) const noexcept {
  std::array<std::int8_t, kMaxTensorDims> from{};  // the inverse: new dim d holds old dim from[d]
  for (int d = 0; d < tensor_ndim_; ++d) from[static_cast<std::size_t>(to[static_cast<std::size_t>(d)])] = static_cast<std::int8_t>(d);
  Sharding s = *this;
  int k = 0;
  for (int d = 0; d < tensor_ndim_; ++d) {
    s.start_[static_cast<std::size_t>(d)] = static_cast<std::uint8_t>(k);
    for (const auto& e : entries(from[static_cast<std::size_t>(d)])) s.entries_[static_cast<std::size_t>(k++)] = e;
  }
  return s;
}

std::size_t Sharding::hash() const noexcept {
  // one multiply-xor per used entry and per 8 offsets, the Partial slots as one word: the planner
  // hashes every state it meets
  std::uint64_t h = 0xcbf29ce484222325ULL ^ (static_cast<std::uint64_t>(tensor_ndim_) | static_cast<std::uint64_t>(mesh_ndim_) << 8);
  auto add = [&h](std::uint64_t v) { h = (h ^ v) * 0x100000001b3ULL; };
  const int n = entry_count();
  for (int k = 0; k < n; ++k) {
    const auto& e = entries_[static_cast<std::size_t>(k)];
    add(static_cast<std::uint64_t>(e.mesh_dim) | static_cast<std::uint64_t>(e.split_factor) << 8 | (e.strided ? 1ULL << 7 : 0));
  }
  std::uint64_t word = 0;
  for (int d = 1; d <= tensor_ndim_; ++d) {
    word = word << 8 | start_[static_cast<std::size_t>(d)];
    if (d % 8 == 0) add(word), word = 0;
  }
  add(word);
  std::uint64_t partial = 0;  // (the slots' bytes as one word, as operator== reads them)
  static_assert(sizeof partial == sizeof partial_);
  std::memcpy(&partial, partial_.data(), sizeof partial);
  add(partial);
  return static_cast<std::size_t>(detail::mix64(h));
}

std::size_t hash_value(const Sharding& s) noexcept { return s.hash(); }

std::ostream& operator<<(std::ostream& os, const Sharding& s) { return os << s.str(); }

// ---------------------------------------------------------------- Layout

Layout::Layout(Mesh mesh, std::vector<std::int64_t> shape, DType dtype, Sharding sharding)
    : mesh_(std::move(mesh)), shape_(std::move(shape)), dtype_(dtype), sharding_(std::move(sharding)) {
  constexpr std::int64_t kMaxNumel = std::int64_t{1} << 53;  // bytes stay exact in int64 and double
  bool empty = false;
  for (std::size_t d = 0; d < shape_.size(); ++d) {
    if (shape_[d] < 0)
      throw InputError(fmt::format("tensor size {} on dim {} is negative (size 0 is a valid empty dim)", shape_[d], d));
    if (shape_[d] > kMaxNumel)
      throw InputError(fmt::format("tensor size {} on dim {} exceeds 2^53", shape_[d], d));
    empty = empty || shape_[d] == 0;
  }
  // The non-empty dims bound every size computed from them (a rank's shard of an empty tensor
  // still spans them), so their product must stay within 2^53 too.
  std::int64_t numel = 1;
  for (std::size_t d = 0; d < shape_.size(); ++d) {
    if (shape_[d] == 0) continue;
    if (numel > kMaxNumel / shape_[d])
      throw InputError(fmt::format("tensor shape {} has more than 2^53 elements{}", shape_str(shape_),
                                   empty ? " in its non-empty dims" : ""));
    numel *= shape_[d];
  }
  if (sharding_.mesh_ndim() != mesh_.ndim())
    throw InputError(fmt::format("placements \"{}\" name {} mesh dim(s) but mesh {} has {}", sharding_.str(),
                            sharding_.mesh_ndim(), mesh_.str(), mesh_.ndim()));
  if (sharding_.tensor_ndim() != ndim())
    throw InputError(fmt::format("sharding \"{}\" is for a {}-d tensor but shape {} is {}-d", sharding_.str(),
                            sharding_.tensor_ndim(), shape_str(shape_), ndim()));
  // An average of integers is not an integer: one rule on every backend (torch refuses it too).
  if (!is_floating(dtype_))
    for (int m = 0; m < mesh_.ndim(); ++m)
      if (sharding_.partial(m) == ReduceOp::avg)
        throw InputError(fmt::format("Partial(avg) on mesh dim {} needs a floating dtype, not {} (an average of integers "
                                     "is not an integer: reduce with sum and divide in a floating type)",
                                     m, to_string(dtype_)));
}

void Layout::check_runs(int only_dim) const {
  // Index lists are run lists: a strided split into sf pieces can give a rank up to min(sf,
  // length) separate runs, multiplied over a dim's entries. Sizes and offsets are closed form
  // (local_shape, global_offset); listing the indices, planning and executing need the lists,
  // so they stop here with an error that names the split factor.
  for (int d = 0; d < ndim(); ++d) {
    if (only_dim >= 0 && d != only_dim) continue;
    const auto len = shape_[static_cast<std::size_t>(d)];
    const auto runs = owned_runs_bound(sharding_.entries(d), len);
    if (runs <= kMaxRunsPerRank) continue;
    for (const auto& e : sharding_.entries(d))
      if (e.strided && std::min(e.split_factor, len) > 1)
        throw InputError(fmt::format("_S({}, {}) on mesh dim {} splits tensor dim {} (size {}) into up to {} separate runs "
                                     "per rank; index lists, plans and execution support at most {} (local shapes and "
                                     "offsets do not need them; split factors beyond the dim's size act like its size)",
                                     d, e.split_factor, e.mesh_dim, d, len, static_cast<double>(runs), kMaxRunsPerRank));
  }
}

Layout Layout::from_placements(Mesh mesh, std::vector<std::int64_t> shape, DType dtype,
                               std::span<const Placement> placements, std::span<const int> order) {
  if (static_cast<int>(placements.size()) != mesh.ndim())
    throw InputError(fmt::format("{} placement(s) given for mesh {} with {} dim(s)", placements.size(), mesh.str(),
                            mesh.ndim()));
  auto s = Sharding::from_placements(placements, order, static_cast<int>(shape.size()));
  return Layout(std::move(mesh), std::move(shape), dtype, std::move(s));
}

Layout Layout::from_torch(Mesh mesh, std::vector<std::int64_t> shape, DType dtype,
                          std::span<const Placement> placements, std::span<const ShardOrderEntry> shard_order) {
  const int nd = static_cast<int>(shape.size());
  std::vector<int> order(placements.size(), -1);
  for (const auto& entry : shard_order) {
    std::int64_t d = entry.tensor_dim < 0 ? entry.tensor_dim + nd : entry.tensor_dim;
    if (d < 0 || d >= nd)
      throw InputError(fmt::format("shard_order names tensor dim {}, out of range for a {}-d tensor", entry.tensor_dim, nd));
    for (std::size_t k = 0; k < entry.mesh_dims.size(); ++k) {
      const int m = entry.mesh_dims[k];
      if (m < 0 || m >= static_cast<int>(placements.size()))
        throw InputError(fmt::format("shard_order names mesh dim {}, out of range for a {}-d mesh", m, placements.size()));
      const Placement& p = placements[static_cast<std::size_t>(m)];
      std::int64_t pd = p.dim() < 0 ? p.dim() + nd : p.dim();
      if (!p.is_any_shard() || pd != d)
        throw InputError(fmt::format("shard_order puts mesh dim {} on tensor dim {}, but its placement is {}", m, d, p.str()));
      if (order[static_cast<std::size_t>(m)] != -1)
        throw InputError(fmt::format("shard_order names mesh dim {} twice", m));
      order[static_cast<std::size_t>(m)] = static_cast<int>(k);
    }
  }
  return from_placements(std::move(mesh), std::move(shape), dtype, placements, order);
}

Layout Layout::parse(Mesh mesh, std::vector<std::int64_t> shape, DType dtype, std::string_view placements) {
  auto s = Sharding::parse(placements, mesh.ndim(), static_cast<int>(shape.size()));
  return Layout(std::move(mesh), std::move(shape), dtype, std::move(s));
}

std::int64_t Layout::numel() const noexcept {
  for (auto s : shape_)
    if (s == 0) return 0;
  std::int64_t n = 1;  // within 2^53: checked when the layout was made
  for (auto s : shape_) n *= s;
  return n;
}

std::vector<Layout::ShardOrderEntry> Layout::torch_shard_order() const {
  std::vector<ShardOrderEntry> out;
  for (int d = 0; d < ndim(); ++d) {
    const auto& es = sharding_.entries(d);
    if (es.empty()) continue;
    ShardOrderEntry e{d, {}};
    for (const auto& x : es) e.mesh_dims.push_back(x.mesh_dim);
    out.push_back(std::move(e));
  }
  return out;
}

std::string Layout::str() const {
  return fmt::format("{} {} {} {}", mesh_.str(), shape_str(shape_), to_string(dtype_), sharding_.str());
}

Layout Layout::parse(std::string_view text) {
  // MESH SHAPE DTYPE PLACEMENTS: the first three are single words; placements may hold spaces.
  std::size_t pos = 0;
  auto word = [&](const char* what) {
    while (pos < text.size() && text[pos] == ' ') ++pos;
    const std::size_t start = pos;
    while (pos < text.size() && text[pos] != ' ') ++pos;
    if (start == pos)
      throw InputError(fmt::format("layout text {}: missing its {} (expected \"MESH SHAPE DTYPE PLACEMENTS\", e.g. "
                                   "\"dp=2,tp=4 1000x512 bf16 S(0)R\")", quote_input(text), what));
    return text.substr(start, pos - start);
  };
  Mesh mesh = Mesh::parse(word("mesh"));
  auto shape = parse_shape(word("shape"));
  const std::string_view dtype_word = word("dtype");
  DType dtype = DType::f32;
  try {
    dtype = parse_dtype(dtype_word);
  } catch (const InputError& e) {
    std::size_t rest = pos;
    while (rest < text.size() && text[rest] == ' ') ++rest;
    if (rest == text.size())  // three words, the last not a dtype: most likely the dtype was left out
      throw InputError(fmt::format("layout text {}: no dtype before the placements {} (expected \"MESH SHAPE DTYPE "
                                   "PLACEMENTS\", e.g. \"dp=2,tp=4 1000x512 bf16 S(0)R\")",
                                   quote_input(text), quote_input(dtype_word)));
    throw;
  }
  while (pos < text.size() && text[pos] == ' ') ++pos;
  if (pos == text.size())
    throw InputError(fmt::format("layout text {}: missing its placements (expected \"MESH SHAPE DTYPE PLACEMENTS\")",
                                 quote_input(text)));
  return parse(std::move(mesh), std::move(shape), dtype, text.substr(pos));
}

std::ostream& operator<<(std::ostream& os, const Layout& l) { return os << l.str(); }

std::size_t hash_value(const Layout& l) noexcept {
  std::uint64_t h = hash_value(l.mesh());
  for (auto s : l.shape()) detail::hash_combine(h, static_cast<std::uint64_t>(s));
  detail::hash_combine(h, static_cast<std::uint64_t>(l.dtype()));
  detail::hash_combine(h, hash_value(l.sharding()));
  return static_cast<std::size_t>(detail::mix64(h));
}

}  // namespace dtensor

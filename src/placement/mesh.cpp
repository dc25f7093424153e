#include "dtensor/mesh.hpp"

#include <algorithm>
#include <ostream>

#include <fmt/compile.h>

#include "dtensor/error.hpp"
#include "hash.hpp"

namespace dtensor {

Mesh::Mesh(std::vector<std::int64_t> shape, std::vector<std::string> names, std::vector<std::int64_t> ranks)
    : shape_(std::move(shape)), names_(std::move(names)), ranks_(std::move(ranks)) {
  if (shape_.empty()) throw InputError("mesh must have at least one dim");
  constexpr std::int64_t kMaxRanks = std::int64_t{1} << 24;
  for (std::size_t i = 0; i < shape_.size(); ++i) {
    if (shape_[i] < 1)
      throw InputError(fmt::format("mesh dim {} has size {}: mesh sizes must be at least 1", i, shape_[i]));
    if (num_ranks_ > kMaxRanks / shape_[i])
      throw InputError(fmt::format("mesh {} has more than {} ranks", fmt::join(shape_, "x"), kMaxRanks));
    num_ranks_ *= shape_[i];
  }
  if (!names_.empty()) {
    if (names_.size() != shape_.size())
      throw InputError(fmt::format("mesh has {} dims but {} dim names", shape_.size(), names_.size()));
    for (std::size_t i = 0; i < names_.size(); ++i) {
      const auto& n = names_[i];
      if (n.empty() || !std::all_of(n.begin(), n.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
          }))
        throw InputError(fmt::format("mesh dim name {} must be letters, digits or '_'", quote_input(n)));
      if (std::isdigit(static_cast<unsigned char>(n[0])))
        throw InputError(fmt::format("mesh dim name {} must not start with a digit", quote_input(n)));
      for (std::size_t j = 0; j < i; ++j)
        if (names_[j] == n) throw InputError(fmt::format("mesh dim name {} is used twice", quote_input(n)));
    }
  }
  if (!ranks_.empty()) {
    if (static_cast<std::int64_t>(ranks_.size()) != num_ranks_)
      throw InputError(fmt::format("mesh {} has {} ranks but the rank list has {} entries",
                              fmt::join(shape_, "x"), num_ranks_, ranks_.size()));
    inverse_.assign(ranks_.size(), -1);
    for (std::size_t p = 0; p < ranks_.size(); ++p) {
      std::int64_t r = ranks_[p];
      if (r < 0 || r >= num_ranks_)
        throw InputError(fmt::format("rank list entry {} is out of range for {} ranks", r, num_ranks_));
      if (inverse_[static_cast<std::size_t>(r)] != -1)
        throw InputError(fmt::format("rank list holds rank {} twice", r));
      inverse_[static_cast<std::size_t>(r)] = static_cast<std::int64_t>(p);
    }
    bool identity = true;
    for (std::size_t p = 0; p < ranks_.size(); ++p) identity = identity && ranks_[p] == static_cast<std::int64_t>(p);
    if (identity) {  // canonical form: the row-major order is never stored
      ranks_.clear();
      inverse_.clear();
    }
  }
}

void Mesh::append_dim_to(fmt::memory_buffer& out, int dim) const {
  if (!names_.empty())
    fmt::format_to(std::back_inserter(out), FMT_COMPILE("{} ({}, size {})"), dim, names_[static_cast<std::size_t>(dim)], size(dim));
  else
    fmt::format_to(std::back_inserter(out), FMT_COMPILE("{} (size {})"), dim, size(dim));
}

std::string Mesh::describe_dim(int dim) const {
  fmt::memory_buffer b;
  append_dim_to(b, dim);
  return fmt::to_string(b);
}

std::int64_t Mesh::position(std::span<const std::int64_t> coord) const {
  if (static_cast<int>(coord.size()) != ndim())
    throw InputError(fmt::format("coordinate has {} entries for a {}-d mesh", coord.size(), ndim()));
  std::int64_t p = 0;
  for (int d = 0; d < ndim(); ++d) {
    const auto c = coord[static_cast<std::size_t>(d)];
    if (c < 0 || c >= shape_[static_cast<std::size_t>(d)])
      throw InputError(fmt::format("coordinate {} is out of range on mesh dim {}", c, describe_dim(d)));
    p = p * shape_[static_cast<std::size_t>(d)] + c;
  }
  return p;
}

std::vector<std::int64_t> Mesh::coord_at(std::int64_t position) const {
  if (position < 0 || position >= num_ranks_)
    throw InputError(fmt::format("position {} is out of range for mesh {}", position, str()));
  std::vector<std::int64_t> c(shape_.size());
  for (int d = ndim() - 1; d >= 0; --d) {
    c[static_cast<std::size_t>(d)] = position % shape_[static_cast<std::size_t>(d)];
    position /= shape_[static_cast<std::size_t>(d)];
  }
  return c;
}

std::int64_t Mesh::rank_at(std::span<const std::int64_t> coord) const {
  const auto p = position(coord);
  return ranks_.empty() ? p : ranks_[static_cast<std::size_t>(p)];
}

std::vector<std::int64_t> Mesh::coord_of_rank(std::int64_t rank) const {
  if (rank < 0 || rank >= num_ranks_)
    throw InputError(fmt::format("rank {} is out of range for mesh {} ({} ranks)", rank, str(), num_ranks_));
  return coord_at(inverse_.empty() ? rank : inverse_[static_cast<std::size_t>(rank)]);
}

std::string Mesh::str() const {
  if (names_.empty()) return fmt::format("{}", fmt::join(shape_, "x"));
  std::string s;
  for (std::size_t i = 0; i < shape_.size(); ++i)
    s += fmt::format("{}{}={}", i ? "," : "", names_[i], shape_[i]);
  return s;
}

std::ostream& operator<<(std::ostream& os, const Mesh& m) { return os << m.str(); }

std::size_t hash_value(const Mesh& m) noexcept {
  std::uint64_t h = 0x6d657368;
  for (auto s : m.shape()) detail::hash_combine(h, static_cast<std::uint64_t>(s));
  for (const auto& n : m.names()) detail::hash_combine(h, detail::fnv1a(n.data(), n.size()));
  for (auto r : m.ranks()) detail::hash_combine(h, static_cast<std::uint64_t>(r));
  return static_cast<std::size_t>(detail::mix64(h));
}

}  // namespace dtensor

#pragma once
#include <cstddef>
#include <cstdint>

namespace dtensor::detail {

// 64-bit mix (splitmix64 finaliser); stable across runs and platforms of the same width.
inline std::uint64_t mix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
// One multiply per value (FNV-style); values are mixed once more by whoever finishes the hash.
inline void hash_combine(std::uint64_t& seed, std::uint64_t v) noexcept {
  seed = (seed ^ v) * 0x100000001b3ULL + 0x9e3779b97f4a7c15ULL;
}

}  // namespace dtensor::detail

namespace dtensor::detail {
// FNV-1a over bytes: stable across processes (std::hash<std::string> need not be).
inline std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = 0xcbf29ce484222325ULL) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}
}  // namespace dtensor::detail

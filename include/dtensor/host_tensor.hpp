#pragma once
// Whole tensors on the host <-> every rank's local tensor, like torch's distribute_tensor and
// DTensor.full_tensor(): for setting up inputs, checking outputs, and moving small tensors in and
// out of a layout. Row-major, elements of the layout's dtype.
#include <cstddef>
#include <cstring>
#include <cstdint>
#include <span>
#include <vector>

#include "dtensor/error.hpp"
#include "dtensor/layout.hpp"

namespace dtensor {

// Every rank's local tensor (by global rank) cut from `global` (layout.numel() elements). On a
// Partial mesh dim the rank at coordinate 0 holds the value and the others the op's identity (0
// for sum, 1 for product, the value itself for avg, max and min), so reducing gives `global` back.
[[nodiscard]] std::vector<std::vector<std::byte>> distribute_bytes(const Layout& layout, std::span<const std::byte> global);
// The global tensor from every rank's local tensor (by global rank), Partial mesh dims reduced
// with their op. Throws InputError when a local tensor has the wrong size.
[[nodiscard]] std::vector<std::byte> gather_bytes(const Layout& layout, const std::vector<std::vector<std::byte>>& locals);

// Typed forms: T must have the layout dtype's size (float for f32, std::uint16_t for bf16 bits...).
template <typename T>
[[nodiscard]] std::vector<std::vector<T>> distribute(const Layout& layout, std::span<const T> global) {
  if (sizeof(T) != itemsize(layout.dtype()))
    throw InputError(fmt::format("distribute: elements of {} bytes for dtype {} ({} bytes)", sizeof(T),
                                 to_string(layout.dtype()), itemsize(layout.dtype())));
  const auto raw = distribute_bytes(layout, std::as_bytes(global));
  std::vector<std::vector<T>> out(raw.size());
  for (std::size_t r = 0; r < raw.size(); ++r) {
    out[r].resize(raw[r].size() / sizeof(T));
    if (!raw[r].empty()) std::memcpy(out[r].data(), raw[r].data(), raw[r].size());
  }
  return out;
}

template <typename T>
[[nodiscard]] std::vector<T> gather(const Layout& layout, const std::vector<std::vector<T>>& locals) {
  if (sizeof(T) != itemsize(layout.dtype()))
    throw InputError(fmt::format("gather: elements of {} bytes for dtype {} ({} bytes)", sizeof(T),
                                 to_string(layout.dtype()), itemsize(layout.dtype())));
  std::vector<std::vector<std::byte>> raw;
  for (const auto& l : locals) {
    const auto b = std::as_bytes(std::span<const T>(l));
    raw.emplace_back(b.begin(), b.end());
  }
  const auto g = gather_bytes(layout, raw);
  std::vector<T> out(g.size() / sizeof(T));
  if (!g.empty()) std::memcpy(out.data(), g.data(), g.size());
  return out;
}

}  // namespace dtensor

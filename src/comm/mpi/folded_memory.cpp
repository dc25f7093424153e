// Folded buffers for timing-only SMPI runs (folded_memory.hpp).
#include "folded_memory.hpp"

#include <cerrno>
#include <cstdlib>
#include <string>

#include <smpi/smpi.h>

#include "dtensor/error.hpp"
#include "dtensor/scalar.hpp"

namespace dtensor::mpi_vendor {

void* FoldedMemory::allocate(std::size_t bytes) {
  if (bytes < threshold_) return Memory::allocate(bytes);
  void* p = SMPI_SHARED_MALLOC(bytes);
  if (p == nullptr) throw BackendError(fmt::format("SMPI_SHARED_MALLOC of {} bytes failed", bytes));
  folded_.emplace(reinterpret_cast<std::uintptr_t>(p), bytes);
  return p;
}

void FoldedMemory::release(void* p) noexcept {
  if (auto it = folded_.find(reinterpret_cast<std::uintptr_t>(p)); it != folded_.end()) {
    folded_.erase(it);
    SMPI_SHARED_FREE(p);
    return;
  }
  Memory::release(p);
}

bool FoldedMemory::folded(const void* p) const {
  const auto x = reinterpret_cast<std::uintptr_t>(p);
  auto it = folded_.upper_bound(x);
  if (it == folded_.begin()) return false;
  --it;
  return x < it->first + it->second;
}

void FoldedMemory::upload(void* dst, const void* host_src, std::size_t bytes) {
  if (!folded(dst)) Memory::upload(dst, host_src, bytes);
}
void FoldedMemory::download(void* host_dst, const void* src, std::size_t bytes) {
  if (!folded(src)) Memory::download(host_dst, src, bytes);
}
void FoldedMemory::copy(void* dst, const void* src, std::int64_t bytes) {
  if (!folded(dst) && !folded(src)) Memory::copy(dst, src, bytes);
}
void FoldedMemory::fill(void* dst, DType dtype, std::int64_t count, double value) {
  if (!folded(dst)) Memory::fill(dst, dtype, count, value);
}
void FoldedMemory::copy_strided(void* dst, const void* src, std::int64_t run_bytes, std::span<const std::int64_t> count,
                                std::span<const std::int64_t> dst_stride, std::span<const std::int64_t> src_stride) {
  if (!folded(dst) && !folded(src)) Memory::copy_strided(dst, src, run_bytes, count, dst_stride, src_stride);
}
void FoldedMemory::reduce(DType dtype, ReduceOp op, void* out, std::span<const void* const> inputs, std::int64_t count) {
  if (folded(out)) return;
  for (const void* in : inputs)
    if (folded(in)) return;
  Memory::reduce(dtype, op, out, inputs, count);
}

namespace {
FoldedMemory* folded_memory() {
  static FoldedMemory* const memory = []() -> FoldedMemory* {
    const char* text = std::getenv("DTENSOR_SMPI_FOLD");
    if (text == nullptr || *text == '\0') return nullptr;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(text, &end, 10);
    if (*end != '\0' || errno == ERANGE || v < 1 || v > (1LL << 40))
      throw InputError(fmt::format("DTENSOR_SMPI_FOLD={} is not a whole number of bytes from 1 to 2^40", text));
    return new FoldedMemory(static_cast<std::size_t>(v));  // lives as long as the simulation
  }();
  return memory;
}
}  // namespace

Memory& smpi_memory() {
  if (FoldedMemory* m = folded_memory()) return *m;
  return host_memory();
}

bool smpi_folded(const void* p) {
  const FoldedMemory* m = folded_memory();
  return m != nullptr && m->folded(p);
}

}  // namespace dtensor::mpi_vendor

// Host memory (dtensor::Memory's defaults): allocation, copies, fills, strided copies (streaming
// stores for large runs) and reductions (16- and 8-bit floats reduced in double and rounded once).
#include <algorithm>
#include <cstring>
#include <new>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "dtensor/error.hpp"
#include "dtensor/scalar.hpp"
#include "dtensor/memory.hpp"
#include "comm/minifloat.hpp"
#include "comm/reduce_math.hpp"

namespace dtensor {

void* Memory::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = ::operator new(bytes, std::align_val_t{64}, std::nothrow);
  if (!p) throw BackendError(fmt::format("host memory: {} bytes could not be allocated", bytes));
  return p;
}

void Memory::release(void* p) noexcept {
  if (p) ::operator delete(p, std::align_val_t{64});
}

void Memory::upload(void* dst, const void* host_src, std::size_t bytes) {
  if (bytes > 0) std::memcpy(dst, host_src, bytes);
}

void Memory::download(void* host_dst, const void* src, std::size_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, src, bytes);
}

void Memory::wait() {}

Memory& host_memory() noexcept {
  static Memory host;
  return host;
}

bool Memory::supports(Collective, DType, ReduceOp) const { return true; }

void Memory::copy(void* dst, const void* src, std::int64_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, static_cast<std::size_t>(bytes));
}

void Memory::reduce(DType dtype, ReduceOp op, void* out, std::span<const void* const> inputs,
                             std::int64_t count) {
  const auto n = static_cast<std::int64_t>(inputs.size());
  const bool narrow_float = dtype == DType::bf16 || dtype == DType::f16 || dtype == DType::f8e4m3 || dtype == DType::f8e5m2;
  if (narrow_float) {
    // decode through the dtype's table, add in double, round once per element
    const double* table = decode_table(dtype);
    const bool wide16 = itemsize(dtype) == 2;
    auto bits_at = [&](const void* p, std::int64_t k) -> std::uint32_t {
      if (wide16) {
        std::uint16_t b;
        std::memcpy(&b, static_cast<const char*>(p) + 2 * k, 2);
        return b;
      }
      return static_cast<const std::uint8_t*>(p)[k];
    };
    // bf16 is the top half of a float: decoded by a shift, no table
    const bool is_bf16 = dtype == DType::bf16;
    auto value = [&](const void* p, std::int64_t k) -> double {
      const std::uint32_t b = bits_at(p, k);
      return is_bf16 ? static_cast<double>(detail::bits_float(b << 16)) : table[b];
    };
    auto finish = [&](std::int64_t k, double acc) {
      const double v = op == ReduceOp::avg ? acc / static_cast<double>(n) : acc;
      if (dtype == DType::bf16 || dtype == DType::f16) {
        const std::uint16_t b = dtype == DType::bf16 ? detail::encode_bf16(v) : detail::encode_f16(v);
        std::memcpy(static_cast<char*>(out) + 2 * k, &b, 2);
      } else {
        store_element(dtype, out, k, v);
      }
    };
    if (is_bf16 && (op == ReduceOp::sum || op == ReduceOp::avg)) {
      // blocks of a cache-resident double accumulator: the loops vectorise
      constexpr std::int64_t kBlock = 2048;
      double acc[kBlock];
      for (std::int64_t k0 = 0; k0 < count; k0 += kBlock) {
        const std::int64_t m = std::min(kBlock, count - k0);
        for (std::int64_t s = 0; s < n; ++s) {
          const auto* in = static_cast<const std::uint16_t*>(inputs[static_cast<std::size_t>(s)]) + k0;
          for (std::int64_t j = 0; j < m; ++j) {
            std::uint16_t b;
            std::memcpy(&b, in + j, 2);
            const double x = static_cast<double>(detail::bits_float(static_cast<std::uint32_t>(b) << 16));
            acc[j] = s == 0 ? x : acc[j] + x;
          }
        }
        for (std::int64_t j = 0; j < m; ++j) finish(k0 + j, acc[j]);
      }
      return;
    }
    for (std::int64_t k = 0; k < count; ++k) {
      double acc = value(inputs[0], k);
      for (std::int64_t s = 1; s < n; ++s) {
        const double x = value(inputs[static_cast<std::size_t>(s)], k);
        switch (op) {
          case ReduceOp::sum: case ReduceOp::avg: acc += x; break;
          case ReduceOp::max: acc = std::max(acc, x); break;
          case ReduceOp::min: acc = std::min(acc, x); break;
          case ReduceOp::product: acc *= x; break;
        }
      }
      finish(k, acc);
    }
    return;
  }
  copy(out, inputs[0], count * static_cast<std::int64_t>(itemsize(dtype)));
  for (std::int64_t s = 1; s < n; ++s) reduce_into(dtype, op, out, inputs[static_cast<std::size_t>(s)], count);
  if (op == ReduceOp::avg) finish_average(dtype, out, count, n);
}

void Memory::fill(void* dst, DType dtype, std::int64_t count, double value) {
  if (count <= 0) return;  // an empty buffer may have no address at all
  if (value == 0.0) {
    std::memset(dst, 0, static_cast<std::size_t>(count * static_cast<std::int64_t>(itemsize(dtype))));
    return;
  }
  for (std::int64_t k = 0; k < count; ++k) store_element(dtype, dst, k, value);
}

namespace {
// Large strided copies write each destination line once: non-temporal stores skip the read for
// ownership that plain stores pay, which is most of the gap to one big memcpy.
void copy_run(char* d, const char* s, std::size_t n, bool streaming) {
#if defined(__SSE2__)
  if (streaming && n >= 1024 && (reinterpret_cast<std::uintptr_t>(d) % 16) == 0 && n % 64 == 0) {
    auto* dv = reinterpret_cast<__m128i*>(d);
    const auto* sv = reinterpret_cast<const __m128i*>(s);
    for (std::size_t k = 0; k < n / 16; k += 4) {
      const __m128i a = _mm_loadu_si128(sv + k), b = _mm_loadu_si128(sv + k + 1), c = _mm_loadu_si128(sv + k + 2),
                    e = _mm_loadu_si128(sv + k + 3);
      _mm_stream_si128(dv + k, a);
      _mm_stream_si128(dv + k + 1, b);
      _mm_stream_si128(dv + k + 2, c);
      _mm_stream_si128(dv + k + 3, e);
    }
    return;
  }
#endif
  (void)streaming;
  std::memcpy(d, s, n);
}
}  // namespace

void Memory::copy_strided(void* dst, const void* src, std::int64_t run_bytes,
                                         std::span<const std::int64_t> count, std::span<const std::int64_t> dst_stride,
                                         std::span<const std::int64_t> src_stride) {
  const std::size_t nd = count.size();
  if (run_bytes <= 0) return;
  if (nd == 0) {
    std::memcpy(dst, src, static_cast<std::size_t>(run_bytes));
    return;
  }
  for (auto c : count)
    if (c == 0) return;
  std::int64_t idx[16] = {};
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  std::int64_t total = run_bytes;
  for (auto c : count) total *= c;
  const bool streaming = total >= (std::int64_t{8} << 20);  // larger than the caches
  while (true) {
    std::int64_t doff = 0, soff = 0;
    for (std::size_t k = 0; k < nd; ++k) {
      doff += idx[k] * dst_stride[k];
      soff += idx[k] * src_stride[k];
    }
    copy_run(d + doff, s + soff, static_cast<std::size_t>(run_bytes), streaming);
    std::size_t k = nd;
    while (k > 0) {
      --k;
      if (++idx[k] < count[k]) break;
      idx[k] = 0;
      if (k == 0) {
#if defined(__SSE2__)
        if (streaming) _mm_sfence();
#endif
        return;
      }
    }
  }
}

}  // namespace dtensor

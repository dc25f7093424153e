#include "dtensor/scalar.hpp"

#include "minifloat.hpp"
#include "reduce_math.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace dtensor {
namespace {

// IEEE-style minifloats, decoded and encoded by the reference codec the device kernels compile too
// (reduce_math.hpp): `e` exponent bits, `m` mantissa bits, `fn` = e4m3fn style.
using reduce_math::decode;
using reduce_math::encode;
using Mini = reduce_math::Format;
constexpr Mini kBF16 = reduce_math::kBF16, kF16 = reduce_math::kF16, kE4M3 = reduce_math::kE4M3, kE5M2 = reduce_math::kE5M2;

// ---- fast, exact paths for the 16- and 8-bit floats (the reference decode/encode above define them)

// Every value of a 16- or 8-bit float, decoded once.
struct Tables {
  std::vector<double> bf16, f16, e4m3, e5m2;
  Tables() : bf16(65536), f16(65536), e4m3(256), e5m2(256) {
    for (std::uint32_t b = 0; b < 65536; ++b) {
      bf16[b] = decode(b, kBF16);
      f16[b] = decode(b, kF16);
    }
    for (std::uint32_t b = 0; b < 256; ++b) {
      e4m3[b] = decode(b, kE4M3);
      e5m2[b] = decode(b, kE5M2);
    }
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}

template <typename T>
T get(const void* p, std::int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(p) + i * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <typename T>
void put(void* p, std::int64_t i, T v) {
  std::memcpy(static_cast<char*>(p) + i * static_cast<std::int64_t>(sizeof(T)), &v, sizeof(T));
}

template <typename T>
T apply(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return static_cast<T>(a + b);
    case ReduceOp::max: return std::max(a, b);
    case ReduceOp::min: return std::min(a, b);
    case ReduceOp::product: return static_cast<T>(a * b);
  }
  return a;
}

template <typename T>
void reduce_native(ReduceOp op, void* acc, const void* x, std::int64_t n) {
  for (std::int64_t k = 0; k < n; ++k) put<T>(acc, k, apply<T>(op, get<T>(acc, k), get<T>(x, k)));
}

}  // namespace

namespace detail {
double decode_reference(DType t, std::uint32_t bits) {
  return decode(bits, t == DType::bf16 ? kBF16 : t == DType::f16 ? kF16 : t == DType::f8e4m3 ? kE4M3 : kE5M2);
}
std::uint32_t encode_reference(DType t, double v) {
  return encode(v, t == DType::bf16 ? kBF16 : t == DType::f16 ? kF16 : t == DType::f8e4m3 ? kE4M3 : kE5M2);
}
}  // namespace detail

const double* decode_table(DType t) noexcept {
  switch (t) {
    case DType::bf16: return tables().bf16.data();
    case DType::f16: return tables().f16.data();
    case DType::f8e4m3: return tables().e4m3.data();
    case DType::f8e5m2: return tables().e5m2.data();
    default: return nullptr;
  }
}

double load_element(DType t, const void* d, std::int64_t i) noexcept {
  switch (t) {
    case DType::f64: return get<double>(d, i);
    case DType::f32: return get<float>(d, i);
    case DType::bf16: return tables().bf16[get<std::uint16_t>(d, i)];
    case DType::f16: return tables().f16[get<std::uint16_t>(d, i)];
    case DType::f8e4m3: return tables().e4m3[get<std::uint8_t>(d, i)];
    case DType::f8e5m2: return tables().e5m2[get<std::uint8_t>(d, i)];
    case DType::i64: return static_cast<double>(get<std::int64_t>(d, i));
    case DType::i32: return get<std::int32_t>(d, i);
    case DType::i8: return get<std::int8_t>(d, i);
    case DType::u8: return get<std::uint8_t>(d, i);
    case DType::boolean: return get<std::uint8_t>(d, i) ? 1.0 : 0.0;
  }
  return 0;
}

void store_element(DType t, void* d, std::int64_t i, double v) noexcept {
  switch (t) {
    case DType::f64: put<double>(d, i, v); break;
    case DType::f32: put<float>(d, i, static_cast<float>(v)); break;
    case DType::bf16: put<std::uint16_t>(d, i, detail::encode_bf16(v)); break;
    case DType::f16: put<std::uint16_t>(d, i, detail::encode_f16(v)); break;
    case DType::f8e4m3: put<std::uint8_t>(d, i, static_cast<std::uint8_t>(encode(v, kE4M3))); break;
    case DType::f8e5m2: put<std::uint8_t>(d, i, static_cast<std::uint8_t>(encode(v, kE5M2))); break;
    case DType::i64: put<std::int64_t>(d, i, static_cast<std::int64_t>(v)); break;
    case DType::i32: put<std::int32_t>(d, i, static_cast<std::int32_t>(v)); break;
    case DType::i8: put<std::int8_t>(d, i, static_cast<std::int8_t>(v)); break;
    case DType::u8: put<std::uint8_t>(d, i, static_cast<std::uint8_t>(v)); break;
    case DType::boolean: put<std::uint8_t>(d, i, v != 0 ? 1 : 0); break;
  }
}

void reduce_into(DType t, ReduceOp op, void* acc, const void* x, std::int64_t n) noexcept {
  switch (t) {
    case DType::f64: reduce_native<double>(op, acc, x, n); return;
    case DType::f32: reduce_native<float>(op, acc, x, n); return;
    case DType::i64: reduce_native<std::int64_t>(op, acc, x, n); return;
    case DType::i32: reduce_native<std::int32_t>(op, acc, x, n); return;
    case DType::i8: reduce_native<std::int8_t>(op, acc, x, n); return;
    case DType::u8: reduce_native<std::uint8_t>(op, acc, x, n); return;
    case DType::boolean:
      for (std::int64_t k = 0; k < n; ++k) {
        const bool a = get<std::uint8_t>(acc, k) != 0, b = get<std::uint8_t>(x, k) != 0;
        const bool r = op == ReduceOp::max || op == ReduceOp::sum || op == ReduceOp::avg ? (a || b) : (a && b);
        put<std::uint8_t>(acc, k, r ? 1 : 0);
      }
      return;
    default:  // 16- and 8-bit floats: compute in double, round once per reduction step
      for (std::int64_t k = 0; k < n; ++k)
        store_element(t, acc, k, apply<double>(op, load_element(t, acc, k), load_element(t, x, k)));
      return;
  }
}

void finish_average(DType t, void* acc, std::int64_t n, std::int64_t members) noexcept {
  for (std::int64_t k = 0; k < n; ++k) {
    switch (t) {
      case DType::i64: put<std::int64_t>(acc, k, get<std::int64_t>(acc, k) / members); break;
      case DType::i32: put<std::int32_t>(acc, k, static_cast<std::int32_t>(get<std::int32_t>(acc, k) / members)); break;
      case DType::i8: put<std::int8_t>(acc, k, static_cast<std::int8_t>(get<std::int8_t>(acc, k) / members)); break;
      case DType::u8: put<std::uint8_t>(acc, k, static_cast<std::uint8_t>(get<std::uint8_t>(acc, k) / members)); break;
      case DType::boolean: break;
      default: store_element(t, acc, k, load_element(t, acc, k) / static_cast<double>(members)); break;
    }
  }
}

double identity_of(ReduceOp op) noexcept { return op == ReduceOp::product ? 1.0 : 0.0; }

std::int64_t simulation_modulus(DType t, std::int64_t mesh_ranks) noexcept {
  // f32 and i32: the index modulo 2^24 (2^31) divided by the next power of two >= 2 * ranks, so
  // that a Partial(sum/avg) reduction over the mesh (whose seeded contributions sum to at most
  // ranks * (value + mesh dims)) stays exact in the dtype
  int shift = 1;
  while (shift < 20 && (std::int64_t{1} << shift) < 2 * mesh_ranks) ++shift;
  switch (t) {
    case DType::f32: return std::int64_t{1} << (24 - std::min(shift, 20));
    case DType::i32: return std::int64_t{1} << (31 - std::min(shift, 20));
    default: return 0;  // the other dtypes: a fixed modulus (below) or none
  }
}

double simulation_value(DType t, std::int64_t index, std::int64_t mesh_ranks) noexcept {
  switch (t) {
    case DType::f32: case DType::i32: return static_cast<double>(index % simulation_modulus(t, mesh_ranks));
    case DType::f8e4m3: return static_cast<double>(index % 16);
    case DType::f8e5m2: return static_cast<double>(index % 8);
    case DType::bf16: case DType::f16: case DType::u8: return static_cast<double>(index % 256);
    case DType::i8: return static_cast<double>(index % 128);
    case DType::boolean: return static_cast<double>(index % 2);
    default: return static_cast<double>(index);
  }
}

}  // namespace dtensor

#pragma once
// Exact, fast rounding of a double to bf16 and f16 (round to nearest even, the reference codec's
// rounding: tests/test_values.cpp checks them bit for bit). Inline for the reduction loops.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace dtensor::detail {

inline std::uint32_t float_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
inline float bits_float(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// double -> float rounding to odd: rounding the result once more (to bf16 or f16, which have far
// fewer bits) then gives exactly the correctly rounded result of the double.
inline float to_float_odd(double d) {
  const float f = static_cast<float>(d);
  if (static_cast<double>(f) == d || std::isnan(d)) return f;
  std::uint32_t b = float_bits(f);
  if (std::isinf(f)) return bits_float((b & 0x80000000u) | 0x7f7fffffu);  // beyond FLT_MAX: odd FLT_MAX
  // truncate toward zero, then force the last bit to 1
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) --b;
  return bits_float(b | 1u);
}

inline std::uint16_t encode_bf16(double d) {
  if (std::isnan(d)) return static_cast<std::uint16_t>((std::signbit(d) ? 0x8000u : 0u) | 0x7fffu);
  const std::uint32_t b = float_bits(to_float_odd(d));
  return static_cast<std::uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);  // RNE; overflow becomes inf
}

inline std::uint16_t encode_f16(double d) {
  if (std::isnan(d)) return static_cast<std::uint16_t>((std::signbit(d) ? 0x8000u : 0u) | 0x7fffu);
  std::uint32_t b = float_bits(to_float_odd(d));
  const std::uint32_t sign = b & 0x80000000u;
  b ^= sign;
  std::uint16_t o;
  if (b >= (127u + 16u) << 23) {  // >= 65536: inf (NaN handled above)
    o = 0x7c00;
  } else if (b < 113u << 23) {  // below 2^-14: subnormal or zero, rounded by a float add
    const std::uint32_t magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    o = static_cast<std::uint16_t>(float_bits(bits_float(b) + bits_float(magic)) - magic);
  } else {
    const std::uint32_t odd = (b >> 13) & 1u;
    b += ((15u - 127u) << 23) + 0xfffu + odd;
    o = static_cast<std::uint16_t>(b >> 13);
  }
  return static_cast<std::uint16_t>(o | (sign >> 16));
}

}  // namespace dtensor::detail

#pragma once
// The arithmetic of the device reduction kernels and the reference minifloat codec, written once
// for the device and the host: the kernels (nccl/kernels.cu) compile it with nvcc, the CPU's
// reference codec (scalar.cpp) is this one, and the host tests compare the kernels' reduction bit
// for bit with the CPU executor's (Memory::reduce, host_memory()), exhaustively for fp8. The rule is the CPU's: widen every member to double, reduce in
// member order, divide once for avg, round once to the dtype (round to nearest even).
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define DTENSOR_HD __host__ __device__
#else
#define DTENSOR_HD
#endif

namespace dtensor::reduce_math {

// A binary float format: `e` exponent bits, `m` mantissa bits; `fn`: e4m3fn style (no
// infinities, saturating, NaN = all ones).
struct Format {
  int e, m;
  bool fn;
};
inline constexpr Format kBF16{8, 7, false}, kF16{5, 10, false}, kE4M3{4, 3, true}, kE5M2{5, 2, false};

DTENSOR_HD inline double decode(std::uint32_t bits, Format f) {
  const int bias = (1 << (f.e - 1)) - 1;
  const std::uint32_t man = bits & ((1u << f.m) - 1);
  const std::uint32_t ex = (bits >> f.m) & ((1u << f.e) - 1);
  const bool neg = (bits >> (f.e + f.m)) & 1u;
  const std::uint32_t top = (1u << f.e) - 1;
  double v;
  if (f.fn && ex == top && man == (1u << f.m) - 1) return NAN;
  if (!f.fn && ex == top) v = man ? NAN : INFINITY;
  else if (ex == 0) v = std::ldexp(static_cast<double>(man), 1 - bias - f.m);
  else v = std::ldexp(1.0 + std::ldexp(static_cast<double>(man), -f.m), static_cast<int>(ex) - bias);
  return neg ? -v : v;
}

DTENSOR_HD inline std::uint32_t encode(double x, Format f) {
  const int bias = (1 << (f.e - 1)) - 1;
  const std::uint32_t top = (1u << f.e) - 1;
  const std::uint32_t sign = std::signbit(x) ? 1u << (f.e + f.m) : 0u;
  const std::uint32_t man_max = (1u << f.m) - 1;
  if (std::isnan(x)) return sign | (top << f.m) | man_max;
  const double a = std::fabs(x);
  if (a == 0) return sign;
  const std::uint32_t max_bits = f.fn ? ((top << f.m) | (man_max - 1)) : (((top - 1) << f.m) | man_max);
  if (std::isinf(x)) return f.fn ? sign | max_bits : sign | (top << f.m);
  int e = 0;
  (void)std::frexp(a, &e);
  int ex = e - 1 + bias;
  std::uint64_t man;
  if (ex >= 1) {  // scaling by powers of two is exact: rint rounds the exact mantissa (to even)
    man = static_cast<std::uint64_t>(std::rint((std::ldexp(a, -(e - 1)) - 1.0) * std::ldexp(1.0, f.m)));
    if (man > man_max) {
      man = 0;
      ++ex;
    }
  } else {
    man = static_cast<std::uint64_t>(std::rint(std::ldexp(a, bias - 1 + f.m)));
    ex = 0;
    if (man > man_max) {
      man = 0;
      ex = 1;
    }
  }
  const std::uint32_t bits = (static_cast<std::uint32_t>(ex) << f.m) | static_cast<std::uint32_t>(man);
  if (static_cast<std::uint32_t>(ex) > top || bits > max_bits) return f.fn ? sign | max_bits : sign | (top << f.m);
  return sign | bits;
}

// dtensor::ReduceOp values: sum 0, avg 1, max 2, min 3, product 4.
DTENSOR_HD inline double combine(int op, double acc, double x) {
  switch (op) {
    case 2: return acc < x ? x : acc;  // exactly std::max(acc, x) (signed zeros and NaN included)
    case 3: return x < acc ? x : acc;  // exactly std::min(acc, x)
    case 4: return acc * x;
    default: return acc + x;
  }
}

// One element of a narrow-float reduction: members' bit patterns from `bits_of(s)`, s < n.
template <typename BitsOf>
DTENSOR_HD inline std::uint32_t reduce_element(Format f, int op, int n, const BitsOf& bits_of) {
  double acc = decode(bits_of(0), f);
  for (int s = 1; s < n; ++s) acc = combine(op, acc, decode(bits_of(s), f));
  if (op == 1) acc /= static_cast<double>(n);
  return encode(acc, f);
}

// avg's division for f32 and f64, as the CPU executor does it (in double, then rounded once).
DTENSOR_HD inline float average_f32(float sum, long long members) {
  return static_cast<float>(static_cast<double>(sum) / static_cast<double>(members));
}

}  // namespace dtensor::reduce_math

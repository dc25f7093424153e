#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <type_traits>

#include "kernels.cuh"
#include "comm/reduce_math.hpp"

namespace dtensor::cuda {
namespace {

// One vector of V per index (strided_copy.hpp: its offsets); U vectors a thread per round, all
// loaded before any is stored (independent loads in flight). I: the index type (copy_fits_32).
template <typename V, typename I, int U>
__global__ void copy_strided_kernel(char* dst, const char* src, StridedCopy c, I per_run, I total) {
  const I stride = static_cast<I>(gridDim.x) * blockDim.x;
  for (I t = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += stride * U) {
    V v[U];
    std::int64_t doff[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const I x = t + static_cast<I>(u) * stride;
      if (x >= total) break;
      std::int64_t soff = 0;
      copy_vector_offsets<I>(c, x, per_run, static_cast<int>(sizeof(V)), doff[u], soff);
      v[u] = *reinterpret_cast<const V*>(src + soff);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (t + static_cast<I>(u) * stride >= total) break;
      *reinterpret_cast<V*>(dst + doff[u]) = v[u];
    }
  }
}

template <int N>
__global__ void fill_kernel(unsigned char* dst, std::uint64_t pattern, std::int64_t count) {
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < count;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
#pragma unroll
    for (int b = 0; b < N; ++b) dst[t * N + b] = static_cast<unsigned char>(pattern >> (8 * b));
}

// (the launches below use kCopyThreads = 256 threads a block)
unsigned blocks_for(std::int64_t n) { return static_cast<unsigned>(launch_blocks(n)); }

// Element access through float for the narrow float types; native arithmetic otherwise.
template <typename T> struct Arith {
  using acc = T;
  __device__ static acc load(T v) { return v; }
  __device__ static T store(acc v) { return v; }
};
template <> struct Arith<__nv_bfloat16> {
  using acc = float;
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};
template <> struct Arith<__half> {
  using acc = float;
  __device__ static float load(__half v) { return __half2float(v); }
  __device__ static __half store(float v) { return __float2half_rn(v); }
};
template <> struct Arith<__nv_fp8_e4m3> {
  using acc = float;
  __device__ static float load(__nv_fp8_e4m3 v) { return static_cast<float>(v); }
  __device__ static __nv_fp8_e4m3 store(float v) { return __nv_fp8_e4m3(v); }
};
template <> struct Arith<__nv_fp8_e5m2> {
  using acc = float;
  __device__ static float load(__nv_fp8_e5m2 v) { return static_cast<float>(v); }
  __device__ static __nv_fp8_e5m2 store(float v) { return __nv_fp8_e5m2(v); }
};

// dtensor::ReduceOp values: sum 0, avg 1, max 2, min 3, product 4.
template <typename T>
__global__ void reduce_kernel(T* acc, const T* x, int op, std::int64_t n) {
  using A = Arith<T>;
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const auto a = A::load(acc[t]), b = A::load(x[t]);
    typename A::acc r = a;
    switch (op) {
      case 0: case 1: r = a + b; break;
      case 2: r = a > b ? a : b; break;
      case 3: r = a < b ? a : b; break;
      case 4: r = a * b; break;
    }
    acc[t] = A::store(r);
  }
}

__global__ void reduce_bool_kernel(unsigned char* acc, const unsigned char* x, int op, std::int64_t n) {
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const bool a = acc[t] != 0, b = x[t] != 0;
    acc[t] = (op == 3 || op == 4) ? (a && b) : (a || b);
  }
}

template <typename T>
__global__ void average_kernel(T* acc, std::int64_t members, std::int64_t n) {
  using A = Arith<T>;
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (std::is_same_v<T, float>)  // in double, rounded once: the CPU executor's bits
      acc[t] = reduce_math::average_f32(acc[t], members);
    else
      acc[t] = A::store(A::load(acc[t]) / static_cast<typename A::acc>(members));
  }
}

// Narrow floats (bf16, f16, fp8): every member widened to double, reduced in member order,
// divided once for avg, rounded once (reduce_math.hpp, the CPU executor's rule).
template <typename Bits>
__global__ void reduce_members_kernel(Bits* out, Members in, int n, reduce_math::Format f, int op, std::int64_t count) {
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < count;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[t] = static_cast<Bits>(reduce_math::reduce_element(
        f, op, n, [&](int s) { return static_cast<std::uint32_t>(static_cast<const Bits*>(in.p[s])[t]); }));
}

template <template <typename> class F, typename... Args>
cudaError_t dispatch(int dtype, Args... args) {
  // dtensor::DType values: f64 0, f32 1, bf16 2, f16 3, f8e4m3 4, f8e5m2 5, i64 6, i32 7, i8 8, u8 9, bool 10
  switch (dtype) {
    case 0: return F<double>::run(args...);
    case 1: return F<float>::run(args...);
    case 2: return F<__nv_bfloat16>::run(args...);
    case 3: return F<__half>::run(args...);
    case 4: return F<__nv_fp8_e4m3>::run(args...);
    case 5: return F<__nv_fp8_e5m2>::run(args...);
    case 6: return F<long long>::run(args...);
    case 7: return F<int>::run(args...);
    case 8: return F<signed char>::run(args...);
    case 9: return F<unsigned char>::run(args...);
    default: return cudaErrorInvalidValue;
  }
}

template <typename T> struct Reduce {
  static cudaError_t run(int op, void* acc, const void* x, std::int64_t n, cudaStream_t s) {
    reduce_kernel<T><<<blocks_for(n), 256, 0, s>>>(static_cast<T*>(acc), static_cast<const T*>(x), op, n);
    return cudaGetLastError();
  }
};
template <typename T> struct Average {
  static cudaError_t run(void* acc, std::int64_t members, std::int64_t n, cudaStream_t s) {
    average_kernel<T><<<blocks_for(n), 256, 0, s>>>(static_cast<T*>(acc), members, n);
    return cudaGetLastError();
  }
};

}  // namespace

cudaError_t launch_copy_strided(void* dst, const void* src, const StridedCopy& c, cudaStream_t stream) {
  std::int64_t runs = 1;
  for (int k = 0; k < c.ndim; ++k) runs *= c.count[k];
  if (runs == 0 || c.run_bytes == 0) return cudaSuccess;
  const int vec = copy_vector_bytes(c, reinterpret_cast<std::uintptr_t>(dst), reinterpret_cast<std::uintptr_t>(src));
  const std::int64_t per_run = c.run_bytes / vec, total = per_run * runs;
  const auto blocks = static_cast<unsigned>(copy_blocks(total));
  auto go = [&](auto vector) {
    using V = decltype(vector);
    auto* d = static_cast<char*>(dst);
    const auto* s = static_cast<const char*>(src);
    if (copy_fits_32(total))
      copy_strided_kernel<V, std::uint32_t, kCopyUnroll><<<blocks, kCopyThreads, 0, stream>>>(
          d, s, c, static_cast<std::uint32_t>(per_run), static_cast<std::uint32_t>(total));
    else
      copy_strided_kernel<V, std::int64_t, kCopyUnroll><<<blocks, kCopyThreads, 0, stream>>>(d, s, c, per_run, total);
    return cudaGetLastError();
  };
  switch (vec) {
    case 16: return go(int4{});
    case 8: return go(std::uint64_t{});
    case 4: return go(std::uint32_t{});
    case 2: return go(std::uint16_t{});
    default: return go(std::uint8_t{});
  }
}

cudaError_t launch_fill(void* dst, std::uint64_t pattern, int elem_bytes, std::int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  auto* d = static_cast<unsigned char*>(dst);
  switch (elem_bytes) {
    case 1: fill_kernel<1><<<blocks_for(count), 256, 0, stream>>>(d, pattern, count); break;
    case 2: fill_kernel<2><<<blocks_for(count), 256, 0, stream>>>(d, pattern, count); break;
    case 4: fill_kernel<4><<<blocks_for(count), 256, 0, stream>>>(d, pattern, count); break;
    case 8: fill_kernel<8><<<blocks_for(count), 256, 0, stream>>>(d, pattern, count); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_reduce(int dtype, int op, void* acc, const void* x, std::int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (dtype == 10) {
    reduce_bool_kernel<<<blocks_for(count), 256, 0, stream>>>(static_cast<unsigned char*>(acc),
                                                               static_cast<const unsigned char*>(x), op, count);
    return cudaGetLastError();
  }
  return dispatch<Reduce>(dtype, op, acc, x, count, stream);
}

cudaError_t launch_reduce_members(int dtype, int op, void* out, const Members& in, int n, std::int64_t count,
                                  cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (n < 1 || n > kMaxMembers) return cudaErrorInvalidValue;
  switch (dtype) {  // dtensor::DType: bf16 2, f16 3, f8e4m3 4, f8e5m2 5
    case 2:
      reduce_members_kernel<std::uint16_t><<<blocks_for(count), 256, 0, stream>>>(static_cast<std::uint16_t*>(out), in, n,
                                                                                reduce_math::kBF16, op, count);
      break;
    case 3:
      reduce_members_kernel<std::uint16_t><<<blocks_for(count), 256, 0, stream>>>(static_cast<std::uint16_t*>(out), in, n,
                                                                                reduce_math::kF16, op, count);
      break;
    case 4:
      reduce_members_kernel<std::uint8_t><<<blocks_for(count), 256, 0, stream>>>(static_cast<std::uint8_t*>(out), in, n,
                                                                               reduce_math::kE4M3, op, count);
      break;
    case 5:
      reduce_members_kernel<std::uint8_t><<<blocks_for(count), 256, 0, stream>>>(static_cast<std::uint8_t*>(out), in, n,
                                                                               reduce_math::kE5M2, op, count);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_average(int dtype, void* acc, std::int64_t count, std::int64_t members, cudaStream_t stream) {
  if (count == 0 || dtype == 10) return cudaSuccess;
  return dispatch<Average>(dtype, acc, members, count, stream);
}

}  // namespace dtensor::cuda

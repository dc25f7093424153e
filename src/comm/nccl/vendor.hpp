#pragma once
// The NCCL backend's one seam to its vendors: every NCCL call, every CUDA runtime call and every
// kernel launch the backend's host logic (nccl.cpp) makes goes through this table.
// Nothing here needs a CUDA or NCCL header, so the host logic compiles without them. Two
// implementations exist, one linked into each build of the host logic:
//   vendor_cuda.cpp  the real one (CUDA runtime, NCCL, kernels.cu): library dtensor::nccl;
//   tests/fakes/nccl_vendor_cpu.cpp  a CPU stand-in (a test double, so outside src/) that behaves
//                    as NCCL 2.28 does in non-blocking mode and moves data on host memory
//                    between ranks in threads: the CI test's library.
// Result, data type and op values are NCCL's own (ncclResult_t, ncclDataType_t, ncclRedOp_t);
// CUDA error codes are cudaError_t values.
#include <cstddef>
#include <cstdint>

#include "strided_copy.hpp"

namespace dtensor::nccl_vendor {

enum Result : int {
  kSuccess = 0, kUnhandledCudaError = 1, kSystemError = 2, kInternalError = 3, kInvalidArgument = 4,
  kInvalidUsage = 5, kRemoteError = 6, kInProgress = 7
};
enum DataType : int {
  kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5, kFloat16 = 6, kFloat32 = 7, kFloat64 = 8,
  kBfloat16 = 9, kFloat8e4m3 = 10, kFloat8e5m2 = 11
};
enum RedOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };
constexpr int kCudaSuccess = 0;
constexpr int kCudaNotReady = 600;

using Comm = void*;    // ncclComm_t
using Stream = void*;  // cudaStream_t
struct UniqueId {
  char bytes[128];
};

struct Table {
  // NCCL (non-blocking communicators are made with `blocking` false)
  Result (*get_unique_id)(UniqueId* id);
  Result (*comm_init_rank)(Comm* comm, int nranks, const UniqueId& id, int rank, bool blocking);
  Result (*comm_split)(Comm parent, int color, int key, Comm* child, bool blocking);
  Result (*comm_get_async_error)(Comm comm, Result* async);
  Result (*comm_abort)(Comm comm);
  Result (*comm_destroy)(Comm comm);
  Result (*comm_count)(Comm comm, int* n);
  Result (*comm_user_rank)(Comm comm, int* rank);
  Result (*comm_cu_device)(Comm comm, int* device);
  const char* (*error_string)(Result r);
  const char* (*last_error)(Comm comm);
  int (*version)();
  Result (*all_gather)(const void* send, void* recv, std::size_t count, DataType t, Comm c, Stream s);
  Result (*reduce_scatter)(const void* send, void* recv, std::size_t count, DataType t, RedOp op, Comm c, Stream s);
  Result (*all_reduce)(const void* send, void* recv, std::size_t count, DataType t, RedOp op, Comm c, Stream s);
  Result (*send)(const void* buf, std::size_t count, DataType t, int peer, Comm c, Stream s);
  Result (*recv)(void* buf, std::size_t count, DataType t, int peer, Comm c, Stream s);
  Result (*group_start)();
  Result (*group_end)();
  // CUDA runtime
  int (*set_device)(int device);
  int (*get_device)(int* device);
  int (*device_count)(int* n);
  int (*compute_capability_major)(int device, int* major);
  int (*malloc)(void** p, std::size_t bytes);
  int (*free)(void* p);
  int (*copy_h2d_async)(void* dst, const void* src, std::size_t bytes, Stream s);
  int (*copy_d2h)(void* dst, const void* src, std::size_t bytes);  // blocks until the stream's work is done
  int (*copy_d2d_async)(void* dst, const void* src, std::size_t bytes, Stream s);
  int (*stream_query)(Stream s);  // kCudaSuccess, kCudaNotReady or an error
  int (*stream_is_capturing)(Stream s, bool* capturing);
  const char* (*cuda_error_name)(int e);
  const char* (*cuda_error_string)(int e);
  void (*clear_cuda_error)();
  // the device kernels (kernels.cu)
  int (*fill)(void* dst, std::uint64_t pattern, int elem_bytes, std::int64_t count, Stream s);
  int (*copy_strided)(void* dst, const void* src, const cuda::StridedCopy& c, Stream s);
  // the reduction kernels of device memory (dtensor::device_memory); dtype and op are dtensor's
  // DType and ReduceOp values. Narrow floats: out = the n members widened, reduced, rounded once
  // (n <= cuda::kMaxMembers); wide types: acc = op(acc, x) pairwise, then average divides once.
  int (*reduce_members)(int dtype, int op, void* out, const void* const* in, int n, std::int64_t count, Stream s);
  int (*reduce)(int dtype, int op, void* acc, const void* x, std::int64_t count, Stream s);
  int (*average)(int dtype, void* acc, std::int64_t count, std::int64_t members, Stream s);
  int (*stream_synchronize)(Stream s);
};

// The implementation linked with this build of the host logic.
const Table& table();

}  // namespace dtensor::nccl_vendor

// The real vendor table: CUDA runtime, NCCL and dtensor's kernels (vendor.hpp).
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>

#include "kernels.cuh"
#include "vendor.hpp"

namespace dtensor::nccl_vendor {
namespace {

static_assert(sizeof(UniqueId) == sizeof(ncclUniqueId));
static_assert(static_cast<int>(ncclInProgress) == kInProgress && static_cast<int>(ncclInvalidUsage) == kInvalidUsage);
static_assert(static_cast<int>(ncclFloat8e5m2) == kFloat8e5m2 && static_cast<int>(ncclBfloat16) == kBfloat16);
static_assert(static_cast<int>(ncclAvg) == kAvg && static_cast<int>(cudaErrorNotReady) == kCudaNotReady);

Result R(ncclResult_t r) { return static_cast<Result>(r); }
ncclComm_t C(Comm c) { return static_cast<ncclComm_t>(c); }
cudaStream_t S(Stream s) { return static_cast<cudaStream_t>(s); }
ncclDataType_t T(DataType t) { return static_cast<ncclDataType_t>(t); }
ncclRedOp_t O(RedOp o) { return static_cast<ncclRedOp_t>(o); }

ncclConfig_t config_of(bool blocking) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = blocking ? 1 : 0;
  return config;
}

const Table kTable{
    [](UniqueId* id) {
      ncclUniqueId u;
      const auto r = ncclGetUniqueId(&u);
      std::memcpy(id->bytes, &u, sizeof u);
      return R(r);
    },
    [](Comm* comm, int nranks, const UniqueId& id, int rank, bool blocking) {
      ncclUniqueId u;
      std::memcpy(&u, id.bytes, sizeof u);
      ncclConfig_t config = config_of(blocking);
      ncclComm_t c = nullptr;
      const auto r = ncclCommInitRankConfig(&c, nranks, u, rank, &config);
      *comm = c;
      return R(r);
    },
    [](Comm parent, int color, int key, Comm* child, bool blocking) {
      ncclConfig_t config = config_of(blocking);
      // NCCL writes the handle into `child` itself, possibly later (non-blocking parent): pass
      // the caller's slot through, as ncclComm_t* (a void* slot of the same representation)
      return R(ncclCommSplit(C(parent), color, key, reinterpret_cast<ncclComm_t*>(child), &config));
    },
    [](Comm c, Result* async) {
      ncclResult_t a = ncclSuccess;
      const auto r = ncclCommGetAsyncError(C(c), &a);
      *async = R(a);
      return R(r);
    },
    [](Comm c) { return R(ncclCommAbort(C(c))); },
    [](Comm c) { return R(ncclCommDestroy(C(c))); },
    [](Comm c, int* n) { return R(ncclCommCount(C(c), n)); },
    [](Comm c, int* r) { return R(ncclCommUserRank(C(c), r)); },
    [](Comm c, int* d) { return R(ncclCommCuDevice(C(c), d)); },
    [](Result r) { return ncclGetErrorString(static_cast<ncclResult_t>(r)); },
    [](Comm c) { return ncclGetLastError(C(c)); },
    [] {
      int v = 0;
      ncclGetVersion(&v);
      return v;
    },
    [](const void* send, void* recv, std::size_t count, DataType t, Comm c, Stream s) {
      return R(ncclAllGather(send, recv, count, T(t), C(c), S(s)));
    },
    [](const void* send, void* recv, std::size_t count, DataType t, RedOp op, Comm c, Stream s) {
      return R(ncclReduceScatter(send, recv, count, T(t), O(op), C(c), S(s)));
    },
    [](const void* send, void* recv, std::size_t count, DataType t, RedOp op, Comm c, Stream s) {
      return R(ncclAllReduce(send, recv, count, T(t), O(op), C(c), S(s)));
    },
    [](const void* buf, std::size_t count, DataType t, int peer, Comm c, Stream s) {
      return R(ncclSend(buf, count, T(t), peer, C(c), S(s)));
    },
    [](void* buf, std::size_t count, DataType t, int peer, Comm c, Stream s) {
      return R(ncclRecv(buf, count, T(t), peer, C(c), S(s)));
    },
    [] { return R(ncclGroupStart()); },
    [] { return R(ncclGroupEnd()); },
    [](int d) { return static_cast<int>(cudaSetDevice(d)); },
    [](int* d) { return static_cast<int>(cudaGetDevice(d)); },
    [](int* n) { return static_cast<int>(cudaGetDeviceCount(n)); },
    [](int d, int* major) { return static_cast<int>(cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, d)); },
    [](void** p, std::size_t bytes) { return static_cast<int>(cudaMalloc(p, bytes)); },
    [](void* p) { return static_cast<int>(cudaFree(p)); },
    [](void* dst, const void* src, std::size_t bytes, Stream s) {
      return static_cast<int>(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, S(s)));
    },
    [](void* dst, const void* src, std::size_t bytes) {
      return static_cast<int>(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    },
    [](void* dst, const void* src, std::size_t bytes, Stream s) {
      return static_cast<int>(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, S(s)));
    },
    [](Stream s) { return static_cast<int>(cudaStreamQuery(S(s))); },
    [](Stream s, bool* capturing) {
      cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
      const auto e = cudaStreamIsCapturing(S(s), &st);
      *capturing = st != cudaStreamCaptureStatusNone;
      return static_cast<int>(e);
    },
    [](int e) { return cudaGetErrorName(static_cast<cudaError_t>(e)); },
    [](int e) { return cudaGetErrorString(static_cast<cudaError_t>(e)); },
    [] { (void)cudaGetLastError(); },
    [](void* dst, std::uint64_t pattern, int elem_bytes, std::int64_t count, Stream s) {
      return static_cast<int>(cuda::launch_fill(dst, pattern, elem_bytes, count, S(s)));
    },
    [](void* dst, const void* src, const cuda::StridedCopy& c, Stream s) {
      return static_cast<int>(cuda::launch_copy_strided(dst, src, c, S(s)));
    },
    [](int dtype, int op, void* out, const void* const* in, int n, std::int64_t count, Stream s) {
      cuda::Members m;
      for (int k = 0; k < n && k < cuda::kMaxMembers; ++k) m.p[k] = in[k];
      return static_cast<int>(cuda::launch_reduce_members(dtype, op, out, m, n, count, S(s)));
    },
    [](int dtype, int op, void* acc, const void* x, std::int64_t count, Stream s) {
      return static_cast<int>(cuda::launch_reduce(dtype, op, acc, x, count, S(s)));
    },
    [](int dtype, void* acc, std::int64_t count, std::int64_t members, Stream s) {
      return static_cast<int>(cuda::launch_average(dtype, acc, count, members, S(s)));
    },
    [](Stream s) { return static_cast<int>(cudaStreamSynchronize(S(s))); },
};

}  // namespace

const Table& table() { return kTable; }

}  // namespace dtensor::nccl_vendor

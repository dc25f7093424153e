#pragma once
// Foreign errors are translated here, once: the operation, the group, NCCL's/CUDA's own words.
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "dtensor/error.hpp"
#include <fmt/format.h>

namespace dtensor::detail {

[[noreturn]] inline void throw_cuda(cudaError_t e, const std::string& what) {
  throw BackendError(fmt::format("{}: CUDA error {} ({})", what, cudaGetErrorName(e), cudaGetErrorString(e)));
}
inline void cuda_check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw_cuda(e, what);
}
[[noreturn]] inline void throw_nccl(ncclResult_t r, ncclComm_t comm, const std::string& what) {
  const char* last = ncclGetLastError(comm);
  throw BackendError(fmt::format("{}: NCCL error {} ({}){}", what, static_cast<int>(r), ncclGetErrorString(r),
                          last && *last ? fmt::format(": {}", last) : std::string()));
}

inline void check_nccl(ncclResult_t r, ncclComm_t comm, const std::string& what) {
  if (r != ncclSuccess) throw_nccl(r, comm, what);
}

}  // namespace dtensor::detail

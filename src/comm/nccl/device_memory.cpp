// Device memory for the in-process backend on one GPU (dtensor::device_memory): every rank of a
// mesh as device buffers, collectives as device copies and the reduction kernels. Every CUDA call
// and kernel goes through the backend's vendor table (vendor.hpp), so the same code runs on the
// CPU stand-in in the tests (test_nccl_cpu) and on CUDA in dtensor::nccl.
#include <fmt/format.h>

#include "dtensor/error.hpp"
#include "dtensor/nccl.hpp"
#include "dtensor/scalar.hpp"
#include "device_args.hpp"
#include "device_memory.hpp"
#include "vendor.hpp"

namespace dtensor {
namespace {

namespace nv = nccl_vendor;
const nv::Table& V() { return nv::table(); }

void check(int e, const char* what) {
  if (e != nv::kCudaSuccess)
    throw BackendError(fmt::format("{}: CUDA error {} ({})", what, V().cuda_error_name(e), V().cuda_error_string(e)));
}

}  // namespace

namespace nccl_detail {

void* DeviceMemory::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  check(V().malloc(&p, bytes), "device allocation");
  return p;
}
void DeviceMemory::release(void* p) noexcept {
  if (p) (void)V().free(p);
}
void DeviceMemory::upload(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  check(V().copy_h2d_async(dst, src, bytes, stream_), "upload");
  wait();
}
void DeviceMemory::download(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  wait();
  check(V().copy_d2h(dst, src, bytes), "download");
}
void DeviceMemory::wait() { check(V().stream_synchronize(stream_), "stream synchronize"); }
bool DeviceMemory::supports(Collective c, DType dtype, ReduceOp op) const { return reducible(c, dtype, op); }
void DeviceMemory::copy(void* dst, const void* src, std::int64_t bytes) {
  if (bytes <= 0 || dst == src) return;
  check(V().copy_d2d_async(dst, src, static_cast<std::size_t>(bytes), stream_), "device copy");
}
void DeviceMemory::fill(void* dst, DType dtype, std::int64_t count, double value) {
  check(V().fill(dst, cuda::pattern_of(dtype, value), static_cast<int>(itemsize(dtype)), count, stream_), "fill kernel");
}
void DeviceMemory::copy_strided(void* dst, const void* src, std::int64_t run_bytes, std::span<const std::int64_t> count,
                  std::span<const std::int64_t> dst_stride, std::span<const std::int64_t> src_stride) {
  check(V().copy_strided(dst, src, cuda::strided(run_bytes, count, dst_stride, src_stride), stream_), "pack/unpack kernel");
}
void DeviceMemory::reduce(DType dtype, ReduceOp op, void* out, std::span<const void* const> inputs, std::int64_t count) {
  const bool narrow = dtype == DType::bf16 || dtype == DType::f16 || dtype == DType::f8e4m3 || dtype == DType::f8e5m2;
  if (narrow) {  // widened, reduced, rounded once: the CPU executor's bits
    if (inputs.size() > static_cast<std::size_t>(cuda::kMaxMembers))
      throw InputError(fmt::format("a device reduction of {} over {} members: at most {}", to_string(dtype),
                                   inputs.size(), cuda::kMaxMembers));
    check(V().reduce_members(static_cast<int>(dtype), static_cast<int>(op), out, inputs.data(),
                             static_cast<int>(inputs.size()), count, stream_),
          "reduction kernel");
    return;
  }
  // wide types: pairwise in the dtype (as the CPU executor), avg divided once at the end
  copy(out, inputs[0], count * static_cast<std::int64_t>(itemsize(dtype)));
  for (std::size_t s = 1; s < inputs.size(); ++s)
    check(V().reduce(static_cast<int>(dtype), static_cast<int>(op), out, inputs[s], count, stream_), "reduction kernel");
  if (op == ReduceOp::avg)
    check(V().average(static_cast<int>(dtype), out, count, static_cast<std::int64_t>(inputs.size()), stream_),
          "average kernel");
}

}  // namespace nccl_detail

std::shared_ptr<Memory> device_memory(void* stream) { return std::make_shared<nccl_detail::DeviceMemory>(stream); }

}  // namespace dtensor

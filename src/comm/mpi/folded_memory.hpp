#pragma once
// Folded buffers for timing-only runs on SimGrid's SMPI (docs/virtual-cluster.md): every
// allocation of at least DTENSOR_SMPI_FOLD bytes is SMPI_SHARED_MALLOC'd, so that all simulated
// ranks' buffers of one call site share the same few physical pages and 1,024 ranks of GiB-sized
// tensors fit in one host's memory. Their contents are garbage: local operations (copies, fills,
// packing, reductions) that touch a folded buffer are skipped, SMPI moves no payload for them,
// and the MPI reductions over them run a no-op operator (vendor_smpi.cpp). What stays exact is
// the simulated time of the messages. Compiled only into the SMPI build.
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>

#include "dtensor/memory.hpp"

namespace dtensor::mpi_vendor {

class FoldedMemory final : public Memory {
 public:
  explicit FoldedMemory(std::size_t threshold) : threshold_(threshold) {}
  [[nodiscard]] void* allocate(std::size_t bytes) override;
  void release(void* p) noexcept override;
  void upload(void* dst, const void* host_src, std::size_t bytes) override;
  void download(void* host_dst, const void* src, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::int64_t bytes) override;
  void fill(void* dst, DType dtype, std::int64_t count, double value) override;
  void copy_strided(void* dst, const void* src, std::int64_t run_bytes, std::span<const std::int64_t> count,
                    std::span<const std::int64_t> dst_stride, std::span<const std::int64_t> src_stride) override;
  void reduce(DType dtype, ReduceOp op, void* out, std::span<const void* const> inputs, std::int64_t count) override;
  // Whether p points into a folded allocation.
  [[nodiscard]] bool folded(const void* p) const;

 private:
  std::size_t threshold_;
  std::map<std::uintptr_t, std::size_t> folded_;  // start -> bytes (the simulated ranks share one thread)
};

// The SMPI build's memory: host memory, or the folded memory when DTENSOR_SMPI_FOLD=BYTES is set
// (InputError naming the value when it is not a whole number of bytes from 1 to 2^40).
[[nodiscard]] Memory& smpi_memory();
// Whether the SMPI build folds buffers and p is one of them.
[[nodiscard]] bool smpi_folded(const void* p);

}  // namespace dtensor::mpi_vendor

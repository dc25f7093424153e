#pragma once
// Where a backend's buffers live and how it touches them: one interface for the executor's local
// operations (copies, fills, strided packing), the in-process backend's collectives (moves and
// reductions) and the tune library's buffers (allocate, upload, download). Every virtual has a
// host-memory default, so `Memory` itself is host memory (host_memory()); the NCCL backend's
// device memory overrides them with CUDA calls and kernels on its stream.
#include <cstddef>
#include <cstdint>
#include <span>

#include "dtensor/collective.hpp"
#include "dtensor/dtype.hpp"
#include "dtensor/placement.hpp"

namespace dtensor {

class Memory {
 public:
  virtual ~Memory() = default;

  // ---- storage
  // `bytes` of this memory (64-byte aligned on the host; nullptr for 0 bytes). Throws
  // BackendError when it cannot be had.
  [[nodiscard]] virtual void* allocate(std::size_t bytes);
  virtual void release(void* p) noexcept;
  // Host <-> this memory; both return when the bytes have moved.
  virtual void upload(void* dst, const void* host_src, std::size_t bytes);
  virtual void download(void* host_dst, const void* src, std::size_t bytes);
  // Blocks the host until every operation issued on this memory has completed (host: nothing).
  virtual void wait();

  // ---- operations (issued in order; they may complete later, see wait())
  // Whether reductions of `c` on `dtype` with `op` run here (the host reduces every dtype).
  [[nodiscard]] virtual bool supports(Collective c, DType dtype, ReduceOp op) const;
  // `bytes` from src to dst (they may overlap).
  virtual void copy(void* dst, const void* src, std::int64_t bytes);
  virtual void fill(void* dst, DType dtype, std::int64_t count, double value);
  // Strided copy: `count[k]` runs along dims, innermost `run_bytes` contiguous (see Executor).
  virtual void copy_strided(void* dst, const void* src, std::int64_t run_bytes, std::span<const std::int64_t> count,
                            std::span<const std::int64_t> dst_stride, std::span<const std::int64_t> src_stride);
  // out = op over inputs (avg: divided by their number; 16- and 8-bit floats reduced in double and
  // rounded once); `out` may alias no input but the first.
  virtual void reduce(DType dtype, ReduceOp op, void* out, std::span<const void* const> inputs, std::int64_t count);
};

// The process's host memory (stateless: safe from any thread).
[[nodiscard]] Memory& host_memory() noexcept;

}  // namespace dtensor

#pragma once
// Device memory through the backend's vendor table (vendor.hpp): what dtensor::device_memory
// returns (the in-process backend on one GPU) and what NcclCommunicator::memory() builds on.
#include "dtensor/memory.hpp"

namespace dtensor::nccl_detail {

class DeviceMemory : public Memory {
 public:
  explicit DeviceMemory(void* stream) : stream_(stream) {}
  void* allocate(std::size_t bytes) override;
  void release(void* p) noexcept override;
  void upload(void* dst, const void* src, std::size_t bytes) override;  // then wait()
  void download(void* dst, const void* src, std::size_t bytes) override;  // after wait()
  void wait() override;  // synchronizes the stream
  [[nodiscard]] bool supports(Collective c, DType dtype, ReduceOp op) const override;
  void copy(void* dst, const void* src, std::int64_t bytes) override;
  void fill(void* dst, DType dtype, std::int64_t count, double value) override;
  void copy_strided(void* dst, const void* src, std::int64_t run_bytes, std::span<const std::int64_t> count,
                    std::span<const std::int64_t> dst_stride, std::span<const std::int64_t> src_stride) override;
  void reduce(DType dtype, ReduceOp op, void* out, std::span<const void* const> inputs, std::int64_t count) override;

 protected:
  [[nodiscard]] void* stream() const noexcept { return stream_; }

 private:
  void* stream_;
};

}  // namespace dtensor::nccl_detail

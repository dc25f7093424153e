#pragma once
// A buffer of measure/validate in a communicator's memory (dtensor::Memory: host or device).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "dtensor/memory.hpp"

namespace dtensor::tune::detail {

class Buffer {
 public:
  // Zeroed, so that measured reductions never read uninitialised floats.
  Buffer(Memory& m, std::size_t bytes) : m_(m), bytes_(bytes), p_(static_cast<std::byte*>(m.allocate(bytes))) {
    m_.fill(p_, DType::u8, static_cast<std::int64_t>(bytes), 0);
  }
  ~Buffer() { m_.release(p_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  [[nodiscard]] std::byte* data() const noexcept { return p_; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }
  void upload(const std::vector<std::byte>& from) { m_.upload(p_, from.data(), from.size()); }
  [[nodiscard]] std::vector<std::byte> download() const {
    std::vector<std::byte> out(bytes_);
    m_.download(out.data(), p_, bytes_);
    return out;
  }

 private:
  Memory& m_;
  std::size_t bytes_;
  std::byte* p_ = nullptr;
};

}  // namespace dtensor::tune::detail

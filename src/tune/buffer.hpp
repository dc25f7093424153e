#pragma once
// A buffer of measure/validate: host memory, or the backend's (tune::Memory).
#include <cstddef>
#include <cstring>
#include <vector>

#include "dtensor/error.hpp"
#include "dtensor/tune.hpp"

namespace dtensor::tune::detail {

inline void check_memory(const Memory& m) {
  const int set = !!m.allocate + !!m.release + !!m.upload + !!m.download;
  if (set != 0 && set != 4) throw InputError("tune::Memory: give allocate, release, upload and download together, or none");
}

class Buffer {
 public:
  Buffer(const Memory& m, std::size_t bytes) : m_(m), bytes_(bytes) {
    if (m_.allocate) {
      p_ = bytes ? static_cast<std::byte*>(m_.allocate(bytes)) : nullptr;
    } else {
      host_.resize(bytes);
      p_ = host_.data();
    }
  }
  ~Buffer() {
    if (m_.allocate && p_) m_.release(p_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  [[nodiscard]] std::byte* data() const noexcept { return p_; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }
  void upload(const std::vector<std::byte>& from) {
    if (from.empty()) return;
    if (m_.upload) m_.upload(p_, from.data(), from.size());
    else std::memcpy(p_, from.data(), from.size());
  }
  [[nodiscard]] std::vector<std::byte> download() const {
    std::vector<std::byte> out(bytes_);
    if (bytes_ == 0) return out;
    if (m_.download) m_.download(out.data(), p_, bytes_);
    else std::memcpy(out.data(), p_, bytes_);
    return out;
  }

 private:
  const Memory& m_;
  std::size_t bytes_;
  std::vector<std::byte> host_;
  std::byte* p_ = nullptr;
};

}  // namespace dtensor::tune::detail

// Measuring checkpoint storage (tune_storage.hpp).
#include "dtensor/tune_storage.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "dtensor/error.hpp"
#include "quantile.hpp"

namespace dtensor::tune {
namespace {

constexpr std::size_t kMaxFiles = 4096;

double read_once(const std::string& file, std::int64_t offset, std::int64_t bytes, bool drop, std::vector<char>& buf) {
  if (drop) {
    const int fd = ::open(file.c_str(), O_RDONLY);
    if (fd < 0) throw InputError(fmt::format("cannot open {}", quote_input(file)));
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const int fd = ::open(file.c_str(), O_RDONLY);
  if (fd < 0) throw InputError(fmt::format("cannot open {}", quote_input(file)));
  std::int64_t done = 0;
  while (done < bytes) {
    const auto n = ::pread(fd, buf.data() + done, static_cast<std::size_t>(bytes - done), offset + done);
    if (n <= 0) {
      ::close(fd);
      throw InputError(fmt::format("{}: read {} of {} bytes at offset {}", quote_input(file), done, bytes, offset));
    }
    done += n;
  }
  ::close(fd);
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::vector<std::string> storage_files(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(path, ec);
  std::vector<std::string> out;
  if (!ec && fs::is_regular_file(st)) {
    out.push_back(path);
  } else if (!ec && fs::is_directory(st)) {
    for (const auto& e : fs::directory_iterator(path, ec)) {
      if (e.is_regular_file(ec)) out.push_back(e.path().string());
      if (out.size() > kMaxFiles) throw InputError(fmt::format("{} holds more than {} files", quote_input(path), kMaxFiles));
    }
    std::sort(out.begin(), out.end());
  } else {
    throw InputError(fmt::format("{} is neither a regular file nor a directory", quote_input(path)));
  }
  if (out.empty()) throw InputError(fmt::format("{} holds no regular file to read", quote_input(path)));
  return out;
}

std::vector<StorageSample> measure_storage(std::span<const std::string> files, const StorageOptions& o) {
  if (o.repeats < 1 || o.repeats > 1000) throw InputError(fmt::format("repeats {}: 1 to 1000", o.repeats));
  std::vector<std::int64_t> sizes = o.sizes;
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  if (sizes.size() < 2) throw InputError("the storage fit needs at least two distinct read sizes");
  std::vector<std::pair<std::string, std::int64_t>> sized;
  for (const auto& f : files) {
    std::error_code ec;
    const auto n = std::filesystem::file_size(f, ec);
    if (!ec) sized.emplace_back(f, static_cast<std::int64_t>(n));
  }
  std::vector<StorageSample> out;
  std::vector<char> buf;
  std::map<std::string, std::int64_t> next;  // per file, where the next read starts
  for (const auto bytes : sizes) {
    if (bytes < 1 || bytes > (std::int64_t{1} << 34)) throw InputError(fmt::format("read size {}: 1 B to 16 GiB", bytes));
    std::vector<const std::pair<std::string, std::int64_t>*> fit;
    for (const auto& s : sized)
      if (s.second >= bytes) fit.push_back(&s);
    if (fit.empty())
      throw InputError(fmt::format("no file holds {} bytes (the largest has {}); give smaller --sizes or larger files", bytes,
                                   sized.empty() ? 0 : std::max_element(sized.begin(), sized.end(), [](auto& a, auto& b) {
                                     return a.second < b.second;
                                   })->second));
    buf.resize(static_cast<std::size_t>(bytes));
    for (int i = 0; i < o.repeats; ++i) {
      const auto& [file, size] = *fit[static_cast<std::size_t>(i) % fit.size()];
      std::int64_t& at = next[file];
      if (at + bytes > size) at = 0;
      out.push_back({bytes, read_once(file, at, bytes, o.drop_cache, buf), file});
      at += bytes;
    }
  }
  return out;
}

std::vector<StorageSize> storage_medians(std::span<const StorageSample> samples) {
  std::map<std::int64_t, std::vector<double>> by;
  for (const auto& s : samples) by[s.bytes].push_back(s.us);
  std::vector<StorageSize> out;
  for (auto& [bytes, us] : by) {
    std::sort(us.begin(), us.end());
    out.push_back({bytes, us.size(), detail::quantile(us, 0.5)});
  }
  return out;
}

StorageParams fit_storage(std::span<const StorageSample> samples) {
  const auto sizes = storage_medians(samples);
  if (sizes.size() < 2) throw InputError("the storage fit needs samples of at least two sizes");
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double n = static_cast<double>(sizes.size());
  for (const auto& s : sizes) {
    const double x = static_cast<double>(s.bytes), y = s.median_us;
    sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  const double den = n * sxx - sx * sx;
  double slope = den > 0 ? (n * sxy - sx * sy) / den : 0;  // us per byte
  slope = std::clamp(slope, 1.0 / (1e6 * 1e3), 1.0 / (1e-3 * 1e3));
  const double alpha = std::clamp((sy - slope * sx) / n, 0.0, 1e6);
  return {1.0 / (slope * 1e3), alpha};
}

}  // namespace dtensor::tune

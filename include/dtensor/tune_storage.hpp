#pragma once
// Measuring the storage a checkpoint load reads from (docs/checkpoint.md, `dtensor tune storage`):
// timed reads of several sizes from existing files, each file's pages dropped from the page cache
// first (posix_fadvise DONTNEED), fitted to the profile's storage field (CostModel::storage):
// time_us = read_alpha_us + bytes / read_bw_GBps. Run only on request; plans read the profile.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dtensor/cost_model.hpp"

namespace dtensor::tune {

struct StorageSample {
  std::int64_t bytes = 0;
  double us = 0;  // open, read `bytes` from an offset, close
  std::string file;
};

struct StorageOptions {
  std::vector<std::int64_t> sizes{64 << 10, 1 << 20, 16 << 20};
  int repeats = 3;
  bool drop_cache = true;  // posix_fadvise(DONTNEED) on the file before each read
};

// The regular files of `path` (itself, or a directory's, not recursive, in name order; at most
// 4096). InputError when there are none or `path` is neither.
[[nodiscard]] std::vector<std::string> storage_files(const std::string& path);

// `repeats` reads of each size, from the files large enough for it (round robin, each read at a
// fresh offset). InputError naming a size no file holds, or fewer than two sizes.
[[nodiscard]] std::vector<StorageSample> measure_storage(std::span<const std::string> files, const StorageOptions& options);

// Per read size (ascending), how many reads and their median time.
struct StorageSize {
  std::int64_t bytes = 0;
  std::size_t reads = 0;
  double median_us = 0;
};
[[nodiscard]] std::vector<StorageSize> storage_medians(std::span<const StorageSample> samples);

// The least-squares line through the per-size medians (storage_medians), clamped to the profile's bounds
// (bandwidth in [1e-3, 1e6] GB/s, latency in [0, 1e6] us). InputError for fewer than two sizes.
[[nodiscard]] StorageParams fit_storage(std::span<const StorageSample> samples);

}  // namespace dtensor::tune

// Fitting the profile's storage field (tune_storage.hpp): the fit recovers a known line, reads of
// real files give one sample per read, and bad paths and sizes are one clear error.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "dtensor/error.hpp"
#include "dtensor/tune_storage.hpp"

using namespace dtensor;
using Catch::Matchers::Contains;

TEST_CASE("tune storage: the fit recovers the line through the per-size medians", "[tune]") {
  std::vector<tune::StorageSample> s;
  for (std::int64_t bytes : {1 << 16, 1 << 20, 1 << 24})
    for (double noise : {-50.0, 0.0, 1e6})  // one wild outlier per size: the median ignores it
      s.push_back({bytes, 120.0 + static_cast<double>(bytes) / (1.5 * 1e3) + (noise == 1e6 ? noise : 0.0), "f"});
  const StorageParams p = tune::fit_storage(s);
  CHECK(p.read_bw_GBps == Approx(1.5).epsilon(1e-9));
  CHECK(p.read_alpha_us == Approx(120.0).epsilon(1e-9));
  // flat times (a page cache): the bandwidth clamps to the profile's bound, the latency stays
  std::vector<tune::StorageSample> flat{{1024, 10, "f"}, {1 << 20, 10, "f"}};
  CHECK(tune::fit_storage(flat).read_bw_GBps == Approx(1e6));
  CHECK_THROWS_WITH(tune::fit_storage(std::vector<tune::StorageSample>{{1024, 10, "f"}}), Contains("at least two sizes"));
}

TEST_CASE("tune storage: timed reads of real files", "[tune]") {
  const auto dir = std::filesystem::temp_directory_path() / "dtensor_tune_storage_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    std::ofstream a(dir / "a.bin", std::ios::binary), b(dir / "b.bin", std::ios::binary);
    const std::string block(1 << 16, 'x');
    for (int i = 0; i < 8; ++i) a << block;  // 512 KiB
    b << block;                              // 64 KiB
  }
  const auto files = tune::storage_files(dir.string());
  REQUIRE(files.size() == 2);
  CHECK(files[0] < files[1]);
  tune::StorageOptions o;
  o.sizes = {4096, 65536, 262144};
  o.repeats = 3;
  const auto samples = tune::measure_storage(files, o);
  REQUIRE(samples.size() == 9);
  for (const auto& s : samples) CHECK(s.us > 0);
  // 256 KiB only fits a.bin: every read of it comes from there
  for (const auto& s : samples)
    if (s.bytes == 262144) CHECK_THAT(s.file, Contains("a.bin"));
  const StorageParams p = tune::fit_storage(samples);
  CHECK(p.read_bw_GBps > 0);
  CHECK(p.read_alpha_us >= 0);
  o.sizes = {4096, 1 << 20};
  CHECK_THROWS_WITH(tune::measure_storage(files, o), Contains("no file holds 1048576 bytes (the largest has 524288)"));
  o.sizes = {4096};
  CHECK_THROWS_WITH(tune::measure_storage(files, o), Contains("at least two distinct read sizes"));
  CHECK_THROWS_WITH(tune::storage_files((dir / "missing").string()), Contains("neither a regular file nor a directory"));
  std::filesystem::create_directories(dir / "empty");
  CHECK_THROWS_WITH(tune::storage_files((dir / "empty").string()), Contains("no regular file"));
  std::filesystem::remove_all(dir);
}

#!/usr/bin/env bash
# Every test: a Release build with all tests, a Debug build with ASan+UBSan running all tests,
# and a TSan build running the concurrency tests.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
echo "== Release"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest -j"$jobs" --output-on-failure)
echo "== Debug + ASan/UBSan"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDTENSOR_SANITIZE=address,undefined -DDTENSOR_BUILD_BENCH=OFF \
  -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest -j"$jobs" --output-on-failure)
echo "== TSan (concurrency tests)"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DDTENSOR_SANITIZE=thread -DDTENSOR_BUILD_BENCH=OFF \
  -DDTENSOR_BUILD_EXAMPLES=OFF -DDTENSOR_BUILD_TOOLS=OFF -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" >/dev/null
cmake --build build-tsan -j"$jobs" --target dtensor_tests
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest -R '^cache$' --output-on-failure)

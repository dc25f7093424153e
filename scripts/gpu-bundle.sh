#!/usr/bin/env bash
# The GPU check, step 1 of 2 (docs/executor.md, "On a GPU machine"): on a CPU machine with CUDA
# and NCCL installed, build the CUDA targets for sm_80, sm_90 and sm_100 and pack one
# self-contained folder for a GPU machine that has no package access:
#   bin/      dtensor_gpu_tests, bench_gpu, spmd_redistribute, dtensor (the CLI)
#   lib/      the non-system shared libraries they need (NCCL and the driver excluded: run.sh
#             uses the GPU machine's own NCCL, e.g. PyTorch's nvidia-nccl-cu13 wheel, or NCCL_LIB=)
#   python/   the Python package's source, and deps/ the headers, CMake configs and libfmt it
#             builds against (fmt, nlohmann-json, the Boost headers it includes), so
#             `pip install` works there with the machine's nanobind and scikit-build-core
#   checks/   the Python checks run.sh runs (scripts/gpu_python_check.py, scripts/gpu_weight_sync_check.py,
#             bench/python_redistribute.py)
#   run.sh    step 2: runs everything and prints the summary table
# Usage: scripts/gpu-bundle.sh [OUT]   (OUT defaults to build-gpu-bundle, an ignored folder)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${1:-build-gpu-bundle}
build=${GPU_BUNDLE_BUILD:-build-bundle}
archs=${GPU_BUNDLE_ARCHS:-80;90;100}
jobs=$(nproc)

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDTENSOR_CUDA=ON -DDTENSOR_MPI=OFF -DDTENSOR_INSTALL=OFF \
  "-DCMAKE_CUDA_ARCHITECTURES=$archs" >"$build.configure.log" 2>&1 ||
  { echo "gpu-bundle: configure failed (CUDA and NCCL installed?); see $build.configure.log" >&2; exit 2; }
cmake --build "$build" -j"$jobs" --target dtensor_gpu_tests bench_gpu spmd_redistribute dtensor_cli

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/python" "$out/deps/include" "$out/deps/lib"
cp "$build/tests/dtensor_gpu_tests" "$build/bench/bench_gpu" "$build/examples/spmd_redistribute" "$out/bin/"
cp "$build/dtensor" "$out/bin/dtensor"
strip --strip-unneeded "$out"/bin/* 2>/dev/null || true

# Shared libraries: everything ldd resolves outside the base system, but never NCCL or the driver.
system_lib='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so'
for b in "$out"/bin/*; do
  ldd "$b" | awk '/=> \//{print $1, $3}'
done | sort -u | while read -r name path; do
  case "$name" in libnccl*|libcuda.so*) continue ;; esac
  if [[ "$name" =~ $system_lib ]]; then continue; fi
  cp -L "$path" "$out/lib/$name"
done

# The Python package's source and what it builds against.
tar -C "$root" -cf - pyproject.toml README.md LICENSE CMakeLists.txt cmake include src tools python | tar -C "$out/python" -xf -
cp -r /usr/include/fmt /usr/include/nlohmann "$out/deps/include/"
arch_dir=lib/$(gcc -print-multiarch)
mkdir -p "$out/deps/$arch_dir/cmake" "$out/deps/share/cmake"
cp -r "/usr/$arch_dir/cmake/fmt" "/usr/$arch_dir/cmake/Boost-"* "/usr/$arch_dir/cmake/boost_headers-"* "$out/deps/$arch_dir/cmake/"
cp -a "/usr/$arch_dir"/libfmt.so* "$out/deps/$arch_dir/"
cp -r /usr/share/cmake/nlohmann_json "$out/deps/share/cmake/"
# the Boost headers the library includes (their closure, from the compiler), plus config/predef,
# which differ by compiler
g++ -std=c++20 -M -MG -Iinclude -Isrc src/placement/*.cpp src/planner/*.cpp src/planner/*/*.cpp src/comm/*.cpp src/tune/*.cpp 2>/dev/null |
  tr ' \\' '\n\n' | grep '^/usr/include/boost/' | sort -u | while read -r h; do
    mkdir -p "$out/deps/include/$(dirname "${h#/usr/include/}")"
    cp "$h" "$out/deps/include/${h#/usr/include/}"
  done
cp -r /usr/include/boost/config /usr/include/boost/predef /usr/include/boost/config.hpp /usr/include/boost/version.hpp \
  "$out/deps/include/boost/" 2>/dev/null || true

mkdir -p "$out/checks"
cp "$root/scripts/gpu_python_check.py" "$root/scripts/gpu_weight_sync_check.py" "$root/bench/python_redistribute.py" "$out/checks/"
cp "$root/scripts/gpu-run.sh" "$out/run.sh"
chmod +x "$out/run.sh"
size=$(du -sm "$out" | cut -f1)
echo "gpu-bundle: $out ($size MiB): $(ls "$out/bin" | tr '\n' ' ')"
if [ "$size" -gt 40 ]; then echo "gpu-bundle: $out is $size MiB, above the 40 MiB limit" >&2; exit 1; fi

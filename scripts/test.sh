#!/usr/bin/env bash
# Every test: the include graph's floors (scripts/include-graph.py), a Release build with all tests, the virtual cluster's
# 16-rank SMPI check (scripts/smpi-check.sh), the Python package's tests (scripts/python-test.sh), a Debug build with ASan+UBSan running all tests,
# a TSan build running the concurrency tests (plan cache, threads backend), and a bounded fuzzing
# run of every parser (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
# A compiler cache when there is one (install-deps.sh installs it): the library's sources compile
# with the same flags in the Release build, the GPU bundle and the Python build, so they compile
# once; a later run on the same machine reuses them. Paths are kept relative to the checkout.
if command -v ccache >/dev/null 2>&1 && [ "${DTENSOR_NO_CCACHE:-0}" != 1 ]; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-4G}"
fi
# GPU tests (label "gpu") need a GPU; everywhere else they are built but not run.
gpu_filter=(-LE gpu)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then gpu_filter=(); fi
# each phase prints its seconds (CI's budget is 60 minutes on 2 cores: say which phase grew)
phase_start=$SECONDS
phase() { echo "   (previous phase: $((SECONDS - phase_start)) s; total $SECONDS s)"; phase_start=$SECONDS; echo "== $*"; }
echo "== Include graph (scripts/include-graph.py: no include runs up the floors; comm and sim use no planner-private header)"
python3 scripts/include-graph.py | tail -n 6
phase "Release (with the NCCL/CUDA backend when CUDA and NCCL are found)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest -j"$jobs" --output-on-failure "${gpu_filter[@]}")
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  # sm_90 only here (the lent GPUs are H100/H200; the script's default adds sm_80 and sm_100 and
  # takes about 3 minutes more on 2 cores)
  phase "GPU bundle (scripts/gpu-bundle.sh: CUDA targets for sm_${GPU_BUNDLE_ARCHS:-90}, packed for a GPU machine)"
  PATH="$PATH:/usr/local/cuda/bin" GPU_BUNDLE_ARCHS="${GPU_BUNDLE_ARCHS:-90}" ./scripts/gpu-bundle.sh
fi
phase "Virtual cluster (scripts/smpi-check.sh: the SMPI build, 16 simulated ranks verified, bad input)"
JOBS="$jobs" ./scripts/smpi-check.sh
phase "Python (the wheel into the torch 2.15 venv, pytest, the torchrun examples, the torch 2.11 checks)"
./scripts/python-test.sh
phase "Debug + ASan/UBSan"
# The exhaustive executor set runs every 20th case here (all of it in Release above). The
# sanitizer builds keep line tables only (-g1): reports still name file and line, and the build
# takes about a third less time than with full debug info.
# (MPI off here: Open MPI's own allocations read as leaks; the MPI runs are in the Release build.)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDTENSOR_SANITIZE=address,undefined -DDTENSOR_BUILD_BENCH=OFF \
  -DDTENSOR_CUDA=OFF -DDTENSOR_MPI=OFF -DCMAKE_CXX_FLAGS_DEBUG="-g1 -O1" >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && DTENSOR_EXHAUSTIVE_STRIDE=20 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest -j"$jobs" --output-on-failure)
phase "TSan (concurrency tests)"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DDTENSOR_SANITIZE=thread -DDTENSOR_BUILD_BENCH=OFF -DDTENSOR_CUDA=OFF -DDTENSOR_MPI=OFF \
  -DDTENSOR_BUILD_EXAMPLES=OFF -DDTENSOR_BUILD_TOOLS=OFF -DCMAKE_CXX_FLAGS_DEBUG="-g1 -O1" >/dev/null
cmake --build build-tsan -j"$jobs" --target dtensor_concurrency_tests dtensor_nccl_cpu_tests
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest -R '^(cache|threads|nccl_cpu)$' --output-on-failure)
phase "Fuzzing (libFuzzer, clang + ASan/UBSan; fixed seed and executions, about 25 s per target)"
./scripts/fuzz.sh
echo "   (previous phase: $((SECONDS - phase_start)) s; total $SECONDS s)"

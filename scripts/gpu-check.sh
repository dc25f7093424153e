#!/usr/bin/env bash
# The GPU check on a GPU machine: bundle when this machine can build the CUDA targets
# (scripts/gpu-bundle.sh: CUDA, NCCL and the Debian build dependencies present), then run the
# bundle's run.sh (every GPU test, the GPU benchmarks against their targets, the NCCL SPMD example,
# the Python package's GPU path; one summary table). A GPU machine without package access runs a
# bundle built elsewhere: copy build-gpu-bundle/ over and run its run.sh (docs/executor.md).
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=${GPU_BUNDLE:-build-gpu-bundle}
if command -v nvcc >/dev/null 2>&1 && dpkg -s libfmt-dev nlohmann-json3-dev libboost-graph-dev catch2 >/dev/null 2>&1; then
  ./scripts/gpu-bundle.sh "$bundle" || { echo "gpu-check: building the bundle failed" >&2; exit 1; }
elif [ ! -x "$bundle/run.sh" ]; then
  echo "gpu-check: cannot build here (nvcc or the Debian build dependencies missing) and no $bundle/run.sh" >&2
  exit 2
fi
exec "$bundle/run.sh"

#!/usr/bin/env bash
# The Python environment the Python tests run in: a venv outside the clone (default
# /opt/dtensor-venv, or $DTENSOR_VENV), so later CI runs on the same machine reuse it, holding
# torch (PyPI), pytest, numpy and the build tools (nanobind, scikit-build-core). Installs only
# what is missing; prints the venv's python.
#
# torch from PyPI is its CUDA build on Linux: `pip install --no-deps torch` plus its pure-Python
# dependencies does not import on a CPU-only machine (libtorch needs the CUDA runtime libraries
# from the nvidia-* wheels, e.g. libcufile.so.0), so the full dependency set is installed
# (about 4.5 GB; the CPU-only wheels are not on PyPI).
set -euo pipefail
venv=${DTENSOR_VENV:-/opt/dtensor-venv}
torch_req=${DTENSOR_TORCH:-torch==2.15.*}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
py="$venv/bin/python"
if ! "$py" -c "import torch, torch.distributed; assert torch.distributed.is_gloo_available()" >/dev/null 2>&1; then
  echo "installing $torch_req into $venv (once per machine)" >&2
  "$py" -m pip install -q --disable-pip-version-check "$torch_req" >&2
fi
if ! "$py" -c "import pytest, numpy, nanobind, scikit_build_core" >/dev/null 2>&1; then
  "$py" -m pip install -q --disable-pip-version-check pytest numpy "nanobind>=2.0" "scikit-build-core>=0.10" >&2
fi
echo "$py"

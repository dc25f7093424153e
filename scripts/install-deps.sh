#!/usr/bin/env bash
# Installs what dtensor needs to build on Debian 12 (run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  build-essential cmake libboost-graph-dev libfmt-dev nlohmann-json3-dev catch2 libcli11-dev python3 \
  libopenmpi-dev openmpi-bin clang ccache libsimgrid-dev >/dev/null
# headless Chromium for the visualizer's browser test
if [ "${DTENSOR_NO_BROWSER:-0}" != 1 ]; then apt-get install -y -qq --no-install-recommends chromium >/dev/null; fi
# the Python tests' venv outside the clone (torch, pytest, nanobind, scikit-build-core), reused
# by later runs on the same machine
if [ "${DTENSOR_NO_PYTHON:-0}" != 1 ]; then "$(dirname "$0")/python-env.sh" >/dev/null; fi

#!/usr/bin/env bash
# Installs what dtensor needs to build on Debian 12 (run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  build-essential cmake libboost-graph-dev libfmt-dev nlohmann-json3-dev catch2 libcli11-dev python3 \
  libopenmpi-dev openmpi-bin clang >/dev/null
# headless Chromium for the visualizer's browser test
if [ "${DTENSOR_NO_BROWSER:-0}" != 1 ]; then apt-get install -y -qq --no-install-recommends chromium >/dev/null; fi

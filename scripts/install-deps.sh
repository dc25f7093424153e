#!/usr/bin/env bash
# Installs what dtensor needs to build on Debian 12 (run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  build-essential cmake libboost-graph-dev libfmt-dev nlohmann-json3-dev catch2 libcli11-dev >/dev/null

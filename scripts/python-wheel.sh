#!/usr/bin/env bash
# Builds the package's wheel into DIR with the test venv's build tools (no build isolation:
# nothing is fetched; the persistent build dir build-python keeps the C++ objects between runs)
# and prints its path. The extension does not link torch, so one wheel serves every torch venv.
#
#   scripts/python-wheel.sh DIR
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] && [ -d "$1" ] || { echo "error: usage: scripts/python-wheel.sh DIR (an existing directory)" >&2; exit 2; }
py=$(./scripts/python-env.sh)
"$py" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w "$1" \
  --config-settings=build-dir=build-python "$(pwd)" >&2
ls "$1"/*.whl

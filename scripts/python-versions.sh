#!/usr/bin/env bash
# The Python tests against each supported torch minor (2.11 to 2.15), each in its own venv:
# /opt/dtensor-venv-<minor> (or $DTENSOR_VENVS/dtensor-venv-<minor>), created on first use by
# scripts/python-env.sh from PyPI (about 4.7 GB and 5-8 minutes each) and reused after; 2.15 is
# the main test venv ($DTENSOR_VENV, default /opt/dtensor-venv). The extension does not link
# torch: it is built once, as a wheel, and installed in every venv (or $DTENSOR_WHEEL is).
#
#   scripts/python-versions.sh                       # every minor, all of tests/python
#   scripts/python-versions.sh 2.11 2.13             # those minors
#   scripts/python-versions.sh 2.11 -- tests/python/test_torch_switch.py   # chosen tests
#   scripts/python-versions.sh 2.13 -- tests/python/test_redistribute_mp.py -k "4-meshes0"  # pytest options
#
# Prints one line per minor (torch's full version and pytest's summary); the logs are in
# $DTENSOR_VERSIONS_LOGS (default /tmp/dtensor-versions). Exits non-zero when any minor fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
minors=()
tests=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then
    shift
    tests=("$@")
    break
  fi
  case "$1" in
    2.11 | 2.12 | 2.13 | 2.14 | 2.15) minors+=("$1") ;;
    *) echo "error: torch minor '$1' is not one of 2.11 2.12 2.13 2.14 2.15" >&2; exit 2 ;;
  esac
  shift
done
[ ${#minors[@]} -gt 0 ] || minors=(2.11 2.12 2.13 2.14 2.15)
if [ ${#tests[@]} -eq 0 ]; then
  tests=("$root/tests/python")
else
  for i in "${!tests[@]}"; do
    case "${tests[$i]}" in /* | -*) ;; *) [ -e "$root/${tests[$i]}" ] && tests[$i]="$root/${tests[$i]}" ;; esac
  done
fi
logs=${DTENSOR_VERSIONS_LOGS:-/tmp/dtensor-versions}
mkdir -p "$logs"

if [ -n "${DTENSOR_WHEEL:-}" ]; then
  wheel=$DTENSOR_WHEEL  # built by the caller (scripts/python-test.sh)
  [ -f "$wheel" ] || { echo "error: DTENSOR_WHEEL '$wheel' is not a file" >&2; exit 2; }
else
  wheels=$(mktemp -d)
  trap 'rm -rf "$wheels"' EXIT
  echo "-- building the wheel once"
  wheel=$(./scripts/python-wheel.sh "$wheels")
fi

status=0
summary=()
for m in "${minors[@]}"; do
  if [ "$m" = 2.15 ]; then
    venv=${DTENSOR_VENV:-/opt/dtensor-venv}
  else
    venv=${DTENSOR_VENVS:-/opt}/dtensor-venv-$m
  fi
  py=$(DTENSOR_VENV="$venv" DTENSOR_TORCH="torch==$m.*" ./scripts/python-env.sh)
  have=$("$py" -c "import torch; print(torch.__version__)")
  case "$have" in
    "$m".*) ;;
    *) echo "error: $venv holds torch $have, not $m" >&2; exit 2 ;;
  esac
  "$py" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall "$wheel"
  echo "-- torch $have: pytest ${tests[*]#$root/}"
  start=$(date +%s)
  if (cd /tmp && "$py" -m pytest -q -p no:cacheprovider -rs "${tests[@]}") >"$logs/python-$m.log" 2>&1; then
    result=$(tail -n 1 "$logs/python-$m.log")
  else
    status=1
    result="FAILED: $(tail -n 1 "$logs/python-$m.log") (log: $logs/python-$m.log)"
    tail -n 60 "$logs/python-$m.log"
  fi
  summary+=("torch $have: $result ($(( $(date +%s) - start )) s)")
done
echo "-- summary"
printf '%s\n' "${summary[@]}"
exit $status

#!/usr/bin/env bash
# Compiled regions, the full set (CI runs a sample: tests/python/test_compiled_mp.py): N random
# pairs (default 120) through a compiled x.redistribute under dtensor.torch.enabled() on gloo
# world 4, against the oracle and equal to eager, plus the graph check, the _StridedShard pair
# torch gets wrong and the TP/SP block's 10 compiled steps. BACKEND: aot_eager (default) or
# inductor (which compiles C++ kernels for CPU: much slower to compile).
#
#   scripts/compiled-check.sh [N] [BACKEND]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
n=${1:-120}
backend=${2:-aot_eager}
case "$n" in '' | *[!0-9]*) echo "error: N '$n' is not a count of pairs" >&2; exit 2 ;; esac
case "$backend" in aot_eager | inductor | eager) ;; *) echo "error: backend '$backend' is not aot_eager, inductor or eager" >&2; exit 2 ;; esac
py=$(./scripts/python-env.sh)
cd /tmp
DTENSOR_COMPILED_PAIRS=$n DTENSOR_COMPILED_BACKEND=$backend \
  "$py" -m pytest -q -p no:cacheprovider -s "$root/tests/python/test_compiled_mp.py" 2>&1 | grep -v "^\[rank[0-9]\]:W"

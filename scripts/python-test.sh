#!/usr/bin/env bash
# The Python tests: builds and installs the package into the test venv (scripts/python-env.sh)
# with `pip install .`, runs pytest on tests/python from outside the source tree (so the
# installed package is what is tested), then the torchrun example on 4 CPU ranks (gloo).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
py=$(./scripts/python-env.sh)
echo "-- pip install . ($py)"
# no build isolation: the build tools are already in the venv (and nothing is fetched twice);
# a persistent build dir keeps the C++ objects between runs
"$py" -m pip install -q --disable-pip-version-check --no-build-isolation \
  --config-settings=build-dir=build-python "$root"
echo "-- pytest"
(cd /tmp && DTENSOR_TORCH_DEFECTS_REPORT=${DTENSOR_TORCH_DEFECTS_REPORT:-} \
  "$py" -m pytest -q -p no:cacheprovider -rs "$root/tests/python")
echo "-- examples/python/fsdp_tp.py on 4 CPU ranks"
out=$(cd /tmp && "$(dirname "$py")/torchrun" --nproc-per-node 4 --master-port 29577 "$root/examples/python/fsdp_tp.py" 2>&1) || {
  echo "$out"; echo "examples/python/fsdp_tp.py failed"; exit 1; }
# ranks print after their checks passed (a failed check exits non-zero); lines of different
# processes may interleave, so count the distinct ranks that reported
reported=$(grep -oE "rank [0-9]+: weight [^:]*: ok" <<<"$out" | sort -u || true)
echo "$reported"
ok=$(grep -c . <<<"$reported" || true)
[ "$ok" = 4 ] || { echo "$out"; echo "examples/python/fsdp_tp.py: $ok of 4 ranks ok"; exit 1; }
echo "-- examples/python/train_fsdp_tp.py on 4 CPU ranks (20 steps torch, 20 with dtensor switched in)"
out=$(cd /tmp && "$(dirname "$py")/torchrun" --nproc-per-node 4 --master-port 29578 "$root/examples/python/train_fsdp_tp.py" 2>&1) || {
  echo "$out"; echo "examples/python/train_fsdp_tp.py failed"; exit 1; }
grep -E "^(losses|largest|time per step|dtensor served|uneven|train_fsdp_tp)" <<<"$out"
grep -q "^train_fsdp_tp: ok" <<<"$out" || { echo "$out"; echo "examples/python/train_fsdp_tp.py: no ok line"; exit 1; }
echo "-- scripts/gpu_python_check.py --device cpu (the GPU bundle's Python check, on gloo world 1)"
out=$(cd /tmp && timeout 300 "$(dirname "$py")/torchrun" --nproc-per-node 1 --master-port 29579 "$root/scripts/gpu_python_check.py" --device cpu 2>&1) || {
  echo "$out"; echo "scripts/gpu_python_check.py failed"; exit 1; }
grep "^RESULT" <<<"$out"

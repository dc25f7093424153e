#!/usr/bin/env bash
# The Python tests: builds the package's wheel and installs it into the test venv
# (scripts/python-env.sh, torch 2.15), runs pytest on tests/python from outside the source tree
# (so the installed package is what is tested), the torchrun examples on 4 CPU ranks (gloo), and
# then the version table, switch and layout tests on torch 2.11 in its own venv (made once per
# machine by scripts/python-versions.sh: about 4.7 GB).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
py=$(./scripts/python-env.sh)
echo "-- the wheel, built once ($py), installed here and in the torch 2.11 venv below"
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
wheel=$(./scripts/python-wheel.sh "$wheels")
"$py" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall "$wheel"
echo "-- pytest"
# the switch's random pairs and the redistribute pairs per world: samples here (scripts/python-versions.sh
# runs 200 and 100 switch pairs per minor; pytest alone runs 160 redistribute pairs per world)
(cd /tmp && DTENSOR_TORCH_DEFECTS_REPORT=${DTENSOR_TORCH_DEFECTS_REPORT:-} \
  DTENSOR_SWITCH_PAIRS=${DTENSOR_SWITCH_PAIRS:-40} DTENSOR_REDISTRIBUTE_PAIRS=${DTENSOR_REDISTRIBUTE_PAIRS:-100} \
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
for w in 4 8; do
  echo "-- examples/python/muon_step.py on $w CPU ranks (owners vs round-robin vs all-gather, against a one-process reference)"
  out=$(cd /tmp && "$(dirname "$py")/torchrun" --nproc-per-node $w --master-port 2958$w "$root/examples/python/muon_step.py" \
        --steps 4 2>&1) || { echo "$out"; echo "examples/python/muon_step.py failed on $w ranks"; exit 1; }
  grep -E "^(Muon step|strategy|owners|round-robin|all-gather|updated)" <<<"$out"
  grep -q "^updated weights equal the one-process reference" <<<"$out" || { echo "$out"; echo "muon_step.py: no equality line"; exit 1; }
done
echo "-- examples/python/weight_sync.py on 8 CPU ranks (trainer FSDP 2 x TP 2 -> 2 engines x TP 2; bf16 and fp8; against two baselines)"
out=$(cd /tmp && "$(dirname "$py")/torchrun" --nproc-per-node 8 --master-port 29580 "$root/examples/python/weight_sync.py" 2>&1) || {
  echo "$out"; echo "examples/python/weight_sync.py failed"; exit 1; }
grep -E "^(weight sync|placement|disjoint|colocated|overlapping)" <<<"$out"
grep -q "^weight_sync: ok" <<<"$out" || { echo "$out"; echo "examples/python/weight_sync.py: no ok line"; exit 1; }
echo "-- scripts/gpu_python_check.py --device cpu (the GPU bundle's Python check, on gloo world 1)"
out=$(cd /tmp && timeout 300 "$(dirname "$py")/torchrun" --nproc-per-node 1 --master-port 29579 "$root/scripts/gpu_python_check.py" --device cpu 2>&1) || {
  echo "$out"; echo "scripts/gpu_python_check.py failed"; exit 1; }
grep "^RESULT" <<<"$out"
echo "-- scripts/gpu_weight_sync_check.py --device cpu (the GPU bundle's weight-sync check, on gloo world 1)"
out=$(cd /tmp && timeout 300 "$(dirname "$py")/torchrun" --nproc-per-node 1 --master-port 29581 "$root/scripts/gpu_weight_sync_check.py" --device cpu 2>&1) || {
  echo "$out"; echo "scripts/gpu_weight_sync_check.py failed"; exit 1; }
grep "^RESULT" <<<"$out"
echo "-- torch 2.11 (the oldest supported minor): the version table, the switch, the layouts, group timeouts,"
echo "   explicit shard orders (compiled sources, leaf gradients, to_local's backward) and the switched backward"
# (the explicit-order and backward checks add about 4 minutes on 2 cores; the other minors:
# scripts/python-versions.sh 2.12 2.13 2.14 -- the same files)
t=$root/tests/python
DTENSOR_WHEEL="$wheel" ./scripts/python-versions.sh 2.11 -- tests/python/test_torch_versions.py \
  tests/python/test_torch_switch.py tests/python/test_layouts_vs_torch.py tests/python/test_torch_groups.py \
  "$t/test_compiled_mp.py::test_compiled_explicit_source_orders" "$t/test_grad_explicit_leaf_mp.py" \
  "$t/test_switch_backward_mp.py::test_switched_backward_agrees_across_ranks[3x2]" \
  "$t/test_grad_order_mp.py::test_gradient_through_to_local_keeps_the_order[1x2]"

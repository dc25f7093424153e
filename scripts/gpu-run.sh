#!/usr/bin/env bash
# The GPU check, step 2 of 2: run.sh of the folder scripts/gpu-bundle.sh packs. Runs on a GPU
# machine with no package access (CUDA driver, Python with PyTorch, nanobind, scikit-build-core;
# NCCL from PyTorch's nvidia-nccl-cu13 wheel or NCCL_LIB=/dir/with/libnccl.so.2): every GPU
# test (the exhaustive set every DTENSOR_EXHAUSTIVE_STRIDE-th case, default 8), the GPU
# benchmarks against their targets, the NCCL SPMD example, the Python package's GPU path (world 1:
# exactness against torch and the global tensor, and per-call time against torch's own
# redistribute: checks/gpu_python_check.py, checks/python_redistribute.py --device cuda), then one
# summary table. The Python part runs first (it is the shortest).
#   GPU_TESTS='GPU: a duplicate*'  run only the Catch2 tests matching these names (no commas in names)
#   OUT=dir                        where the logs go (default ./gpu-run-out)
#   PYTHON_CHECK=0                 leave out the Python part (its build takes a minute)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/gpu-run-out}
mkdir -p "$out"
summary=()
row() { summary+=("$(printf '%-46s %-5s %s' "$1" "$2" "$3")"); }

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "run.sh: no GPU visible (nvidia-smi -L failed)" >&2
  exit 2
fi
gpus=$(nvidia-smi -L | wc -l)
py=${PYTHON:-python3}
# NCCL: NCCL_LIB, else PyTorch's wheel, else the loader's
nccl_dir=${NCCL_LIB:-}
if [ -z "$nccl_dir" ]; then
  nccl_dir=$("$py" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
fi
if [ -z "$nccl_dir" ]; then
  nccl_dir=$(dirname "$(ldconfig -p 2>/dev/null | awk '/libnccl.so.2 /{print $NF; exit}')" 2>/dev/null || true)
fi
export LD_LIBRARY_PATH="$here/lib:${nccl_dir:+$nccl_dir:}${LD_LIBRARY_PATH:-}"
row "GPUs" INFO "$gpus: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); NCCL from ${nccl_dir:-?}"

# The Python package's GPU path: build it here against the bundled headers, then world 1 over NCCL
venv=${PYENV:-$out/pyenv}
if [ "${PYTHON_CHECK:-1}" = 0 ]; then
  row "Python package" SKIP "PYTHON_CHECK=0"
elif CMAKE_PREFIX_PATH="$here/deps" "$py" -m pip install --no-build-isolation --no-deps --no-index --target "$venv" \
     "$here/python" >"$out/python-build.log" 2>&1; then
  export LD_LIBRARY_PATH="$here/deps/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu):$LD_LIBRARY_PATH"
  pyrun() { PYTHONPATH="$venv" MASTER_ADDR=127.0.0.1 MASTER_PORT=$1 RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 LOCAL_WORLD_SIZE=1 \
              timeout 300 "$py" "${@:2}"; }
  if pyrun 29531 "$here/checks/gpu_python_check.py" --device cuda >"$out/python-gpu.log" 2>&1; then
    row "Python dtensor.torch on CUDA (world 1)" PASS "$(grep -o 'RESULT.*' "$out/python-gpu.log" | cut -c8-)"
  else
    row "Python dtensor.torch on CUDA (world 1)" FAIL "$(grep -m1 -E 'FAILED|Error' "$out/python-gpu.log" | cut -c1-160)"
  fi
  # train -> serve weight sync, trainer and engine colocated on the GPU (scripts/gpu_weight_sync_check.py)
  if pyrun 29533 "$here/checks/gpu_weight_sync_check.py" --device cuda >"$out/python-weight-sync.log" 2>&1; then
    row "Python weight sync on CUDA (world 1)" PASS "$(grep -o 'RESULT.*' "$out/python-weight-sync.log" | cut -c8-)"
  else
    row "Python weight sync on CUDA (world 1)" FAIL "$(grep -m1 -E 'FAILED|Error' "$out/python-weight-sync.log" | cut -c1-160)"
  fi
  # per call against torch's own redistribute (bench/python_redistribute.py --device cuda)
  if pyrun 29532 "$here/checks/python_redistribute.py" --device cuda --iters "${PY_BENCH_ITERS:-1000}" \
       >"$out/python-bench.log" 2>&1; then
    row "Python per call vs torch (CUDA, world 1)" INFO "table in $out/python-bench.log"
  else
    row "Python per call vs torch (CUDA, world 1)" FAIL "$(tail -1 "$out/python-bench.log" | cut -c1-160)"
  fi
else
  row "Python package build" FAIL "see $out/python-build.log"
fi

# GPU tests, one line per Catch2 test case
export DTENSOR_EXHAUSTIVE_STRIDE=${DTENSOR_EXHAUSTIVE_STRIDE:-8}
mapfile -t tests < <("$here/bin/dtensor_gpu_tests" --list-test-names-only 2>/dev/null | grep -v '^$' | grep "${GPU_TESTS:-.}")
for t in "${tests[@]}"; do
  log="$out/test-$(echo "$t" | tr -c 'A-Za-z0-9' '_').log"
  start=$(date +%s)
  if timeout "${GPU_TEST_TIMEOUT:-240}" "$here/bin/dtensor_gpu_tests" "$t" >"$log" 2>&1; then
    row "${t:0:46}" PASS "$(( $(date +%s) - start )) s"
  else
    row "${t:0:46}" FAIL "$(grep -m1 -E 'FAILED|with expansion|error' -A2 "$log" | tr '\n' ' ' | cut -c1-120) ($log)"
  fi
done

# GPU benchmarks against their targets
if "$here/bin/bench_gpu" --benchmark_format=json --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
     >"$out/bench-gpu.json" 2>"$out/bench-gpu.err"; then
  "$py" - "$out/bench-gpu.json" >"$out/bench-summary.txt" <<'PY'
import json, sys
# medians by run name without the "/manual_time" a UseManualTime() benchmark's name carries
b = {x["run_name"].removesuffix("/manual_time"): x for x in json.load(open(sys.argv[1]))["benchmarks"]
     if x.get("aggregate_name") == "median"}
def get(n, k): return b.get(n, {}).get(k)
unpack, copy = get("BM_unpack_kernel", "bytes_per_second"), get("BM_memcpy_d2d", "bytes_per_second")
if unpack and copy:
    r = unpack / copy
    print(f"pack/unpack vs D2D memcpy\t{'PASS' if r >= 0.85 else 'MISS'}\t{r:.2f}x ({unpack/1e9:.0f} vs {copy/1e9:.0f} GB/s; target >= 0.85x)")
if copy:
    for run in (2, 4, 8, 16, 64, 256):
        v = get(f"BM_strided_copy/{run}", "bytes_per_second")
        if v:
            print(f"strided copy, {run}-byte runs vs D2D\tINFO\t{v / copy:.2f}x ({v/1e9:.0f} GB/s)")
    for x in b.values():
        if x["run_name"].startswith("BM_reduce/") and x.get("bytes_per_second"):
            print(f"device sum {x.get('label', x['run_name'])} vs D2D\tINFO\t{x['bytes_per_second'] / copy:.2f}x "
                  f"({x['bytes_per_second']/1e9:.0f} GB/s of output)")
us = get("BM_host_overhead_per_step", "us_per_step")
if us is not None:
    print(f"host time per step (eager)\tINFO\t{us * 1e6:.2f} us")  # the inverted rate is in seconds
eager, graph = get("BM_eager", "real_time"), get("BM_graph_replay", "real_time")
if eager and graph:
    print(f"CUDA-graph replay vs eager\t{'PASS' if eager >= 3 * graph else 'MISS'}\t{graph:.1f} vs {eager:.1f} us = {eager/graph:.1f}x (target >= 3x)")
PY
  while IFS=$'\t' read -r a b c; do row "$a" "$b" "$c"; done <"$out/bench-summary.txt"
else
  row "GPU benchmarks" FAIL "see $out/bench-gpu.err"
fi

# The SPMD example over NCCL: one process, one thread per GPU
if "$here/bin/spmd_redistribute" --backend nccl --mesh "$gpus" --shape 4096x1024 --from 'S(0)' --to 'S(1)' --iters 20 \
     >"$out/spmd-nccl.log" 2>&1 &&
   "$here/bin/spmd_redistribute" --backend nccl --mesh "$gpus" --random 200 --seed 9 >>"$out/spmd-nccl.log" 2>&1; then
  note="$(grep -c 'verified=' "$out/spmd-nccl.log") runs verified; $(grep -m1 -o 'time_per_iter_us=[0-9.]*' "$out/spmd-nccl.log")"
  [ "$gpus" -eq 1 ] && note="$note (1 GPU: a 1-rank mesh; multi-rank NCCL unverified)"
  row "spmd_redistribute --backend nccl" PASS "$note"
else
  row "spmd_redistribute --backend nccl" FAIL "$(tail -2 "$out/spmd-nccl.log" | tr '\n' ' ')"
fi

echo
echo "== GPU check summary"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
! grep -q ' FAIL ' "$out/summary.txt"

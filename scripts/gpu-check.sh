#!/usr/bin/env bash
# The GPU check: build with CUDA/NCCL, run every GPU test and benchmark, and the SPMD example over
# NCCL on all visible GPUs; print one summary table. Run it on a machine with a GPU (a 1-GPU
# machine runs a 1-rank mesh: multi-rank NCCL is then unverified, and the summary says so).
# Targets: pack/unpack >= 0.85x cudaMemcpy D2D bandwidth, <= 5 us host time per step, graph
# replay no slower than eager issue.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${GPU_CHECK_OUT:-build-gpu/gpu-check}
mkdir -p "$out"
summary=()
row() { summary+=("$(printf '%-44s %-8s %s' "$1" "$2" "$3")"); }

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no GPU visible (nvidia-smi -L failed); nothing to check" >&2
  exit 2
fi
nvidia-smi -L | tee "$out/gpus.txt"
gpus=$(nvidia-smi -L | wc -l)

# Build dependencies: installed when apt can reach Debian, otherwise they must be on the image.
if ! dpkg -s libfmt-dev nlohmann-json3-dev libboost-graph-dev catch2 >/dev/null 2>&1; then
  DTENSOR_NO_BROWSER=1 ./scripts/install-deps.sh >"$out/install.log" 2>&1 ||
    { echo "gpu-check: build dependencies missing and apt failed (see $out/install.log)" >&2; exit 2; }
fi
if cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DDTENSOR_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=native \
     >"$out/configure.log" 2>&1 && cmake --build build-gpu -j"$(nproc)" >"$out/build.log" 2>&1; then
  row "build (CUDA + NCCL)" PASS "$(grep -o 'NCCL backend enabled.*' "$out/configure.log" | head -1)"
else
  row "build (CUDA + NCCL)" FAIL "see $out/build.log"
  printf '%s\n' "${summary[@]}"
  exit 1
fi

# GPU tests (Catch2, label gpu)
if (cd build-gpu && ctest -L gpu --output-on-failure >"../$out/gpu-tests.log" 2>&1); then
  row "GPU tests (ctest -L gpu)" PASS "$(grep -Eo 'test cases: .*' "$out/gpu-tests.log" | tail -1)"
else
  row "GPU tests (ctest -L gpu)" FAIL "see $out/gpu-tests.log"
fi

# GPU benchmarks
bench=build-gpu/bench/bench_gpu
if [ -x "$bench" ] && "$bench" --benchmark_format=json --benchmark_repetitions=5 \
     --benchmark_report_aggregates_only=true >"$out/bench-gpu.json" 2>"$out/bench-gpu.err"; then
  python3 - "$out/bench-gpu.json" >"$out/bench-summary.txt" <<'PY'
import json, sys
b = {x["name"]: x for x in json.load(open(sys.argv[1]))["benchmarks"] if x.get("aggregate_name") == "median"}
def get(n, k): return b.get(n + "_median", {}).get(k)
bw_unpack, bw_copy = get("BM_unpack_kernel", "bytes_per_second"), get("BM_memcpy_d2d", "bytes_per_second")
us_step = get("BM_host_overhead_per_step", "us_per_step")
eager, graph = get("BM_eager", "real_time"), get("BM_graph_replay", "real_time")
r = bw_unpack / bw_copy if bw_unpack and bw_copy else float("nan")
print(f"pack/unpack vs D2D memcpy\t{'PASS' if r >= 0.85 else 'MISS'}\t{r:.2f}x ({bw_unpack/1e9:.0f} vs {bw_copy/1e9:.0f} GB/s; target >= 0.85x)")
if us_step is not None:
    print(f"host time per step\t{'PASS' if us_step <= 5 else 'MISS'}\t{us_step:.2f} us (target <= 5)")
if eager and graph:
    print(f"CUDA-graph replay vs eager\t{'PASS' if graph <= eager * 1.02 else 'MISS'}\t{graph:.1f} vs {eager:.1f} us (median)")
PY
  while IFS=$'\t' read -r a b c; do row "$a" "$b" "$c"; done <"$out/bench-summary.txt"
else
  row "GPU benchmarks" FAIL "see $out/bench-gpu.err"
fi

# The SPMD example over NCCL: one process, one thread per GPU.
mesh=$gpus
if ./build-gpu/examples/spmd_redistribute --backend nccl --mesh "$mesh" --shape 4096x1024 --from 'S(0)' --to 'S(1)' \
     --iters 20 >"$out/spmd-nccl.log" 2>&1 &&
   ./build-gpu/examples/spmd_redistribute --backend nccl --mesh "$mesh" --random 50 --seed 5 >>"$out/spmd-nccl.log" 2>&1; then
  note=$(grep -m1 -o 'verified=[0-9/]* time_per_iter_us=[0-9.]*' "$out/spmd-nccl.log")
  [ "$gpus" -eq 1 ] && note="$note (1 GPU: a 1-rank mesh; multi-rank NCCL unverified)"
  row "spmd_redistribute --backend nccl ($gpus GPU)" PASS "$note"
else
  row "spmd_redistribute --backend nccl ($gpus GPU)" FAIL "see $out/spmd-nccl.log"
fi

# The cost model against the GPU: tune validate over NCCL (one process per GPU under mpirun).
# Needs the CLI built with MPI; with one GPU it is a 1-rank mesh (local steps only).
if [ -x build-gpu/dtensor ] && command -v mpirun >/dev/null 2>&1; then
  if mpirun --allow-run-as-root --oversubscribe -np "$gpus" ./build-gpu/dtensor tune validate --backend nccl \
       --mesh "$gpus" --shape 8192x4096 --iters 20 --format json >"$out/tune-validate-nccl.json" 2>&1; then
    note=$(python3 -c 'import json,sys; j=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print("; ".join("%s %.1f/%.1f us" % (p["name"], p["predicted_us"], p["measured_us"]) for p in j["plans"]))' \
      "$out/tune-validate-nccl.json")
    [ "$gpus" -eq 1 ] && note="$note(1-rank mesh: multi-rank NCCL timing unverified)"
    row "tune validate --backend nccl" PASS "$note"
  else
    row "tune validate --backend nccl" FAIL "see $out/tune-validate-nccl.json"
  fi
else
  row "tune validate --backend nccl" SKIP "no CLI with MPI in build-gpu (or no mpirun)"
fi

echo
echo "== gpu-check summary ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $gpus GPU(s))"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
! grep -q ' FAIL ' "$out/summary.txt"

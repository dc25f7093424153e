#!/usr/bin/env bash
# CI's check of the virtual cluster (docs/virtual-cluster.md): builds the SMPI targets it needs
# (build-smpi/, smpicxx), runs 16 simulated ranks (2 DGX-H100-like nodes) of spmd_redistribute
# --random, a batch and ragged plans with every rank's output verified, a folded (timing-only)
# run, and the bad input that must stop with one clear error. About a minute on 2 cores after the
# Release build (the library's objects come from the compiler cache; the checks take 10-25 s).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${JOBS:-2}"
if ! command -v smpicxx > /dev/null; then
  echo "error: smpicxx not found (Debian 12: apt-get install libsimgrid-dev; scripts/install-deps.sh does it)" >&2
  exit 2
fi
cmake -S . -B build-smpi -DCMAKE_TOOLCHAIN_FILE=cmake/smpi-toolchain.cmake -DCMAKE_BUILD_TYPE=Release \
  -DDTENSOR_BUILD_TOOLS=OFF > /dev/null  # (a compiler cache through CMAKE_CXX_COMPILER_LAUNCHER, as test.sh sets it)
cmake --build build-smpi -j"$jobs" --target spmd_redistribute spmd_cross_mesh dtensor_platform
run=(scripts/smpi-run.sh --platform dgx-h100 --nodes 2)
fails=0
expect_verified() {  # $1: what; $2: the number of summary lines; stdin: the run's output
  local out n ok
  out="$(cat)"
  n="$(grep -c "verified=" <<< "$out" || true)"
  ok="$(grep -c "verified=\([0-9]*\)/\1" <<< "$out" || true)"
  if [[ "$n" == "$2" && "$ok" == "$2" ]]; then echo "ok: $1 ($n runs, every rank verified)"
  else echo "FAILED: $1 ($ok of $n runs verified, $2 expected)"; echo "$out" | tail -5; fails=$((fails + 1)); fi
}
"${run[@]}" -- spmd_redistribute --backend mpi --mesh 2x8 --random 24 --seed 67 | expect_verified "16 ranks, 24 random pairs" 24
"${run[@]}" -- spmd_redistribute --backend mpi --mesh 2x2x4 --random 8 --seed 68 --ragged | expect_verified "16 ranks, 8 ragged pairs" 8
"${run[@]}" -- spmd_redistribute --backend mpi --mesh 4x4 --random 8 --seed 69 --batch | expect_verified "16 ranks, a batch of 8" 1
"${run[@]}" -- spmd_cross_mesh --backend mpi --random 6 --seed 70 | expect_verified "16 ranks, 6 cross-mesh pairs" 6
"${run[@]}" -- spmd_cross_mesh --backend mpi --random 4 --seed 71 --meshes 2x8,4x2x2 | expect_verified "16 ranks, 4 cross-mesh pairs between two 16-rank meshes" 4
# folded buffers: the same simulated time as the unfolded run (timing only)
plain="$("${run[@]}" -- spmd_redistribute --backend mpi --mesh 2x8 --shape 4096x1024 --from 'S(0)S(1)' --to 'RR' --iters 2)"
# (its outputs are garbage: the example's verification fails, as it must, and is not the point here)
folded="$("${run[@]}" --fold 65536 -- spmd_redistribute --backend mpi --mesh 2x8 --shape 4096x1024 --from 'S(0)S(1)' --to 'RR' --iters 2 2> /dev/null || true)"
t_plain="$(grep -o 'time_per_iter_us=[0-9.]*' <<< "$plain")" t_folded="$(grep -o 'time_per_iter_us=[0-9.]*' <<< "$folded")"
if [[ -n "$t_plain" && "$t_plain" == "$t_folded" ]]; then echo "ok: folded buffers, same simulated time ($t_plain)"
else echo "FAILED: folded '$t_folded' vs plain '$t_plain'"; fails=$((fails + 1)); fi
expect_error() {  # $1: what; $2: text the error names; the rest: the command
  local what="$1" text="$2" out rc
  shift 2
  set +e; out="$("$@" 2>&1 > /dev/null)"; rc=$?; set -e
  if [[ $rc == 2 && "$out" == *"error: "*"$text"* ]]; then echo "ok: $what refused (exit 2)"
  else echo "FAILED: $what: exit $rc, '$(head -c 300 <<< "$out")'"; fails=$((fails + 1)); fi
}
expect_error "an unknown platform" "'dgx-a100'" scripts/smpi-run.sh --platform dgx-a100 --nodes 2 -- spmd_redistribute
expect_error "more ranks than GPUs" "at most 16 ranks" scripts/smpi-run.sh --platform pcie --nodes 2 --ranks 17 -- spmd_redistribute
expect_error "a node count that is no whole pod" "multiple of --pod 16" scripts/smpi-run.sh --platform dgx-h100 --nodes 24 -- spmd_redistribute
expect_error "an oversubscription not dividing the pod" "does not divide" scripts/smpi-run.sh --platform dgx-h100 --nodes 32 --pod 16 --oversub 3 -- spmd_redistribute
expect_error "nodes not a number" "'2x'" scripts/smpi-run.sh --platform dgx-h100 --nodes 2x -- spmd_redistribute
expect_error "a missing program" "not found" scripts/smpi-run.sh --platform dgx-h100 --nodes 2 -- no_such_program
expect_error "a bad fold size" "'-1'" scripts/smpi-run.sh --platform dgx-h100 --nodes 2 --fold -1 -- spmd_redistribute
# the platform plugin itself, loaded by smpirun with a bad environment
printf 'node-0-gpu-0\nnode-0-gpu-1\n' > build-smpi/hosts-2
expect_error "the plugin given a bad DTENSOR_NODES" "DTENSOR_NODES=0x10" env DTENSOR_PLATFORM=dgx-h100 DTENSOR_NODES=0x10 \
  smpirun -np 2 -platform build-smpi/libdtensor_platform.so -hostfile build-smpi/hosts-2 build-smpi/examples/spmd_redistribute
expect_error "a build without the platform plugin" "libdtensor_platform.so not found" scripts/smpi-run.sh --platform dgx-h100 --nodes 2 --build build-smpi/no-such-dir -- spmd_redistribute
# a rank that never joins: SimGrid finds that no rank can progress; the backend names the waiting
# ranks and their calls, and the one not waiting, and exits 4 (never a hang)
set +e
out="$(timeout 120 "${run[@]}" -- spmd_redistribute --backend mpi --mesh 2x8 --shape 64x64 --from 'S(0)S(1)' --to 'RR' --inject-absent 5 --timeout 0.01 2>&1)"
rc=$?
set -e
if [[ $rc == 4 ]] && grep -q "ranks not waiting in a collective or exchange: 5;" <<< "$out"; then echo "ok: an absent rank ends the simulation (exit 4, rank 5 named)"
else echo "FAILED: an absent rank: exit $rc"; echo "$out" | tail -5; fails=$((fails + 1)); fi
[[ $fails == 0 ]] || { echo "$fails virtual-cluster check(s) failed"; exit 1; }
echo "virtual cluster: all checks passed"

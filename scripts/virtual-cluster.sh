#!/usr/bin/env bash
# The model against the simulated cluster (docs/virtual-cluster.md): for each rank count, tune
# validate with the default profile, then tune measure -> tune fit (a profile of the virtual
# cluster) -> tune validate with it, all under scripts/smpi-run.sh, and the table of
# scripts/virtual_cluster_table.py.
#
#   scripts/virtual-cluster.sh [--platform dgx-h100] [--ranks 64,256,1024] [--bytes 64K,4M]
#                              [--sizes 64K:4M] [--out DIR] [--build build-smpi] [--cli build/dtensor]
#
# Meshes: 64 = 8x8, 128 = 2x8x8, 256 = 4x8x8, 512 = 8x8x8, 1024 = 8x16x8 (the last dim of 8
# within a node). Timing-only runs (folded buffers of 64 KiB and up), one round each (the
# simulation is deterministic), one measure iteration. The measured sizes stop at 4 MiB by
# default: SMPI's collective algorithms hold real temporaries on every simulated rank at once
# (measuring up to 16 MiB on 1,024 ranks was killed at 23 GiB resident). Wall time on a 2-core machine: docs/virtual-cluster-results.md.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
platform=dgx-h100 ranks_list=64,256,1024 bytes=64K,4M sizes=64K:4M out=virtual-cluster
build="$here/build-smpi" cli="$here/build/dtensor"
die() { echo "error: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  [[ $# -ge 2 ]] || die "$1 needs a value"
  case "$1" in
    --platform) platform="$2" ;;
    --ranks) ranks_list="$2" ;;
    --bytes) bytes="$2" ;;
    --sizes) sizes="$2" ;;
    --out) out="$2" ;;
    --build) build="$2" ;;
    --cli) cli="$2" ;;
    *) die "unknown option '$1'" ;;
  esac
  shift 2
done
[[ -x "$cli" ]] || die "$cli not found: the ordinary build's CLI fits the profiles (cmake --build build)"
mesh_of() {
  case "$1" in
    64) echo 8x8 ;; 128) echo 2x8x8 ;; 256) echo 4x8x8 ;; 512) echo 8x8x8 ;; 1024) echo 8x16x8 ;;
    *) die "--ranks: $1 is not one of 64, 128, 256, 512, 1024" ;;
  esac
}
mkdir -p "$out"
args=()
IFS=, read -ra counts <<< "$ranks_list"
for r in "${counts[@]}"; do mesh_of "$r" > /dev/null; done
for r in "${counts[@]}"; do
  mesh="$(mesh_of "$r")" nodes=$((r / 8))
  run=("$here/scripts/smpi-run.sh" --platform "$platform" --nodes "$nodes" --fold 65536 --build "$build" --)
  t0=$SECONDS
  "${run[@]}" dtensor tune validate --backend mpi --mesh "$mesh" --bytes "$bytes" \
    --format json > "$out/validate-default-$r.json"
  t1=$SECONDS
  rm -rf "$out/logs-$r"
  "${run[@]}" dtensor tune measure --backend mpi --mesh "$mesh" --sizes "$sizes" --iters 1 -o "$out/logs-$r" > /dev/null
  "$cli" tune fit "$out"/logs-"$r"/* -o "$out/profile-$r.json" > "$out/fit-$r.txt"
  t2=$SECONDS
  "${run[@]}" dtensor tune validate --backend mpi --mesh "$mesh" --bytes "$bytes" \
    --profile "$out/profile-$r.json" --format json > "$out/validate-fitted-$r.json"
  t3=$SECONDS
  echo "$r ranks ($mesh on $nodes $platform nodes): validate default $((t1 - t0)) s, measure + fit $((t2 - t1)) s, validate fitted $((t3 - t2)) s" \
    | tee -a "$out/times.txt"
  args+=("$r:default:$out/validate-default-$r.json" "$r:fitted:$out/validate-fitted-$r.json")
done
python3 "$here/scripts/virtual_cluster_table.py" "${args[@]}" | tee "$out/table.md"

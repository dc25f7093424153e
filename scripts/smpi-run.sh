#!/usr/bin/env bash
# Runs a program of the SMPI build (build-smpi/) on a simulated GPU cluster (docs/virtual-cluster.md):
#
#   scripts/smpi-run.sh --platform dgx-h100 --nodes 16 [--pod 16] [--oversub 2] [--ranks N]
#                       [--selector ompi] [--fold BYTES] [--build build-smpi] [--cfg K:V ...] -- PROGRAM ARGS...
#
# --fold BYTES: a timing-only run; every buffer of at least BYTES the backend allocates is folded
# (SMPI_SHARED_MALLOC: all ranks share its pages; values garbage, outputs not checked), so that
# GiB-sized tensors on 1,024 ranks fit in one host's memory.
# PROGRAM is looked up in the build folder (spmd_redistribute, spmd_cross_mesh, dtensor) unless it
# is a path. Ranks: nodes x 8 GPUs unless --ranks (at most that many). The run uses SMPI's
# "ompi" collective selector (its Open MPI decision rules; --selector to change it), no
# privatisation of globals (dtensor keeps no global state across MPI calls that ranks could
# share, docs/virtual-cluster.md), no simulated computation (the clock is the network's), and
# SMPI's message-size correction factors off (1): its defaults are fitted to an old Ethernet
# cluster, while the platform's numbers are the effective ones the nccl-tests logs measured.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
platform="" nodes="" pod=16 oversub=1 ranks="" selector=ompi fold="" build="$here/build-smpi"
cfgs=()
die() { echo "error: $*" >&2; exit 2; }
need() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --platform) need "$@"; platform="$2"; shift 2 ;;
    --nodes) need "$@"; nodes="$2"; shift 2 ;;
    --pod) need "$@"; pod="$2"; shift 2 ;;
    --oversub) need "$@"; oversub="$2"; shift 2 ;;
    --ranks) need "$@"; ranks="$2"; shift 2 ;;
    --selector) need "$@"; selector="$2"; shift 2 ;;
    --fold) need "$@"; fold="$2"; shift 2 ;;
    --build) need "$@"; build="$2"; shift 2 ;;
    --cfg) need "$@"; cfgs+=("--cfg=$2"); shift 2 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (scripts/smpi-run.sh --platform KIND --nodes N [...] -- PROGRAM ARGS)" ;;
  esac
done
[[ $# -ge 1 ]] || die "no program to run (after --)"
case "$platform" in
  dgx-h100|dgx-b200|pcie) ;;
  "") die "--platform is required: dgx-h100, dgx-b200 or pcie" ;;
  *) die "--platform '$platform' is not dgx-h100, dgx-b200 or pcie" ;;
esac
whole() { [[ "$2" =~ ^[0-9]+$ ]] && (( 10#$2 >= $3 && 10#$2 <= $4 )) || die "$1 '$2' is not a whole number from $3 to $4"; }
[[ -n "$nodes" ]] || die "--nodes is required"
whole --nodes "$nodes" 1 4096
whole --pod "$pod" 1 4096
whole --oversub "$oversub" 1 8
nodes=$((10#$nodes)) pod=$((10#$pod)) oversub=$((10#$oversub))
(( pod % oversub == 0 )) || die "--oversub $oversub does not divide --pod $pod"
(( nodes <= pod || nodes % pod == 0 )) || die "--nodes $nodes is not a multiple of --pod $pod"
gpus=8 hosts=$((nodes * gpus))
if [[ -z "$ranks" ]]; then ranks=$hosts; fi
whole --ranks "$ranks" 1 1000000
ranks=$((10#$ranks))
(( ranks <= hosts )) || die "--ranks $ranks: the platform ($nodes nodes of $gpus GPUs) hosts at most $hosts ranks"
case "$selector" in
  default|ompi|mpich|mvapich2|impi|automatic) ;;
  *) die "--selector '$selector' is not one of default, ompi, mpich, mvapich2, impi, automatic" ;;
esac
if [[ -n "$fold" ]]; then whole --fold "$fold" 1 1099511627776; fi
command -v smpirun > /dev/null || die "smpirun not found (Debian 12: apt-get install libsimgrid-dev)"
plugin="$build/libdtensor_platform.so"
[[ -f "$plugin" ]] || die "$plugin not found: build the SMPI targets first (docs/virtual-cluster.md)"
program="$1"; shift
if [[ "$program" != */* ]]; then
  for p in "$build/$program" "$build/examples/$program"; do [[ -x "$p" ]] && { program="$p"; break; }; done
fi
[[ -x "$program" ]] || die "program '$program' not found in $build (nor as a path)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for ((i = 0; i < ranks; i++)); do echo "node-$((i / gpus))-gpu-$((i % gpus))"; done > "$tmp/hosts"
export DTENSOR_PLATFORM="$platform" DTENSOR_NODES="$nodes" DTENSOR_POD="$pod" DTENSOR_OVERSUB="$oversub"
export DTENSOR_SMPI_SELECTOR="$selector" DTENSOR_SMPI_FOLD="$fold"
# folded buffers are mapped block by block: 64 MiB blocks keep 1,024 ranks' buffers under the
# kernel's limit of memory maps (vm.max_map_count, 65,530 by default; 1 MiB blocks ran out at 256 ranks)
[[ -n "$fold" ]] && cfgs=(--cfg=smpi/shared-malloc-blocksize:67108864 "${cfgs[@]}")
# SimGrid's own chatter ([host:rank:(pid) time] [category/INFO] ...) is dropped unless SMPI_VERBOSE=1
log=(--log=root.thres:warning --log=smpi_config.thres:error --log=xbt_cfg.thres:warning)
[[ "${SMPI_VERBOSE:-0}" == 1 ]] && log=()
exec smpirun -np "$ranks" -platform "$plugin" -hostfile "$tmp/hosts" -no-privatize \
  --cfg=smpi/coll-selector:"$selector" --cfg=smpi/simulate-computation:no --cfg=smpi/display-timing:no \
  --cfg=smpi/bw-factor:0:1 --cfg=smpi/lat-factor:0:1 \
  "${log[@]}" "${cfgs[@]}" "$program" "$@"

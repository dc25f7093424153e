#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build (Release), then plan and simulate a
# real redistribution (FSDP+TP parameter resharding on a 2x4 mesh) and show who owns what.
set -euo pipefail
cd "$(dirname "$0")/.."
DTENSOR_NO_PYTHON=1 ./scripts/install-deps.sh  # the Python test venv: scripts/test.sh installs it
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
# only what the main job runs (the test command, scripts/test.sh, builds the rest)
cmake --build build -j"$(nproc)" --target dtensor_cli spmd_redistribute
set -x
./build/dtensor layout --mesh dp=2,tp=4 --shape 10x6 --placements 'S(0)S(1)'
./build/dtensor plan --mesh dp=2,tp=4 --shape 8192x8192 --from 'S(0)S(1)' --to 'S(1)S(0)' --cost-model pytorch
./build/dtensor simulate --mesh dp=2,tp=4 --shape 10x6 --from 'S(0)[0]S(0)[1]' --to 'RS(1)'
# SPMD: every rank plans, agrees, executes and verifies its own shard (one thread per rank here;
# `mpirun -np 8 ... --backend mpi` runs the same program as 8 processes).
./build/examples/spmd_redistribute --mesh dp=2,tp=4 --shape 1000x512 --from 'S(0)[1]S(0)[0]' --to 'RS(1)'

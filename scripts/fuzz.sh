#!/usr/bin/env bash
# Fuzzing: builds the libFuzzer targets with clang + ASan/UBSan and runs each from the seed corpus
# in fuzz/corpus (which holds the reproducers of past defects). Fails on any finding: a crash, a
# sanitizer report, a FINDING abort, a timeout or running out of memory. Prints the executions
# per target.
#   default (CI): a fixed seed and a fixed number of executions per target (about 25 s each here),
#                 capped at FUZZ_SECONDS. A bounded search, not a replay: libFuzzer mutates along
#                 its coverage feedback, so a change to the code (or the time cap) changes which
#                 inputs a run meets (two CI runs on near-identical trees met a finding in one
#                 and not the other). What must stay checked goes into fuzz/corpus.
#   FUZZ_SECONDS=N FUZZ_RANDOM=1: a time-bounded campaign with a random seed, to look for new bugs.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-90}
CXX=${FUZZ_CXX:-clang++}
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER="$CXX" -DDTENSOR_FUZZ=ON \
  -DDTENSOR_SANITIZE=address,undefined -DDTENSOR_BUILD_TESTS=OFF -DDTENSOR_BUILD_TOOLS=OFF \
  -DDTENSOR_BUILD_EXAMPLES=OFF -DDTENSOR_BUILD_BENCH=OFF -DDTENSOR_CUDA=OFF -DDTENSOR_MPI=OFF \
  -DDTENSOR_INSTALL=OFF -DCMAKE_CXX_FLAGS_DEBUG="-g1 -O1" >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz_text fuzz_layout_json fuzz_plan_json fuzz_plan_struct fuzz_cost_profile fuzz_nccl_log fuzz_batch_json fuzz_cross_mesh_json fuzz_cross_mesh_ranks fuzz_load_chunks fuzz_load_json
status=0
declare -A runs_of=([fuzz_text]=450000 [fuzz_layout_json]=450000 [fuzz_plan_json]=140000 [fuzz_plan_struct]=7000 [fuzz_cost_profile]=280000 [fuzz_nccl_log]=22000 [fuzz_batch_json]=11000 [fuzz_cross_mesh_json]=11000 [fuzz_cross_mesh_ranks]=2200 [fuzz_load_chunks]=110000 [fuzz_load_json]=55000)
for t in fuzz_text fuzz_layout_json fuzz_plan_json fuzz_plan_struct fuzz_cost_profile fuzz_nccl_log fuzz_batch_json fuzz_cross_mesh_json fuzz_cross_mesh_ranks fuzz_load_chunks fuzz_load_json; do
  work=build-fuzz/corpus/$t
  if [ "${FUZZ_RANDOM:-0}" = 1 ]; then
    mode=(-max_total_time="$seconds")
  else
    rm -rf "$work"  # start from the repo's corpus alone
    mode=(-seed=1 -runs="${runs_of[$t]}" -max_total_time="$seconds")
  fi
  mkdir -p "$work" build-fuzz/artifacts
  # the repo's corpus is read; new inputs go to the build tree's copy
  if ! UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
      "build-fuzz/fuzz/$t" "$work" "fuzz/corpus/$t" "${mode[@]}" -timeout=10 -rss_limit_mb=2048 \
      -max_len=4096 -print_final_stats=1 -artifact_prefix=build-fuzz/artifacts/ >"build-fuzz/$t.log" 2>&1; then
    echo "FUZZ FINDING in $t:"; tail -40 "build-fuzz/$t.log"; status=1
  fi
  runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "build-fuzz/$t.log" | grep -Eo '[0-9]+$' || echo "?")
  echo "$t: $runs executions"
done
exit $status

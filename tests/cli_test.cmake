# Runs the dtensor CLI and checks exit codes, stdout and stderr (the contract of docs/cli.md).
function(run_case name expect_rc expect_out expect_err)
  execute_process(COMMAND ${DTENSOR} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "${name}: exit ${rc}, expected ${expect_rc}\nstdout: ${out}\nstderr: ${err}")
  endif()
  if(expect_out AND NOT out MATCHES "${expect_out}")
    message(FATAL_ERROR "${name}: stdout does not match '${expect_out}':\n${out}")
  endif()
  if(expect_err AND NOT err MATCHES "${expect_err}")
    message(FATAL_ERROR "${name}: stderr does not match '${expect_err}':\n${err}")
  endif()
  if(NOT expect_rc EQUAL 0 AND NOT out STREQUAL "")
    message(FATAL_ERROR "${name}: failing command printed to stdout: ${out}")
  endif()
  message(STATUS "${name}: ok")
endfunction()

run_case(layout_text 0 "3x5 +\\(0,0\\)" "" layout --mesh 2x2 --shape 9x5 --placements "S(0)S(0)")
run_case(layout_json 0 "\"local_shape\":\\[2,5\\],\"global_offset\":\\[7,0\\]" ""
         layout --mesh 2x2 --shape 9x5 --placements "S(0)S(0)" --format json)
run_case(layout_strided 0 "\"indices\":\\[\\[0,1\\],\\[2\\]\\]" ""
         layout --mesh 2x2 --shape 2x4 --placements "_S(1, 2)S(1)" --format json)
run_case(layout_empty_shard 0 "\"local_shape\":\\[0,2\\],\"global_offset\":\\[39,0\\]" ""
         layout --mesh 4x2 --shape 39x2 --placements "_S(0, 3)_S(0, 4)" --format json)
run_case(layout_grid 0 "0:3  \\| 0" "" layout --mesh 2x2 --shape 9x5 --placements "S(0)S(0)")
# RaggedShard layouts: the pieces per rank, the element map, JSON, ragged plans, bad units
run_case(layout_ragged 0 "    3  \\(3\\) +3x4 +6x4 +\\[12, 24\\) +12:24" "" layout --mesh 4 --shape 6x4 --placements "RaggedShard((0,),(1,2,0,3))")
run_case(layout_ragged_map 0 "   1 \\| 1 1 1 1" "" layout --mesh 4 --shape 6x4 --placements "RaggedShard((0,),(1,2,0,3))")
run_case(layout_ragged_json 0 "\"piece\":\\[4,12\\],\"global_runs\":\\[\\[4,12\\]\\]" ""
         layout --mesh 4 --shape 6x4 --placements "RaggedShard((0,),(1,2,0,3))" --format json --rank 1)
run_case(plan_ragged 0 "1. exchange .*=> S\\(0\\)R" "" plan --mesh 2x2 --shape 8x6 --from "RaggedShard((0,),(1,3))S(1)" --to "S(0)R")
run_case(plan_ragged_json 0 "\"kind\":\"exchange\"" "" plan --mesh 4 --shape 8x6 --from "S(0)" --to "RaggedShard((0,),(0,0,1,0))" --format json)
run_case(bad_ragged_units 2 "" "^error: --placements: RaggedShard local_units \\(1,2,0\\) has 3 entries; mesh dim 0 has size 4"
         layout --mesh 4 --shape 6x4 --placements "RaggedShard((0,),(1,2,0))")
run_case(bad_ragged_plan 2 "" "^error: --to: .*does not divide" plan --mesh 4 --shape 9 --from "S(0)" --to "RaggedShard((0,),(1,1,1,1))")
# veScale's rule: a unit may cut a row (2 of 6) when every piece holds whole rows; a piece that cuts one names its rank
run_case(simulate_ragged_unit_cuts_row 0 "verified: every rank holds exactly its target data" ""
         simulate --mesh 3 --shape 3x6 --from "S(1)" --to "RaggedShard((0,),(3,3,3))")
run_case(bad_ragged_piece_cuts_row 2 "" "^error: --placements: .*the piece of rank 1 \\(mesh coordinate \\(1\\)\\).*cuts a trailing row of 3 elements"
         layout --mesh 3 --shape 2x3 --placements "RaggedShard((0,),(0,2,1))")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/bad_bucket.json "{\"version\": 1, \"mesh\": [4], \"pairs\": [{\"shape\": [6, 4], \"from\": \"RaggedShard((0,1),(8,8,8,0))\", \"to\": \"R\"}, {\"shape\": [10], \"from\": \"RaggedShard((0,),(0,0,2))\", \"to\": \"R\"}]}")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/bucket.json "{\"version\": 1, \"mesh\": [4], \"pairs\": [{\"shape\": [6, 4], \"from\": \"RaggedShard((0,1),(8,8,8,0))\", \"to\": \"R\"}, {\"shape\": [10], \"from\": \"RaggedShard((0,),(0,0,2,8))\", \"to\": \"R\"}]}")
run_case(plan_bucket 0 "a bucket of 2 tensors .*offset 0,24.*exchange .*\\(0 B packing" "" plan --batch ${CMAKE_CURRENT_BINARY_DIR}/bucket.json)
run_case(bad_batch_ragged 2 "" "error: --batch: batch file pairs\\[1\\]: RaggedShard local_units \\(0,0,2\\) has 3 entries"
         plan --batch ${CMAKE_CURRENT_BINARY_DIR}/bad_bucket.json)
run_case(simulate_ragged 0 "exchange.*verified: every rank holds exactly its target data" ""
         simulate --mesh 2x2 --shape 8x6 --from "RaggedShard((0,),(1,3))S(1)" --to "P(sum)R")
run_case(simulate_ragged_json 0 "\"verified\":true" "" simulate --mesh 4 --shape 8x6 --from "S(0)" --to "RaggedShard((0,),(0,0,1,0))" --format json)
run_case(show_ragged 2 "" "^error: --to: a RaggedShard layout .*this command not yet"
         show --mesh 4 --shape 8x6 --from "S(0)" --to "RaggedShard((0,),(0,0,1,0))")
run_case(bad_placement 2 "" "^error: --placements: malformed placements \"S\\(0\": expected '\\)' at character 4"
         layout --mesh 2 --shape 9 --placements "S(0")
run_case(bad_dim 2 "" "error: --placements: tensor dim 2 of S\\(2\\)" layout --mesh 2 --shape 9x5 --placements "S(2)")
run_case(bad_mesh 2 "" "error: .*mesh" layout --mesh 2x0 --shape 9 --placements "RR")
run_case(count_mismatch 2 "" "1 mesh dim\\(s\\) but the mesh has 2" layout --mesh 2x2 --shape 9 --placements "R")
run_case(bad_format 2 "" "--format 'xml'" layout --mesh 2 --shape 9 --placements R --format xml)
run_case(missing_flag 2 "" "error: .*--placements" layout --mesh 2 --shape 9)
run_case(help 0 "--placements" "" layout --help)
run_case(plan_pytorch 0 "\"total_cost_us\":907.42" ""
         plan --mesh 2x4 --shape 8192x8192 --from "S(0)S(1)" --to "S(1)S(0)" --cost-model pytorch --format json)
run_case(plan_text 0 "trace: S\\(0\\)S\\(1\\)->RS\\(1\\)->RS\\(0\\)->S\\(1\\)S\\(0\\)" ""
         plan --mesh 2x4 --shape 8192x8192 --from "S(0)S(1)" --to "S(1)S(0)" --cost-model pytorch)
run_case(plan_header 0 "^plan S\\(0\\)S\\(1\\) -> S\\(1\\)S\\(0\\) on mesh 2x4, shape 64x48 f32" ""
         plan --mesh 2x4 --shape 64x48 --from "S(0)S(1)" --to "S(1)S(0)")
run_case(plan_runner_up_same_states 0 "runner-up \\(cheapest plan with another first step\\): 10.802 us.*trace: S\\(0\\)->R \\(steps: direct\\[0\\]; the plan: all_gather\\[0\\]\\)" ""
         plan --mesh 8 --shape 100 --from "S(0)" --to R)
run_case(plan_explain 0 "runner-up" "" plan --mesh 2x2 --shape 64x64 --from "S(0)R" --to "RS(0)" --explain)
run_case(plan_bad_cost 2 "" "error: --cost-model: cost model \"nope.json\"" plan --mesh 2 --shape 8 --from R --to "S(0)" --cost-model nope.json)
run_case(plan_budget 2 "" "smallest budget that admits a plan is"
         plan --mesh 2x4 --shape 1024x1024 --from "S(0)S(1)" --to "S(1)S(0)" --max-memory 0)
run_case(plan_bad_edges 2 "" "unknown edge set 'fast'" plan --mesh 2 --shape 8 --from R --to "S(0)" --edges fast)
run_case(show_text 0 "state 1: RS\\(0\\)" "" show --mesh 2x2 --shape 9x5 --from "S(0)S(1)" --to "RS(0)")
run_case(show_svg 0 "<svg xmlns" "" show --mesh 2x2 --shape 9x5 --from "S(0)S(1)" --to "RS(0)" --format svg)
run_case(show_dot 0 "^digraph" "" show --mesh 2x2 --shape 9x5 --from "S(0)S(1)" --to "RS(0)" --format dot)
run_case(show_bad_dims 2 "" "--dims names tensor dim 5" show --mesh 2 --shape 9x5 --from "S(0)" --to R --dims 0,5)
run_case(simulate_ok 0 "verified: every rank" "" simulate --mesh 2x3 --shape 9x5 --from "P(max)R" --to "S(1)S(0)" --dtype i64)
# f32 above 2^24 elements: the seeds stay exact (ids reduced modulo what f32 holds, docs/cli.md)
run_case(simulate_f32_above_2p24 0 "verified: every rank" "" simulate --mesh 2x2 --shape 4097x4097 --from "S(0)R" --to "S(0)R")
run_case(simulate_f32_avg_above_2p24 0 "verified: every rank" "" simulate --mesh 2x2 --shape 4097x4097 --from "P(avg)S(1)" --to "RS(0)")
run_case(simulate_int_avg_refused 2 "" "Partial.avg. on mesh dim 0 needs a floating dtype, not i8" simulate --mesh 3 --shape 8x7 --dtype i8 --from "P(avg)" --to "S(1)")
run_case(bare_usage 2 "" "Subcommands:.*layout.*plan.*simulate")
run_case(simulate_json 0 "\"verified\":true" "" simulate --mesh 2 --shape 3 --from "S(0)" --to R --format json)

# Cost profiles that must be refused with one clear line (exit 2), never a hang, crash or inf.
set(tmp ${CMAKE_CURRENT_BINARY_DIR}/cli-tmp)
file(MAKE_DIRECTORY ${tmp})
run_case(profile_dev_zero 2 "" "not a regular file" plan --mesh 2 --shape 8 --from R --to "S(0)" --cost-model /dev/zero)
run_case(profile_directory 2 "" "not a regular file \\(a directory\\)" plan --mesh 2 --shape 8 --from R --to "S(0)" --cost-model ${tmp})
string(REPEAT "[" 100000 deep)
file(WRITE ${tmp}/deep.json "${deep}")
run_case(profile_deep 2 "" "nested deeper than 32" plan --mesh 2 --shape 8 --from R --to "S(0)" --cost-model ${tmp}/deep.json)
set(profile [[{"name": "x", "devices_per_host": 8, "links": {"intra": {"alpha_us": 6.6, "alpha_per_peer_us": 0.6, "bw_GBps": BW, "p2p_bw_GBps": 380}, "inter": {"alpha_us": 6.6, "alpha_per_peer_us": 2.7, "bw_GBps": 46, "p2p_bw_GBps": 46}}, "copy_bw_GBps": COPY}]])
string(REPLACE "BW" "5e-324" p1 "${profile}")
string(REPLACE "COPY" "1500" p1 "${p1}")
file(WRITE ${tmp}/tiny_bw.json "${p1}")
run_case(profile_tiny_bw 2 "" "bw_GBps = 5e-324 is outside" plan --mesh 2 --shape 8 --from R --to "S(0)" --cost-model ${tmp}/tiny_bw.json)
string(REPLACE "BW" "360" p2 "${profile}")
string(REPLACE "COPY" "1e400" p2 "${p2}")
file(WRITE ${tmp}/huge.json "${p2}")
run_case(profile_out_of_range 2 "" "^error: --cost-model: invalid cost model JSON" plan --mesh 2 --shape 8 --from R --to "S(0)" --cost-model ${tmp}/huge.json)
run_case(newline_in_input 2 "" "^error: --placements: malformed placements \"S\\(0\\\\nR\"[^\n]*\n$" layout --mesh 2 --shape 9 --placements "S(0
R")

# PyTorch's own spellings are accepted; our notation stays the output.
run_case(torch_spellings 0 "\"from\":\"S\\(0\\)R\",\"to\":\"_S\\(1, 2\\)P\\(max\\)\"" ""
         plan --mesh "(dp=2, tp=2)" --shape "[16, 12]" --dtype bfloat16 --from "(Shard(dim=0), Replicate())"
         --to "[_StridedShard(dim=1, split_factor=2), Partial(\"max\")]" --format json)
run_case(torch_dtype_fp8 0 "\"dtype\":\"f8e4m3\"" "" plan --mesh 2 --shape 8 --dtype torch.float8_e4m3fn --from "Shard(0)" --to "Replicate()" --format json)
run_case(max_memory_units 0 "\"peak_bytes\"" "" plan --mesh 2x4 --shape 1024x1024 --from "S(0)S(1)" --to "S(1)S(0)" --max-memory 512MiB --format json)
# Errors name the flag and suggest the nearest spelling; unknown flags and commands are named.
run_case(flag_named 2 "" "^error: --to: malformed placements" plan --mesh 2 --shape 8 --from "S(0)" --to "S(0")
run_case(did_you_mean 2 "" "\"Shrad\": did you mean Shard\\?" plan --mesh 2 --shape 8 --from "Shrad(0)" --to R)
run_case(unknown_flag 2 "" "unknown flag \"--too\" for dtensor plan \\(did you mean --to\\?\\)" plan --mesh 2 --shape 8 --from R --too "S(0)")
run_case(unknown_command 2 "" "unknown command \"frobnicate\"" frobnicate --mesh 2)
run_case(version 0 "^dtensor [0-9]+\\.[0-9]+\\.[0-9]+" "" --version)
run_case(rank_negative 2 "" "--rank \"-2\" must be an integer in \\[0, 2\\)" layout --mesh 2 --shape 8 --placements "S(0)" --rank -2)
run_case(rank_huge 2 "" "--rank \"99999999999999999999\" must be" layout --mesh 2 --shape 8 --placements "S(0)" --rank 99999999999999999999)
run_case(max_memory_empty 2 "" "error: --max-memory" plan --mesh 2 --shape 8 --from R --to "S(0)" --max-memory "")
run_case(unbalanced_quotes 2 "" "malformed placements" plan --mesh 2 --shape 8 --from "P(\"max')" --to R)
run_case(empty_shape_dim_huge 2 "" "tensor size 4611686018427387904 on dim 1 exceeds 2\\^53" layout --mesh 2 --shape 0x4611686018427387904 --placements R)
run_case(show_dims_negative 2 "" "--dims names tensor dim -1" show --mesh 2 --shape 9x5 --from "S(0)" --to R --dims -1,0)
run_case(show_bad_extension 2 "" "unknown extension \".bmp\"" show --mesh 2 --shape 9x5 --from "S(0)" --to R -o ${tmp}/x.bmp)
# Wrong answers and oversized simulations are refused, never "verified".
run_case(huge_split_factor 0 "verified: every rank" "" simulate --mesh 2 --shape 8 --from R --to "_S(0, 9223372036854775807)")
run_case(huge_split_factor_back 0 "verified: every rank" "" simulate --mesh 2 --shape 8 --from "_S(0, 9223372036854775807)" --to R)
run_case(sim_memory_limit 2 "" "needs about [0-9]+ bytes of host memory, above the limit of 1048576 bytes \\(--sim-memory-limit"
         simulate --mesh 2x4 --shape 16384x16384 --from "S(0)S(1)" --to RR --sim-memory-limit 1MiB)
run_case(simulate_json_no_data 0 "\"local_shape\":\\[[0-9]+,[0-9]+\\]}" "" simulate --mesh 2 --shape 300x300 --from "S(0)" --to R --format json)
# The planner's effort and memory are bounded, with errors naming the flag that raises the bound.
# (all S(1): no exchange of mesh dims fixes the target, so no layouts merge)
run_case(search_memory_bound 2 "" "needs more than 67108864 bytes of search state \\(PlanOptions::max_search_bytes, CLI --max-search-memory\\)"
         plan --mesh 4x4x4x4x4x4x4x4 --shape 8192x8192x16 --from "S(0)S(0)S(0)S(0)S(0)S(0)S(0)S(0)" --to "S(1)S(1)S(1)S(1)S(1)S(1)S(1)S(1)" --max-search-memory 64MiB)
# all R: the seven inter-host mesh dims are interchangeable (the target stays all R), so the
# search meets one layout per class of relabelings and answers within 64 MiB
run_case(search_interchangeable_8d 0 "total: 32580.994 us in 20 step\\(s\\)" ""
         plan --mesh 4x4x4x4x4x4x4x4 --shape 8192x8192x16 --from "S(0)S(0)S(0)S(0)S(0)S(0)S(0)S(0)" --to "RRRRRRRR" --max-search-memory 64MiB)
run_case(search_states_bound 2 "" "explored more than 10 states \\(PlanOptions::max_states, CLI --max-states\\)"
         plan --mesh 2x2x2 --shape 64x64 --from "S(0)S(1)R" --to "S(1)S(0)P" --max-states 10)
# a strided split into 10^8 pieces: sizes and offsets in closed form at once; index lists and
# plans refuse it, naming the split
run_case(strided_huge_layout 0 "0  \\(0\\) +549755813888 \\(0\\) +\\(more than 1048576 runs" ""
         layout --mesh 2 --shape 1099511627776 --placements "_S(0, 100000000)" --rank 0)
run_case(strided_huge_layout_json 0 "\"local_shape\":\\[549755813888\\],\"global_offset\":\\[5498\\]" ""
         layout --mesh 2 --shape 1099511627776 --placements "_S(0, 100000000)" --rank 1 --format json)
run_case(strided_runs_bound 2 "" "into up to 100000000 separate runs per rank"
         layout --mesh 2 --shape 1099511627776 --placements "_S(0, 100000000)" --rank 0 --indices)
run_case(strided_runs_bound_plan 2 "" "into up to 100000000 separate runs per rank"
         plan --mesh 2 --shape 1099511627776 --from "_S(0, 100000000)" --to R)
run_case(show_huge_mesh 2 "" "has 16777216 ranks; show draws every rank and supports at most 65536"
         show --mesh 256x256x256 --shape 1024x1024 --from "S(0)S(1)R" --to RRR -o ${tmp}/x.svg)
run_case(empty_dim_overflow 2 "" "more than 2\\^53 elements in its non-empty dims"
         layout --mesh 2 --shape 3000000000x0x3000000000 --placements R)

# tune: fit a profile from a log, show it, predict with it; bad input is exit 2
set(nccl ${CMAKE_CURRENT_LIST_DIR}/data/nccl)
run_case(tune_fit 0 "all_reduce on the intra-node link, fitted at 8 ranks" ""
         tune fit ${nccl}/all_reduce_8ranks.txt -o ${tmp}/fitted.json)
run_case(tune_show 0 "all_reduce on the intra-node link" "" tune show ${tmp}/fitted.json)
run_case(tune_show_default 0 "no fitted curves" "" tune show default)
# the fixture is 10 us + bus bytes at 100 GB/s: 64 MiB on 8 ranks = 10 + 67108864 * 1.75 / 1e5 us
run_case(tune_predict 0 "\\{\"fitted_curve\":true,.*\"predictions\":\\[\\{\"bytes\":67108864,\"time_us\":118[0-9][.]" ""
         tune predict --profile ${tmp}/fitted.json --collective all_reduce --ranks 8 --bytes 64M --format json)
run_case(tune_fit_noheader 2 "" "^error: nccl-tests log .*has no run header listing its ranks; give --ranks N"
         tune fit ${nccl}/all_reduce_noheader.txt -o ${tmp}/x.json)
run_case(tune_fit_noheader_ranks 0 "wrote" "" tune fit ${nccl}/all_reduce_noheader.txt --ranks 8 -o ${tmp}/x.json)
# an erratic log: fitted, with a warning on stderr; --strict refuses to write the profile
run_case(tune_fit_warns 0 "median error" "warning: .*all_reduce_erratic.txt: the fit's median error is [0-9.]+%, above 20%"
         tune fit ${nccl}/all_reduce_erratic.txt -o ${tmp}/erratic.json)
run_case(tune_fit_strict 2 "" "error: --strict: 1 warning\\(s\\), no profile written"
         tune fit --strict ${nccl}/all_reduce_erratic.txt -o ${tmp}/erratic-strict.json)
run_case(tune_fit_strict_ok 0 "wrote" "" tune fit --strict ${nccl}/all_reduce_8ranks.txt -o ${tmp}/fitted-strict.json)
run_case(tune_fit_no_output 2 "" "^error: tune fit needs -o PROFILE.json" tune fit ${nccl}/all_reduce_8ranks.txt)
run_case(tune_predict_unfitted 0 "from the profile's intra-node link constants \\(no fitted curve for all_gather" ""
         tune predict --profile default --collective all_gather --ranks 8 --bytes 1M)
run_case(tune_bad_collective 2 "" "^error: --collective \"bcast\" is not" tune predict --collective bcast --ranks 8 --bytes 1M)
run_case(tune_unknown_flag 2 "" "^error: unknown flag \"--rank\" for dtensor tune predict \\(did you mean --ranks\\?\\)"
         tune predict --rank 8)
run_case(tune_unknown_command 2 "" "^error: unknown command \"fitt\" for dtensor tune \\(did you mean fit\\?\\)" tune fitt)
run_case(tune_fit_report 0 "report" "" tune fit ${nccl}/all_reduce_8ranks.txt -o ${tmp}/r.json --report ${tmp}/fit.html)
file(READ ${tmp}/fit.html report_html)
string(FIND "${report_html}" "class=\"measured\"" has_points)
string(FIND "${report_html}" "<polyline" has_line)
string(FIND "${report_html}" "src=" has_external)
if(has_points EQUAL -1 OR has_line EQUAL -1 OR NOT has_external EQUAL -1)
  message(FATAL_ERROR "tune_fit_report: the report lacks its measured points or fitted line, or loads something")
endif()
# measure on the virtual clock, driven by the profile fitted above, then fit what it wrote
file(REMOVE_RECURSE ${tmp}/measured)
run_case(tune_measure 0 "wrote .*all_reduce-intra.txt" ""
         tune measure --mesh 2x4 --devices-per-host 4 --truth ${tmp}/fitted.json --noise 0.01 --sizes 1K:1M --iters 3 -o ${tmp}/measured)
run_case(tune_measure_fit 0 "all_reduce on the intra-node link, fitted at 4 ranks" ""
         tune fit ${tmp}/measured/all_reduce-intra.txt ${tmp}/measured/all_gather-inter.txt -o ${tmp}/refit.json)
run_case(tune_measure_backend 2 "" "^error: --backend \"gloo\": the CLI runs threads \\(in-process\\), mpi or nccl"
         tune measure --mesh 2 --backend gloo -o ${tmp}/m2)
# the in-process world's host memory, checked before any buffer: 256 MiB tensors on 2 ranks need ~3 GB
run_case(tune_validate_memory_limit 2 "" "^error: tune validate: case fsdp unshard 256 MiB \\(2 plans on 2 ranks, in this process\\) needs about [0-9]+ bytes of host memory, above the limit of 1073741824 bytes \\(--sim-memory-limit\\)"
         tune validate --mesh 2 --bytes 256M --sim-memory-limit 1G)
run_case(tune_validate_memory_limit_bad 2 "" "^error: --sim-memory-limit" tune validate --mesh 2 --bytes 1K --sim-memory-limit 1Gx)
run_case(tune_validate_truth_mpi 2 "" "^error: --truth \\(a virtual clock\\) works with --backend threads only"
         tune validate --mesh 2x4 --backend mpi --truth default)
run_case(tune_report_full 2 "" "^error: --report \"/dev/full\" cannot be written"
         tune validate --mesh 2 --bytes 4K --truth default --report /dev/full)
run_case(tune_noise_trailing 2 "" "^error: --noise \"0[.]5x\" must be a number in \\[0, 1\\)"
         tune validate --mesh 2 --bytes 4K --truth default --noise 0.5x)

# Batches (`plan --batch`, `simulate --batch`): stages and collectives against per-tensor
# planning, verified on every rank; bad batch files are one clear error (exit 2).
file(WRITE ${tmp}/batch.json [[{"version": 1, "mesh": [2, 4], "mesh_names": ["dp", "tp"], "pairs": [
  {"shape": [64, 32], "dtype": "bf16", "from": "S(0)S(1)", "to": "RS(1)"},
  {"shape": [64], "dtype": "bf16", "from": "S(0)R", "to": "RR"},
  {"shape": [64], "dtype": "bf16", "from": "S(0)R", "to": "RR"},
  {"shape": [9, 5], "dtype": "f32", "from": "P(sum)R", "to": "S(0)R"},
  {"shape": [3, 7], "dtype": "f32", "from": "RS(1)", "to": "S(0)S(1)"}]}]])
run_case(batch_plan 0 "batch of 5 tensors on mesh dp=2,tp=4.*collective\\(s\\) against 4 planned one by one" ""
         plan --batch ${tmp}/batch.json)
run_case(batch_plan_json 0 "\"kind\":\"batch\".*\"separate_collectives\":4.*\"plans\":\\[" "" plan --batch ${tmp}/batch.json --format json)
run_case(batch_simulate 0 "verified: every rank holds exactly every tensor's target data" "" simulate --batch ${tmp}/batch.json)
run_case(batch_simulate_json 0 "\"verified\":true,\"collectives_issued\":2,\"results\":\\[{\"index\":0" "" simulate --batch ${tmp}/batch.json --format json)
# validate: the chosen plan against its competitors. On a virtual clock driven by the profile
# itself the model orders the plans as measured (regret 0); bad options are one error.
run_case(tune_validate 0 "transpose 256 KiB .*regret 0[.]0%, order agreement 3/3 pairs, 1 round.*\\* chosen +[0-9.]+ +[0-9.]+ .*\\[direct 0,1\\].*8 of 8 cases run" ""
         tune validate --mesh 2x4 --bytes 256K --truth default)
run_case(tune_validate_json 0 "\"name\":\"fsdp-tp unshard 16 KiB\".*\"label\":\"chosen\",\"also\":\\[\"pytorch edges\"\\],\"chosen\":true" ""
         tune validate --mesh 2x4 --bytes 16K --truth default --format json)
run_case(tune_validate_against 0 "best under pytorch.*report .*validate[.]html" ""
         tune validate --mesh 4 --bytes 4K --truth default --against pytorch --report ${tmp}/validate.html)
run_case(tune_validate_cases 0 "pair 4 .*batch \\(5 tensors\\) +\\(5 tensors\\).*per-tensor" ""
         tune validate --cases ${tmp}/batch.json --truth default --max-rounds 8)
run_case(tune_validate_budget 0 "transpose 64 KiB .*not run: no plan from S\\(0\\) to S\\(1\\) fits in 1024 peak bytes.*4 of 5 cases run" ""
         tune validate --mesh 4 --bytes 64K --memory-budget 1K --truth default)
run_case(tune_validate_bytes 2 "" "^error: validate size 8 bytes: from 64 bytes to 16 GiB" tune validate --mesh 2x4 --bytes 8)
run_case(tune_validate_rounds 2 "" "^error: min rounds 3 is below 8" tune validate --mesh 2 --min-rounds 3)
# a noiseless virtual clock is deterministic: one round by default; with noise, one round is refused
run_case(tune_validate_deterministic 0 "\"rounds\":1,\"converged\":true" "" tune validate --mesh 2 --bytes 4K --truth default --format json)
run_case(tune_validate_noisy_one_round 2 "" "^error: min rounds 1 is below 8.*deterministic"
         tune validate --mesh 2 --bytes 4K --truth default --noise 0.2 --min-rounds 1)
run_case(tune_validate_cases_mesh 2 "" "^error: --cases: pair 0 is on mesh dp=2,tp=4, not --mesh 8" tune validate --mesh 8 --cases ${tmp}/batch.json)
run_case(batch_with_mesh 2 "" "^error: --mesh and --batch exclude each other" plan --batch ${tmp}/batch.json --mesh 2)
run_case(batch_missing 2 "" "^error: --batch: batch file \"[^\"]*nope.json\" does not exist" plan --batch ${tmp}/nope.json)
run_case(missing_mesh 2 "" "^error: --mesh is required \\(or --batch FILE\\)" plan --shape 8 --from R --to "S(0)")
file(WRITE ${tmp}/batch_bad.json [[{"version": 1, "mesh": [2], "pairs": [{"shape": [4], "from": "S(0)", "to": "R"}, {"shape": [4], "from": "S(0)", "too": "R"}]}]])
run_case(batch_unknown_field 2 "" "^error: --batch: batch file pairs\\[1\\]: unknown field \"too\"" plan --batch ${tmp}/batch_bad.json)
file(WRITE ${tmp}/batch_empty.json [[{"version": 1, "mesh": [2], "pairs": []}]])
run_case(batch_empty 2 "" "'pairs' must be a list of 1 to" simulate --batch ${tmp}/batch_empty.json)

# Cross-mesh (`--to-mesh`, `--ranks`, `--to-ranks`): planned, simulated one thread per world rank
# and verified on every target rank; bad rank lists are one clear error (exit 2).
run_case(cross_simulate 0 "1 collectives.*verified: every target rank holds exactly its target data" ""
         simulate --mesh dp=2,tp=4 --shape 64x48 --from "S(0)S(1)" --to-mesh tp=4 --to-ranks 8,9,10,11 --to "S(1)")
run_case(cross_simulate_overlap 0 "28 messages between ranks, 4 local copies.*verified" ""
         simulate --mesh dp=4,tp=2 --shape 64x48 --dtype bf16 --from "S(0)S(1)" --to-mesh rep=2,tp=4 --to "RS(1)")
run_case(cross_plan_json 0 "\"kind\":\"cross_mesh\",\"version\":1,\"world_size\":6,\"src_ranks\":\\[0,1,2,3\\],\"dst_ranks\":\\[5,4\\]" ""
         plan --mesh 2x2 --shape 9x5 --from "P(sum)S(0)" --to-mesh 2 --to-ranks 5,4 --to R --format json)
run_case(cross_twice 2 "" "^error: target world rank 8 is listed twice"
         plan --mesh 4 --shape 8 --from "S(0)" --to-mesh 4 --to-ranks 8,8,9,10 --to R)
run_case(cross_count 2 "" "^error: target mesh 4 has 4 ranks but its world rank list has 3 entries"
         plan --mesh 4 --shape 8 --from "S(0)" --to-mesh 4 --to-ranks 8-10 --to R)
run_case(cross_backwards 2 "" "^error: --ranks range \"3-1\" runs backwards"
         plan --mesh 4 --shape 8 --from "S(0)" --to-mesh 4 --ranks 3-1 --to R)
run_case(cross_ranks_alone 2 "" "^error: --ranks and --to-ranks need --to-mesh"
         plan --mesh 4 --shape 8 --from R --to "S(0)" --ranks 0-3)
run_case(cross_show 0 "target mesh rep=2,tp=2 \\(mesh rank->world rank: 0->4 1->5 2->6 3->7\\).*0,2 1,3" ""
         show --mesh dp=2,tp=2 --shape 8x6 --from "S(0)S(1)" --to-mesh rep=2,tp=2 --to-ranks 4-7 --to "RS(1)")
run_case(cross_show_html 2 "" "^error: show --to-mesh draws text only \\(not html yet\\)"
         show --mesh 2 --shape 8 --from "S(0)" --to-mesh 2 --to R --format html)
# load-plan: a checkpoint load from a request file; one tensor's part; a plan file checked against it
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/load_request.json "{\"tensors\": [{\"name\": \"w\", \"layout\": {\"mesh\": [2, 2], \"shape\": [8, 6], \"dtype\": \"bf16\", \"placements\": \"RS(0)\"}, \"chunks\": [[[0, 0], [4, 6]], [[4, 0], [4, 3]], [[4, 3], [4, 3]], [[8, 0], [0, 6]]]}, {\"name\": \"b\", \"layout\": {\"mesh\": [2, 2], \"shape\": [9], \"dtype\": \"f32\", \"placements\": \"S(0)R\"}, \"chunks\": [[[0], [5]], [[5], [4]]]}]}")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/load_overlap.json "{\"tensors\": [{\"name\": \"w\", \"layout\": {\"mesh\": [2], \"shape\": [8], \"dtype\": \"f32\", \"placements\": \"S(0)\"}, \"chunks\": [[[0], [5]], [[4], [4]]]}]}")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/load_badchunk.json "{\"tensors\": [{\"name\": \"w\", \"layout\": {\"mesh\": [2], \"shape\": [8], \"dtype\": \"f32\", \"placements\": \"S(0)\"}, \"chunks\": [[[0], [8], [1]]]}]}")
run_case(load_plan 0 "reads: 5 chunks, 132 bytes, each read once; busiest reader 48 bytes against the balanced bound 48" ""
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json)
run_case(load_plan_tensor 0 "w: shape 8x6 bf16, 4 saved chunk[(]s[)]\n  chunk    0 [(]offsets 0x0 sizes 4x6[)]: read by rank [0-9], 48 bytes ->" ""
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --tensor w)
# one rank's part, planned alone: its reads and messages, the decision hash every rank shares
run_case(load_plan_rank 0 "^rank 1's part of a load onto mesh 2x2 [(]planned alone; decision hash [0-9a-f]+, the same on every rank[)]
reads: [0-9]+ chunk[(]s[)]" ""
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --rank 1)
run_case(load_plan_rank_json 0 "^[{]\"kind\":\"load_part\",\"rank\":3,\"decision_hash\":\"[0-9a-f]+\",\"plan\":[{]\"kind\":\"load\"" ""
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --rank 3 --format json)
run_case(load_plan_rank_off_mesh 2 "" "^error: --rank \"4\" must be an integer in [[]0, 4[)]"
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --rank 4)
run_case(load_plan_rank_tensor 2 "" "^error: --rank \"1\" with --tensor: one or the other"
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --rank 1 --tensor w)
execute_process(COMMAND ${DTENSOR} load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --format json --read-bw 0.5
                OUTPUT_FILE ${CMAKE_CURRENT_BINARY_DIR}/load_plan.json)
run_case(load_plan_check 0 "^ok: plan [0-9a-f]+ loads the request's 2 tensors" ""
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --check ${CMAKE_CURRENT_BINARY_DIR}/load_plan.json)
run_case(load_plan_check_tensor 2 "" "^error: --tensor \"w\" with --check: one or the other"
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --check ${CMAKE_CURRENT_BINARY_DIR}/load_plan.json --tensor w)
file(READ ${CMAKE_CURRENT_BINARY_DIR}/load_plan.json lp)
string(REGEX REPLACE "\"elements\":12" "\"elements\":13" lp_edited "${lp}")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/load_plan_edited.json "${lp_edited}")
run_case(load_plan_edited 2 "" "^error: --check: load plan: hash .* is not the entries'"
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --check ${CMAKE_CURRENT_BINARY_DIR}/load_plan_edited.json)
# derived totals recomputed on read: an edited total is refused (the hash covers the entries only)
string(REGEX REPLACE "\"total_read_bytes\":[0-9]+" "\"total_read_bytes\":99999" lp_total "${lp}")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/load_plan_total.json "${lp_total}")
run_case(load_plan_edited_total 2 "" "^error: --check: load plan: 'total_read_bytes' is 99999, its reads add up to"
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --check ${CMAKE_CURRENT_BINARY_DIR}/load_plan_total.json)
string(REGEX REPLACE "\"total_us\":[0-9.e+-]+" "\"total_us\":1e9" lp_us "${lp}")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/load_plan_us.json "${lp_us}")
run_case(load_plan_edited_us 2 "" "^error: --check: load plan: 'total_us' is [0-9e.+]+, its reads"
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --check ${CMAKE_CURRENT_BINARY_DIR}/load_plan_us.json)
# the figures the entries give (with the request's dtypes and the cost model): each edit exits 2
string(REGEX REPLACE "\"moved_bytes\":[0-9]+" "\"moved_bytes\":1" lp_moved "${lp}")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/load_plan_moved.json "${lp_moved}")
run_case(load_plan_edited_moved 2 "" "^error: --check: load plan: 'moved_bytes' is 1, its entries give [0-9]+"
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --check ${CMAKE_CURRENT_BINARY_DIR}/load_plan_moved.json)
string(REGEX REPLACE "\"cost_model\":\"default\"" "\"cost_model\":\"pytorch\"" lp_model "${lp}")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/load_plan_model.json "${lp_model}")
run_case(load_plan_edited_model 2 "" "^error: --check: load plan: priced under cost model \"pytorch\", not \"default\""
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --check ${CMAKE_CURRENT_BINARY_DIR}/load_plan_model.json)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/load_ragged.json "{\"tensors\": [{\"name\": \"w\", \"layout\": {\"mesh\": [2], \"shape\": [8], \"dtype\": \"f32\", \"placements\": \"RaggedShard((0,),(1,1))\"}, \"chunks\": [[[0], [8]]]}]}")
run_case(load_plan_ragged 2 "" "^error: --request: load request: tensor \"w\": a RaggedShard layout .*: load requests do not take RaggedShard targets yet"
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_ragged.json)
run_case(cross_mesh_ragged 2 "" "^error: --from: a RaggedShard layout .*: cross-mesh plans [(]--to-mesh[)] do not take RaggedShard layouts yet"
         plan --mesh 2 --to-mesh 2 --shape 8 --from "RaggedShard((0,),(1,1))" --to "S(0)")
run_case(load_plan_overlap 2 "" "^error: tensor w: chunks 0..1 hold more elements than the tensor.s 8: some overlap"
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_overlap.json)
run_case(load_plan_bad_chunk 2 "" "^error: --request: load request: tensor w chunk 0: a chunk is \\[offsets, sizes\\]"
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_badchunk.json)
run_case(load_plan_no_tensor 2 "" "^error: --tensor: no tensor \"x\" in the load request [(]it has w, b[)]"
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --tensor x)
run_case(load_plan_bad_bw 2 "" "^error: --read-bw \"-1\": a number in"
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --read-bw -1)
# the fan-out: replicas received sharded, then gathered inside the mesh (here b's, over mesh dim 1)
run_case(load_plan_gather 0 "fan-out: [12] tensor[(]s[)] received sharded over their replicated mesh dims, then gathered inside the mesh as one batch" ""
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --fanout gather)
run_case(load_plan_gather_tensor 0 "b: shape 9 f32, 2 saved chunk[(]s[)]\n  received as S[(]0[)]\\[0\\]S[(]0[)]\\[1\\], then gathered to S[(]0[)]R" ""
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --fanout gather --tensor b)
execute_process(COMMAND ${DTENSOR} load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --format json --fanout gather
                OUTPUT_FILE ${CMAKE_CURRENT_BINARY_DIR}/load_plan_gather.json)
run_case(load_plan_gather_check 0 "^ok: plan [0-9a-f]+ loads the request's 2 tensors" ""
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --check ${CMAKE_CURRENT_BINARY_DIR}/load_plan_gather.json)
run_case(load_plan_bad_fanout 2 "" "^error: --fanout: fan-out \"broadcast\" is not cheapest, direct or gather"
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --fanout broadcast)
# tune storage: timed reads fitted to the profile's storage field, which load-plan then prices with
string(REPEAT "0123456789abcdef" 512 storage_bytes)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/storage/data.bin "${storage_bytes}")
run_case(tune_storage 0 "storage reads from 1 file[(]s[)] .*page cache dropped.*fit: read_bw_GBps [0-9.e+]+, read_alpha_us [0-9.e+]+.*written to" ""
         tune storage ${CMAKE_CURRENT_BINARY_DIR}/storage --sizes 512,2K,8K --repeats 2 -o ${CMAKE_CURRENT_BINARY_DIR}/storage_profile.json)
run_case(load_plan_storage_profile 0 "cost model default, storage [0-9.e+]+ GB/s" ""
         load-plan --request ${CMAKE_CURRENT_BINARY_DIR}/load_request.json --cost-model ${CMAKE_CURRENT_BINARY_DIR}/storage_profile.json)
run_case(tune_storage_too_big 2 "" "^error: --sizes: no file holds 1048576 bytes [(]the largest has 8192[)]"
         tune storage ${CMAKE_CURRENT_BINARY_DIR}/storage --sizes 512,1M)
run_case(tune_storage_missing 2 "" "^error: PATH: .*nowhere.* is neither a regular file nor a directory"
         tune storage ${CMAKE_CURRENT_BINARY_DIR}/nowhere)

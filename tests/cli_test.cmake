# Runs the dtensor CLI and checks exit codes, stdout and stderr (SPEC §5 contract).
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
run_case(bad_placement 2 "" "^error: malformed placements \"S\\(0\": expected '\\)' at character 4"
         layout --mesh 2 --shape 9 --placements "S(0")
run_case(bad_dim 2 "" "error: tensor dim 2 of S\\(2\\)" layout --mesh 2 --shape 9x5 --placements "S(2)")
run_case(bad_mesh 2 "" "error: .*mesh" layout --mesh 2x0 --shape 9 --placements "RR")
run_case(count_mismatch 2 "" "1 mesh dim\\(s\\) but the mesh has 2" layout --mesh 2x2 --shape 9 --placements "R")
run_case(bad_format 2 "" "--format 'xml'" layout --mesh 2 --shape 9 --placements R --format xml)
run_case(missing_flag 2 "" "error: .*--placements" layout --mesh 2 --shape 9)
run_case(help 0 "--placements" "" layout --help)
run_case(plan_pytorch 0 "\"total_cost_us\":907.42" ""
         plan --mesh 2x4 --shape 8192x8192 --from "S(0)S(1)" --to "S(1)S(0)" --cost-model pytorch --format json)
run_case(plan_text 0 "trace: S\\(0\\)S\\(1\\)->RS\\(1\\)->RS\\(0\\)->S\\(1\\)S\\(0\\)" ""
         plan --mesh 2x4 --shape 8192x8192 --from "S(0)S(1)" --to "S(1)S(0)" --cost-model pytorch)
run_case(plan_explain 0 "runner-up" "" plan --mesh 2x2 --shape 64x64 --from "S(0)R" --to "RS(0)" --explain)
run_case(plan_bad_cost 2 "" "error: cost model 'nope.json'" plan --mesh 2 --shape 8 --from R --to "S(0)" --cost-model nope.json)
run_case(plan_budget 2 "" "smallest budget that admits a plan is"
         plan --mesh 2x4 --shape 1024x1024 --from "S(0)S(1)" --to "S(1)S(0)" --max-memory 0)
run_case(plan_bad_edges 2 "" "unknown edge set 'fast'" plan --mesh 2 --shape 8 --from R --to "S(0)" --edges fast)
run_case(show_text 0 "state 1: RS\\(0\\)" "" show --mesh 2x2 --shape 9x5 --from "S(0)S(1)" --to "RS(0)")
run_case(show_svg 0 "<svg xmlns" "" show --mesh 2x2 --shape 9x5 --from "S(0)S(1)" --to "RS(0)" --format svg)
run_case(show_dot 0 "^digraph" "" show --mesh 2x2 --shape 9x5 --from "S(0)S(1)" --to "RS(0)" --format dot)
run_case(show_bad_dims 2 "" "--dims names tensor dim 5" show --mesh 2 --shape 9x5 --from "S(0)" --to R --dims 0,5)
run_case(simulate_ok 0 "verified: every rank" "" simulate --mesh 2x3 --shape 9x5 --from "P(max)R" --to "S(1)S(0)" --dtype i64)
run_case(simulate_json 0 "\"verified\":true" "" simulate --mesh 2 --shape 3 --from "S(0)" --to R --format json)

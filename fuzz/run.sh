#!/bin/sh
# fuzz/run.sh: runs every fuzz target for FUZZ_SECONDS (default 60) from its seed corpus, as
# `make fuzz` does; FUZZ_BUILD names the build tree (default build-fuzz), FUZZ_TARGETS a subset
# (e.g. "trace network"). Prints each target's executions.
# Exits non-zero when a target finds a crash, a leak, a timeout or an out-of-memory input (written
# to the working folder as crash-*, leak-*, timeout-*, oom-*, as libFuzzer names them).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${FUZZ_BUILD:-build-fuzz}
seconds=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-"trace trace_json json_config network roce_config libra_input host_trace kineto_trace graph_set synth_model partition_input state_dict study_files replay_plan"}
status=0
for target in $targets; do
  dict=""
  case $target in
    trace|partition_input|state_dict) ;;
    network|roce_config|libra_input|study_files) dict="-dict=$here/dict/yaml.dict" ;;
    *) dict="-dict=$here/dict/json.dict" ;;
  esac
  work=$build/fuzz/run_$target
  log=$build/fuzz/run_$target.log
  mkdir -p "$build/fuzz"
  "$here/smoke.sh" "$work" "$build/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=20 \
    -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 $dict "$work/new" \
    "$here/corpus/$target" >"$log" 2>&1
  code=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  echo "fuzz_$target: ${runs:-?} executions in ${seconds} s, exit $code (log: $log)"
  [ $code -eq 0 ] || status=1
done
exit $status

#!/usr/bin/env bash
# Runs the API server under a profiler, for the benchmark tool:
#
#   PROFILE=massif SERVER_BIN=target/release/apiserver PROFILE_OUT=/tmp/prof \
#     target/release/apiserver-bench --phases memory --no-write \
#     --server-bin tools/profile-server.sh
#
# PROFILE is massif or heaptrack (heap: build the server with
# `--features system-alloc`, as both see only malloc, not mimalloc), callgrind (instructions; collection starts
# CALLGRIND_DELAY seconds after the start, default 14, so that start-up is
# left out) or perf (cpu-clock samples; hardware counters are often missing
# in VMs; PERF_CALLGRAPH=1 adds call chains). The tool SIGKILLs this script when it is done with a server; the
# profiler itself keeps running (and serving) until it is stopped:
#
#   callgrind_control -d PID   # callgrind: dump now, before the shutdown work
#   kill -INT $(cat "$PROFILE_OUT/pids")
#
# which makes it write its file into PROFILE_OUT. Then ms_print,
# callgrind_annotate --inclusive=yes --tree=calling, or perf report.
set -euo pipefail
bin=${SERVER_BIN:-target/release/apiserver}
out=${PROFILE_OUT:-/tmp/apiserver-profile}
mkdir -p "$out"
case "${PROFILE:-massif}" in
massif)
  valgrind --tool=massif --massif-out-file="$out/massif.%p.out" --threshold=0.5 \
    --depth=40 --max-snapshots=200 --detailed-freq=5 "$bin" "$@" &
  pid=$!
  ;;
heaptrack)
  heaptrack -o "$out/heaptrack.$$" "$bin" "$@" &
  pid=$!
  ;;
callgrind)
  valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.%p.out" \
    --instr-atstart=no "$bin" "$@" &
  pid=$!
  (sleep "${CALLGRIND_DELAY:-14}" && callgrind_control -i on "$pid" >/dev/null) &
  ;;
perf)
  # PERF_CALLGRAPH=1 records call chains (the kernel's are whole; the
  # release binary has no frame pointers, so its own are cut short).
  perf record -e cpu-clock -F 2000 ${PERF_CALLGRAPH:+-g} -o "$out/perf.$$.data" -- "$bin" "$@" &
  pid=$!
  ;;
*)
  echo "PROFILE must be massif, heaptrack, callgrind or perf" >&2
  exit 2
  ;;
esac
echo "$pid" >>"$out/pids"
wait

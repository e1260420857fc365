#!/usr/bin/env bash
# Where the result lag of the latency bench goes, hop by hop: runs its `lag`
# part (official SDK servers, 0.1-5 s tasks) under a machine-wide trace of
# the scheduler (perf, as root), then splits each sample into the peer's own
# delay after its settled timestamp, the wake-up of the caller, our work up
# to the result (or the CLI's exit), and the CLI's exit being seen
# (lag_hops.py says which is which).
#   bash host-native/benches/lag_hops.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
command -v perf >/dev/null || { echo "lag_hops.sh needs perf (linux-perf) and root" >&2; exit 1; }
cargo bench -q -p toolnexus-host-native --bench latency --no-run
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
uptime
# The offset from the trace's clock (CLOCK_MONOTONIC) to the wall clock the samples use.
offset=$(python3 -c 'import time; print(time.time() - time.clock_gettime(time.CLOCK_MONOTONIC))')
TOOLNEXUS_BENCH_SAMPLES=1 perf record -q -a -k CLOCK_MONOTONIC \
  -e sched:sched_waking,sched:sched_switch,sched:sched_process_exit -o "$dir/perf.data" -- \
  cargo bench -q -p toolnexus-host-native --bench latency -- lag 2>"$dir/samples.txt"
uptime
perf script -i "$dir/perf.data" -F comm,tid,cpu,time,event,trace >"$dir/trace.txt" 2>/dev/null
python3 host-native/benches/lag_hops.py "$dir/trace.txt" "$dir/samples.txt" "$offset"

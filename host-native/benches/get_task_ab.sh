#!/usr/bin/env bash
# GetTask A/B of two `toolnexus` binaries under the load of get_task.sh,
# interleaved (A, B, A, B, ...) so a noisy machine hurts both alike.
#   bash host-native/benches/get_task_ab.sh BIN_A BIN_B [ROUNDS] [SECONDS] [CONNECTIONS]
# Prints, per round and as medians: req/s, and the server's CPU time per
# request (user+system, from /proc/PID/stat, over the wrk run only).
set -euo pipefail
A=$1; B=$2; ROUNDS=${3:-5}; SECS=${4:-5}; CONNS=${5:-64}
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
LUA=host-native/benches/get_task.lua
TICK=$(getconf CLK_TCK)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
one() {
  local bin=$1 port id body pid t0 t1 out rps
  port=$(free_port)
  "$bin" serve --addr "127.0.0.1:$port" --llm echo >/dev/null 2>&1 & pid=$!
  for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$port/.well-known/agent-card.json" >/dev/null && break; sleep 0.05; done
  id=$(curl -s "http://127.0.0.1:$port/" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m1","parts":[{"text":"bench"}]}}}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["task"]["id"])')
  body="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{\"id\":\"$id\"}}"
  t0=$(cpu_ticks $pid)
  out=$(BODY="$body" A2A_VERSION=1.0 wrk -t2 -c"$CONNS" -d"${SECS}s" -s "$LUA" "http://127.0.0.1:$port/")
  t1=$(cpu_ticks $pid)
  kill $pid; wait $pid 2>/dev/null || true
  rps=$(sed -n 's/^Requests\/sec: *//p' <<<"$out")
  local reqs; reqs=$(sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' <<<"$out")
  python3 -c "print(f'{float(\"$rps\"):.0f} {($t1-$t0)*1e6/$TICK/max(1,$reqs):.2f}')"
}
ra=(); rb=(); ca=(); cb=()
for r in $(seq 1 "$ROUNDS"); do
  read -r a_rps a_cpu < <(one "$A"); read -r b_rps b_cpu < <(one "$B")
  ra+=("$a_rps"); rb+=("$b_rps"); ca+=("$a_cpu"); cb+=("$b_cpu")
  echo "round $r: A $a_rps req/s ${a_cpu} us/req   B $b_rps req/s ${b_cpu} us/req"
done
python3 - "${ra[*]}" "${rb[*]}" "${ca[*]}" "${cb[*]}" <<'PY'
import statistics as st, sys
ra, rb, ca, cb = ([float(x) for x in s.split()] for s in sys.argv[1:])
print(f"median: A {st.median(ra):.0f} req/s {st.median(ca):.2f} us/req   B {st.median(rb):.0f} req/s {st.median(cb):.2f} us/req   B/A {st.median(rb)/st.median(ra):.3f}")
PY

#!/usr/bin/env bash
# GetTask over HTTP+JSON (GET /rest/tasks/{id}) vs JSON-RPC (POST / GetTask)
# on one `toolnexus serve`, interleaved (JSON-RPC, REST, JSON-RPC, ...) so a
# noisy machine hurts both alike. The load generator is wrk, as get_task.sh.
#   bash host-native/benches/get_task_rest.sh [BIN] [ROUNDS] [SECONDS] [CONNECTIONS]
# Prints per round and as medians: req/s of each binding and REST/JSON-RPC.
set -euo pipefail
BIN=${1:-target/release/toolnexus}; ROUNDS=${2:-5}; SECS=${3:-5}; CONNS=${4:-64}
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN" serve --addr "127.0.0.1:$port" --llm echo >/dev/null 2>&1 & pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$port/.well-known/agent-card.json" >/dev/null && break; sleep 0.05; done
id=$(curl -s "http://127.0.0.1:$port/rest/message:send" -H 'Content-Type: application/a2a+json' -H 'A2A-Version: 1.0' -d '{"message":{"role":"ROLE_USER","messageId":"m1","parts":[{"text":"bench"}]}}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["task"]["id"])')
body="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{\"id\":\"$id\"}}"
rps() { sed -n 's/^Requests\/sec: *//p'; }
rj=(); rr=()
for r in $(seq 1 "$ROUNDS"); do
  j=$(BODY="$body" A2A_VERSION=1.0 wrk -t2 -c"$CONNS" -d"${SECS}s" -s host-native/benches/get_task.lua "http://127.0.0.1:$port/" | rps)
  s=$(wrk -t2 -c"$CONNS" -d"${SECS}s" -s host-native/benches/get_task_rest.lua "http://127.0.0.1:$port/rest/tasks/$id" | rps)
  rj+=("$j"); rr+=("$s")
  echo "round $r: JSON-RPC $j req/s   REST $s req/s"
done
python3 - "${rj[*]}" "${rr[*]}" <<'PY'
import statistics as st, sys
rj, rr = ([float(x) for x in s.split()] for s in sys.argv[1:])
print(f"median: JSON-RPC {st.median(rj):.0f} req/s   REST {st.median(rr):.0f} req/s   REST/JSON-RPC {st.median(rr)/st.median(rj):.3f}")
PY

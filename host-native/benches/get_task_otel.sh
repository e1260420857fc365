#!/usr/bin/env bash
# GetTask throughput of `toolnexus serve` with OpenTelemetry span export off,
# on with a live OTLP/HTTP receiver (a Python stdlib server on 127.0.0.1 that
# answers every POST /v1/traces with 200), and on with a dead collector (a
# port nothing listens on: every export is refused). The load is
# get_task.sh's (wrk, 2 threads, CONNECTIONS connections, SECONDS s,
# loopback), the modes interleaved (off, live, dead, off, ...) so a noisy
# machine hurts all alike. A figure, not a test.
#   bash host-native/benches/get_task_otel.sh [ROUNDS] [SECONDS] [CONNECTIONS]
# TOOLNEXUS_BIN=path measures that binary instead of building target/release/toolnexus.
# Prints per round and as medians: req/s, the server's CPU time per request
# (user+system over the wrk run), its peak RSS (VmHWM), and, from the line
# serve prints at exit, the spans dropped (queue full) and not accepted.
set -euo pipefail
ROUNDS=${1:-3}; SECS=${2:-5}; CONNS=${3:-64}
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; }
if [ -z "${TOOLNEXUS_BIN:-}" ]; then cargo build -q --release -p toolnexus-host-native; fi
BIN=${TOOLNEXUS_BIN:-target/release/toolnexus}
LUA=host-native/benches/get_task.lua
TICK=$(getconf CLK_TCK)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/toolnexus-otel-bench.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# The live receiver: reads each export, answers 200, counts the bytes.
cat >"$WORK/sink.py" <<'PY'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0)); self.rfile.read(n)
        self.send_response(200); self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(f"listening on http://127.0.0.1:{s.server_port}", flush=True)
s.serve_forever()
PY
python3 "$WORK/sink.py" >"$WORK/sink.out" & pids+=($!)
for _ in $(seq 1 200); do [ -s "$WORK/sink.out" ] && break; sleep 0.05; done
LIVE=$(sed -n 's/^listening on //p' "$WORK/sink.out")
DEAD="http://127.0.0.1:$(free_port)"

# one MODE: prints "REQ/S US_PER_REQ RSS_KB DROPPED FAILED".
one() {
  local mode=$1 port pid id body check env=()
  case $mode in
    live) env=(OTEL_EXPORTER_OTLP_ENDPOINT="$LIVE") ;;
    dead) env=(OTEL_EXPORTER_OTLP_ENDPOINT="$DEAD") ;;
  esac
  port=$(free_port)
  env "${env[@]}" "$BIN" serve --addr "127.0.0.1:$port" --llm echo >/dev/null 2>"$WORK/serve.err" & pid=$!
  for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$port/.well-known/agent-card.json" >/dev/null && break; sleep 0.05; done
  id=$(curl -s "http://127.0.0.1:$port/" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \
    -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m1","parts":[{"text":"bench"}]}}}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["task"]["id"])')
  body="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{\"id\":\"$id\"}}"
  check=$(curl -s "http://127.0.0.1:$port/" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' -d "$body")
  grep -q TASK_STATE_COMPLETED <<<"$check" || { echo "$mode: GetTask check failed: $check" >&2; kill $pid; return 1; }
  local t0 t1 out rps reqs rss
  t0=$(cpu_ticks $pid)
  out=$(BODY="$body" A2A_VERSION=1.0 wrk -t2 -c"$CONNS" -d"${SECS}s" -s "$LUA" "http://127.0.0.1:$port/")
  t1=$(cpu_ticks $pid)
  rss=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  kill $pid; wait $pid 2>/dev/null || true
  rps=$(sed -n 's/^Requests\/sec: *//p' <<<"$out")
  reqs=$(sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' <<<"$out")
  grep -q "Non-2xx" <<<"$out" && echo "warning: $mode: $(grep Non-2xx <<<"$out")" >&2
  local dropped failed
  dropped=$(sed -n 's/.* \([0-9]*\) spans dropped.*/\1/p' "$WORK/serve.err" | tail -1)
  failed=$(sed -n 's/.*, \([0-9]*\) not accepted.*/\1/p' "$WORK/serve.err" | tail -1)
  python3 -c "print(f'{float(\"$rps\"):.0f} {($t1-$t0)*1e6/$TICK/max(1,$reqs):.2f} $rss ${dropped:-0} ${failed:-0}')"
}

declare -A R C M D F
for m in off live dead; do R[$m]=""; C[$m]=""; M[$m]=""; D[$m]=""; F[$m]=""; done
for r in $(seq 1 "$ROUNDS"); do
  line="round $r:"
  for m in off live dead; do
    read -r rps cpu rss dropped failed < <(one $m)
    R[$m]+=" $rps"; C[$m]+=" $cpu"; M[$m]+=" $rss"; D[$m]+=" $dropped"; F[$m]+=" $failed"
    line+="  $m $rps req/s ${cpu} us/req ${rss} KB dropped $dropped failed $failed"
  done
  echo "$line"
done
python3 - "$CONNS" "$SECS" "${R[off]}" "${R[live]}" "${R[dead]}" "${C[off]}" "${C[live]}" "${C[dead]}" \
  "${M[off]}" "${M[live]}" "${M[dead]}" "${D[off]}" "${D[live]}" "${D[dead]}" "${F[off]}" "${F[live]}" "${F[dead]}" <<'PY'
import statistics as st, sys
conns, secs = sys.argv[1], sys.argv[2]
v = [[float(x) for x in s.split()] for s in sys.argv[3:]]
r, c, m, d, f = v[0:3], v[3:6], v[6:9], v[9:12], v[12:15]
print(f"GetTask, {conns} connections, {secs} s x {len(r[0])} rounds, wrk -t2, medians:")
for i, name in enumerate(("tracing off", "live OTLP", "dead OTLP")):
    print(f"  {name:12}: {st.median(r[i]):8.0f} req/s  {st.median(c[i]):6.2f} us CPU/req  "
          f"peak RSS {st.median(m[i])/1024:6.1f} MB  spans dropped {st.median(d[i]):.0f}, refused {st.median(f[i]):.0f}")
PY

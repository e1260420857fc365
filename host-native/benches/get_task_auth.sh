#!/usr/bin/env bash
# GetTask throughput of `toolnexus serve` (release) with each caller check:
# no auth, an API key (a2a.auth.apiKeys), a JWT (a2a.auth.jwt, RS256, keys
# from a JWKS on 127.0.0.1 served by tests/peers/jwt_tool.py). The load is
# get_task.sh's (wrk, 2 threads, CONNECTIONS connections, SECONDS s, loopback),
# the modes interleaved (none, key, jwt, none, ...) so a noisy machine hurts
# all alike. A figure, not a test: nothing is asserted beyond each mode's
# GetTask answering (and a wrong credential being refused: 401).
#   bash host-native/benches/get_task_auth.sh [ROUNDS] [SECONDS] [CONNECTIONS]
# TOOLNEXUS_BIN=path measures that binary instead of building target/release/toolnexus.
# Prints, per round and as medians: req/s and the server's CPU time per
# request (user+system, /proc/PID/stat, over the wrk run only); the CPU time
# a verification adds is the difference to "none".
set -euo pipefail
ROUNDS=${1:-3}; SECS=${2:-5}; CONNS=${3:-64}
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; }
bash tests/peers/setup.sh >/dev/null
if [ -z "${TOOLNEXUS_BIN:-}" ]; then cargo build -q --release -p toolnexus-host-native; fi
BIN=${TOOLNEXUS_BIN:-target/release/toolnexus}
PY=tests/peers/.venv/bin/python
LUA=host-native/benches/get_task.lua
TICK=$(getconf CLK_TCK)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/toolnexus-auth-bench.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# The issuer: keys, a JWKS on 127.0.0.1, one RS256 token.
"$PY" tests/peers/jwt_tool.py keys "$WORK/keys" >/dev/null
"$PY" tests/peers/jwt_tool.py serve-jwks "$WORK/keys" >"$WORK/jwks.out" & pids+=($!)
for _ in $(seq 1 200); do [ -s "$WORK/jwks.out" ] && break; sleep 0.05; done
JWKS="$(sed -n 's/^listening on //p' "$WORK/jwks.out")/jwks.json"
TOKEN=$("$PY" tests/peers/jwt_tool.py tokens "$WORK/keys" \
  '{"t": {"claims": {"iss": "https://issuer.bench", "aud": "bench", "sub": "bench", "iat": "now", "exp": "now+3600"}}}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["t"])')
KEY="bench-key-0123456789abcdef"
printf '{"a2a":{"auth":{"apiKeys":{"in":"header","name":"X-API-Key","keys":{"bench":"${BENCH_KEY}"}}}}}\n' >"$WORK/key.json"
printf '{"a2a":{"auth":{"jwt":{"issuer":"https://issuer.bench","audience":"bench","jwksUrl":"%s","algorithms":["RS256"],"leewaySeconds":30}}}}\n' "$JWKS" >"$WORK/jwt.json"

# one MODE: starts serve, makes a task as the caller, checks GetTask answers
# it (and a wrong credential is refused), runs wrk; prints "REQ/S US_PER_REQ".
one() {
  local mode=$1 port pid id body check header="" value="" config=()
  case $mode in
    key) config=(--config "$WORK/key.json"); header=X-API-Key; value=$KEY ;;
    jwt) config=(--config "$WORK/jwt.json"); header=Authorization; value="Bearer $TOKEN" ;;
  esac
  port=$(free_port)
  BENCH_KEY=$KEY "$BIN" serve --addr "127.0.0.1:$port" --llm echo "${config[@]}" >/dev/null 2>"$WORK/serve.err" & pid=$!
  for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$port/.well-known/agent-card.json" >/dev/null && break; sleep 0.05; done
  local cred=(); [ -n "$header" ] && cred=(-H "$header: $value")
  id=$(curl -s "http://127.0.0.1:$port/" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "${cred[@]}" \
    -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m1","parts":[{"text":"bench"}]}}}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["task"]["id"])')
  body="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{\"id\":\"$id\"}}"
  check=$(curl -s "http://127.0.0.1:$port/" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' "${cred[@]}" -d "$body")
  grep -q TASK_STATE_COMPLETED <<<"$check" || { echo "$mode: GetTask check failed: $check" >&2; kill $pid; return 1; }
  if [ -n "$header" ]; then
    local refused
    refused=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/" -H 'Content-Type: application/json' \
      -H 'A2A-Version: 1.0' -H "$header: ${value}x" -d "$body")
    [ "$refused" = 401 ] || echo "warning: $mode: a wrong credential got $refused, not 401 (is auth on?)" >&2
  fi
  local t0 t1 out rps reqs
  t0=$(cpu_ticks $pid)
  out=$(BODY="$body" A2A_VERSION=1.0 AUTH_HEADER="$header" AUTH_VALUE="$value" \
    wrk -t2 -c"$CONNS" -d"${SECS}s" -s "$LUA" "http://127.0.0.1:$port/")
  t1=$(cpu_ticks $pid)
  kill $pid; wait $pid 2>/dev/null || true
  rps=$(sed -n 's/^Requests\/sec: *//p' <<<"$out")
  reqs=$(sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' <<<"$out")
  grep -q "Non-2xx" <<<"$out" && echo "warning: $mode: $(grep Non-2xx <<<"$out")" >&2
  python3 -c "print(f'{float(\"$rps\"):.0f} {($t1-$t0)*1e6/$TICK/max(1,$reqs):.2f}')"
}

declare -A R C
for m in none key jwt; do R[$m]=""; C[$m]=""; done
for r in $(seq 1 "$ROUNDS"); do
  line="round $r:"
  for m in none key jwt; do
    read -r rps cpu < <(one $m)
    R[$m]+=" $rps"; C[$m]+=" $cpu"
    line+="  $m $rps req/s ${cpu} us/req"
  done
  echo "$line"
done
python3 - "${R[none]}" "${R[key]}" "${R[jwt]}" "${C[none]}" "${C[key]}" "${C[jwt]}" "$CONNS" "$SECS" <<'PY'
import statistics as st, sys
r = [[float(x) for x in s.split()] for s in sys.argv[1:4]]
c = [[float(x) for x in s.split()] for s in sys.argv[4:7]]
conns, secs = sys.argv[7], sys.argv[8]
print(f"GetTask, {conns} connections, {secs} s x {len(r[0])} rounds, wrk -t2, medians:")
base = st.median(c[0])
for name, rr, cc in zip(("no auth", "API key", "JWT RS256"), r, c):
    extra = st.median(cc) - base
    tail = "" if name == "no auth" else f"   verification ~{extra:.2f} us CPU"
    print(f"  {name:10}: {st.median(rr):8.0f} req/s  {st.median(cc):6.2f} us CPU/req{tail}")
PY

#!/usr/bin/env bash
# Re-captures the raw wire facts summarised in WIRE.md: starts each official-SDK
# peer server in each mode on 127.0.0.1, fires curl probes, prints
# "status / content-type / body" for each, stops the server.
#
# Usage: bash tests/peers/capture_wire.sh [py|js ...] > /tmp/wire.txt
# Ports: $WIRE_PORT (default 18950) and WIRE_PORT+1.  Needs setup.sh first.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BASE_PORT="${WIRE_PORT:-18950}"
SERVERS=("$@"); [[ ${#SERVERS[@]} -gt 0 ]] || SERVERS=(py js)

SRV_PID=""
cleanup() { [[ -n "$SRV_PID" ]] && kill -TERM "$SRV_PID" 2>/dev/null && wait "$SRV_PID" 2>/dev/null; SRV_PID=""; }
trap cleanup EXIT

start() { # name port mode
  local out; out="$(mktemp)"
  case "$1" in
    py) "$HERE/.venv/bin/python" "$HERE/py_server.py" --port "$2" $3 >"$out" 2>/dev/null & ;;
    js) node "$HERE/js/server.mjs" --port "$2" $3 >"$out" 2>/dev/null & ;;
  esac
  SRV_PID=$!
  for _ in $(seq 100); do grep -q "listening on" "$out" && { rm -f "$out"; return 0; }; sleep 0.1; done
  echo "server $1 did not start" >&2; exit 1
}

URL=""
# probe "title" [curl args...]   (POSTs to $URL unless args say otherwise)
probe() {
  local title="$1"; shift
  local body_file; body_file="$(mktemp)"
  local meta
  meta="$(curl -sS -o "$body_file" -w '%{http_code} %{content_type}' --max-time 15 "$@")" || true
  echo "--- $title"
  echo "HTTP $meta"
  head -c "${MAXBODY:-2500}" "$body_file"; echo
  LAST_BODY="$(cat "$body_file")"
  rm -f "$body_file"
}
rpc() { # title header-or-empty json
  local title="$1" hdr="$2" json="$3"
  if [[ -n "$hdr" ]]; then
    probe "$title" "$URL" -H 'Content-Type: application/json' -H "$hdr" -d "$json"
  else
    probe "$title" "$URL" -H 'Content-Type: application/json' -d "$json"
  fi
}
field() { python3 -c 'import json,sys
d=json.loads(sys.argv[1]); r=d.get("result",{})
print((r.get("task") or r).get("id",""))' "$1" 2>/dev/null || true; }

msg10() { echo "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"SendMessage\",\"params\":{\"message\":{\"role\":\"ROLE_USER\",\"messageId\":\"m-$1\",\"parts\":[{\"text\":\"$2\"}]}${3:+,\"configuration\":$3}}}"; }
msg03() { echo "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"message/send\",\"params\":{\"message\":{\"kind\":\"message\",\"role\":\"user\",\"messageId\":\"m-$1\",\"parts\":[{\"kind\":\"text\",\"text\":\"$2\"}]}${3:+,\"configuration\":$3}}}"; }
V1='A2A-Version: 1.0'

port="$BASE_PORT"
for srv in "${SERVERS[@]}"; do
  for mode in "" "--compat-03"; do
    start "$srv" "$port" "$mode"
    URL="http://127.0.0.1:$port/"
    CARD="http://127.0.0.1:$port/.well-known/agent-card.json"
    echo; echo "================ $srv server ${mode:-(1.0-only)} on $URL"
    MAXBODY=4000 probe "card, no A2A-Version" "$CARD"
    MAXBODY=4000 probe "card, A2A-Version: 1.0" "$CARD" -H "$V1"
    MAXBODY=4000 probe "card, A2A-Version: 0.3" "$CARD" -H 'A2A-Version: 0.3'

    rpc "SendMessage hello, A2A-Version: 1.0" "$V1" "$(msg10 1 'hello')"
    rpc "SendMessage, no version header" "" "$(msg10 2 'hello')"
    rpc "SendMessage, A2A-Version: 1" "A2A-Version: 1" "$(msg10 3 'hello')"
    rpc "SendMessage, A2A-Version: 1.0.0" "A2A-Version: 1.0.0" "$(msg10 3 'hello')"
    rpc "SendMessage, A2A-Version: 0.3" "A2A-Version: 0.3" "$(msg10 4 'hello')"
    rpc "SendMessage, A2A-Version: 2.0" "A2A-Version: 2.0" "$(msg10 4 'hello')"
    rpc "SendMessage fail (blocking)" "$V1" "$(msg10 5 'fail now')"
    rpc "SendMessage slow, returnImmediately" "$V1" "$(msg10 6 'slow x' '{"returnImmediately":true}')"
    TID="$(field "$LAST_BODY")"
    rpc "GetTask (slow task)" "$V1" "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"GetTask\",\"params\":{\"id\":\"$TID\"}}"
    rpc "GetTask historyLength=0" "$V1" "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"GetTask\",\"params\":{\"id\":\"$TID\",\"historyLength\":0}}"
    rpc "CancelTask" "$V1" "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"CancelTask\",\"params\":{\"id\":\"$TID\"}}"
    rpc "CancelTask again (already canceled)" "$V1" "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"CancelTask\",\"params\":{\"id\":\"$TID\"}}"
    rpc "GetTask unknown id" "$V1" '{"jsonrpc":"2.0","id":10,"method":"GetTask","params":{"id":"no-such-task"}}'
    rpc "CancelTask unknown id" "$V1" '{"jsonrpc":"2.0","id":11,"method":"CancelTask","params":{"id":"no-such-task"}}'
    rpc "GetTask without header" "" '{"jsonrpc":"2.0","id":12,"method":"GetTask","params":{"id":"no-such-task"}}'
    rpc "unknown method" "$V1" '{"jsonrpc":"2.0","id":13,"method":"Frobnicate","params":{}}'
    rpc "SendMessage role:\"user\" (0.3 spelling) in 1.0" "$V1" '{"jsonrpc":"2.0","id":14,"method":"SendMessage","params":{"message":{"role":"user","messageId":"m14","parts":[{"text":"hello"}]}}}'
    rpc "SendMessage role:1 (enum number)" "$V1" '{"jsonrpc":"2.0","id":15,"method":"SendMessage","params":{"message":{"role":1,"messageId":"m15","parts":[{"text":"hello"}]}}}'
    rpc "SendMessage without messageId" "$V1" '{"jsonrpc":"2.0","id":16,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","parts":[{"text":"hello"}]}}}'
    rpc "SendMessage without role" "$V1" '{"jsonrpc":"2.0","id":16,"method":"SendMessage","params":{"message":{"messageId":"m16b","parts":[{"text":"hello"}]}}}'
    rpc "SendMessage empty parts" "$V1" '{"jsonrpc":"2.0","id":16,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m16c","parts":[]}}}'
    rpc "SendMessage string id \"abc\"" "$V1" '{"jsonrpc":"2.0","id":"abc","method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m-abc","parts":[{"text":"hello"}]}}}'
    rpc "SendMessage id null" "$V1" '{"jsonrpc":"2.0","id":null,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m-null","parts":[{"text":"hello"}]}}}'
    rpc "SendMessage data part + url part" "$V1" '{"jsonrpc":"2.0","id":40,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m40","parts":[{"text":"hello"},{"data":{"a":1},"mediaType":"application/json"},{"url":"http://127.0.0.1/x.txt","filename":"x.txt","mediaType":"text/plain"}]}}}'
    rpc "SendStreamingMessage (SSE)" "$V1" '{"jsonrpc":"2.0","id":41,"method":"SendStreamingMessage","params":{"message":{"role":"ROLE_USER","messageId":"m41","parts":[{"text":"hello"}]}}}'
    rpc "0.3 message/stream (SSE)" "" '{"jsonrpc":"2.0","id":42,"method":"message/stream","params":{"message":{"kind":"message","role":"user","messageId":"m42","parts":[{"kind":"text","text":"hello"}]}}}'
    rpc "ListTasks" "$V1" '{"jsonrpc":"2.0","id":43,"method":"ListTasks","params":{"pageSize":1}}' 
    rpc "SendMessage snake_case return_immediately" "$V1" "$(msg10 17 'slow y' '{"return_immediately":true}')"
    rpc "SendMessage 0.3 config blocking:false in 1.0 method" "$V1" "$(msg10 18 'slow z' '{"blocking":false}')"
    rpc "toolnexus-style (kind parts, blocking:false), no header" "" '{"method":"SendMessage","params":{"message":{"role":"user","messageId":"m1","parts":[{"kind":"text","text":"hi"}]},"configuration":{"blocking":false}}}'
    rpc "toolnexus-style + jsonrpc/id, no header" "" '{"jsonrpc":"2.0","id":19,"method":"SendMessage","params":{"message":{"role":"user","messageId":"m1","parts":[{"kind":"text","text":"hi"}]},"configuration":{"blocking":false}}}'
    rpc "toolnexus-style + jsonrpc/id, A2A-Version: 1.0" "$V1" '{"jsonrpc":"2.0","id":20,"method":"SendMessage","params":{"message":{"role":"user","messageId":"m1","parts":[{"kind":"text","text":"hi"}]},"configuration":{"blocking":false}}}'
    rpc "0.3 message/send, no header" "" "$(msg03 21 'hello')"
    rpc "0.3 message/send, A2A-Version: 1.0" "$V1" "$(msg03 22 'hello')"
    rpc "0.3 message/send fail" "" "$(msg03 23 'fail now')"
    rpc "0.3 message/send slow, blocking:false" "" "$(msg03 24 'slow x' '{"blocking":false}')"
    TID3="$(field "$LAST_BODY")"
    rpc "0.3 tasks/get" "" "{\"jsonrpc\":\"2.0\",\"id\":25,\"method\":\"tasks/get\",\"params\":{\"id\":\"$TID3\"}}"
    rpc "0.3 tasks/cancel" "" "{\"jsonrpc\":\"2.0\",\"id\":26,\"method\":\"tasks/cancel\",\"params\":{\"id\":\"$TID3\"}}"
    rpc "0.3 tasks/get after cancel" "" "{\"jsonrpc\":\"2.0\",\"id\":27,\"method\":\"tasks/get\",\"params\":{\"id\":\"$TID3\",\"historyLength\":1}}"
    rpc "0.3 tasks/get unknown id" "" '{"jsonrpc":"2.0","id":28,"method":"tasks/get","params":{"id":"no-such-task"}}'
    rpc "0.3 message/send without kind fields" "" '{"jsonrpc":"2.0","id":29,"method":"message/send","params":{"message":{"role":"user","messageId":"m29","parts":[{"text":"hello"}]}}}'
    rpc "1.0 GetTask on a task created via 0.3" "$V1" "{\"jsonrpc\":\"2.0\",\"id\":30,\"method\":\"GetTask\",\"params\":{\"id\":\"$TID3\"}}"
    rpc "missing jsonrpc field" "$V1" '{"id":31,"method":"GetTask","params":{"id":"x"}}'
    rpc "missing id (notification)" "$V1" '{"jsonrpc":"2.0","method":"GetTask","params":{"id":"x"}}'
    rpc "batch request" "$V1" '[{"jsonrpc":"2.0","id":32,"method":"GetTask","params":{"id":"x"}}]'
    rpc "params not an object" "$V1" '{"jsonrpc":"2.0","id":33,"method":"GetTask","params":"x"}'
    rpc "non-JSON body" "$V1" 'this is not json'
    probe "missing Content-Type (valid JSON body)" "$URL" -H 'Content-Type:' -H "$V1" --data-binary "$(msg10 34 'hello')"
    probe "Content-Type: text/plain (valid JSON body)" "$URL" -H 'Content-Type: text/plain' -H "$V1" --data-binary "$(msg10 35 'hello')"
    probe "Content-Type: application/a2a+json" "$URL" -H 'Content-Type: application/a2a+json' -H "$V1" --data-binary "$(msg10 36 'hello')"
    probe "empty body" "$URL" -X POST -H 'Content-Type: application/json' -H "$V1"
    probe "GET / (wrong HTTP method)" "$URL"
    probe "POST /other-path" "${URL}other" -H 'Content-Type: application/json' -H "$V1" -d "$(msg10 37 'hello')"
    MAXBODY=6000 rpc "SendStreamingMessage chunks 3 (SSE, WIRE.md §9)" "$V1" '{"jsonrpc":"2.0","id":44,"method":"SendStreamingMessage","params":{"message":{"role":"ROLE_USER","messageId":"m44","parts":[{"text":"chunks 3"}]}}}'
    MAXBODY=6000 rpc "0.3 message/stream chunks 3 (SSE, WIRE.md §9)" "" '{"jsonrpc":"2.0","id":45,"method":"message/stream","params":{"message":{"kind":"message","role":"user","messageId":"m45","parts":[{"kind":"text","text":"chunks 3"}]}}}'
    cleanup
    port=$((port + 1))
  done
done

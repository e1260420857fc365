#!/usr/bin/env bash
# The component's figures (a benchmark, not a test):
#   1. sizes of toolnexus-a2a.wasm and toolnexus-agent.wasm, raw and gzip -9
#   2. instantiate time per call (InstancePre) and call overhead component vs
#      native (benches/component.rs)
#   3. GetTask req/s (wrk, like get_task.sh) of the agent component under
#      `toolnexus serve --component` and under `wasmtime serve`, vs native
#      `toolnexus serve`; the components keep tasks in a file store, the
#      native server in memory and in a file store.
#   bash host-native/benches/component.sh [SECONDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
SECS="${1:-10}"; CONNS="${2:-64}"
command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; }
echo "== sizes"
bash wasm/component/build.sh 2>/dev/null | grep -E '^toolnexus-'
PROFILE=component-bench
cargo build -q --profile $PROFILE -p toolnexus-host-native --features component
BIN=target/$PROFILE/toolnexus
WASMTIME=$(bash wasm/component/setup.sh --wasmtime)
AGENT=wasm/component/dist/toolnexus-agent.wasm

echo "== instantiate and call"
cargo bench -q -p toolnexus-host-native --features component --profile $PROFILE --bench component 2>&1 | grep -v "^\s*\(Compiling\|Finished\|Running\)"

LUA=host-native/benches/get_task.lua
pids=()
tmp=$(mktemp -d)
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_card() { for _ in $(seq 1 600); do curl -sf "$1/.well-known/agent-card.json" >/dev/null && return 0; sleep 0.1; done; echo "no card at $1" >&2; return 1; }
rps() { sed -n 's/^Requests\/sec: *//p'; }
measure() {
  local url=$1 report=$2 id body check
  id=$(curl -s "$url/" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m1","parts":[{"text":"bench"}]}}}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["task"]["id"])')
  body="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{\"id\":\"$id\"}}"
  check=$(curl -s "$url/" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' -d "$body")
  echo "$check" | grep -q TASK_STATE_COMPLETED || { echo "GetTask check failed at $url: $check" >&2; return 1; }
  BODY="$body" A2A_VERSION=1.0 wrk -t2 -c"$CONNS" -d"${SECS}s" -s "$LUA" "$url/" | tee "$report" | rps
}

port=$(free_port)
$BIN serve --addr "127.0.0.1:$port" --llm echo >/dev/null 2>&1 & pids+=($!)
wait_card "http://127.0.0.1:$port"
native_mem=$(measure "http://127.0.0.1:$port" /tmp/wrk-native-memory.txt)

port=$(free_port); mkdir -p "$tmp/native"
$BIN serve --addr "127.0.0.1:$port" --llm echo --store "file:$tmp/native" >/dev/null 2>&1 & pids+=($!)
wait_card "http://127.0.0.1:$port"
native_file=$(measure "http://127.0.0.1:$port" /tmp/wrk-native-file.txt)

port=$(free_port); mkdir -p "$tmp/serve-component"
$BIN serve --component "$AGENT" --addr "127.0.0.1:$port" --store "file:$tmp/serve-component" >/dev/null 2>&1 & pids+=($!)
wait_card "http://127.0.0.1:$port"
ours=$(measure "http://127.0.0.1:$port" /tmp/wrk-serve-component.txt)

port=$(free_port); mkdir -p "$tmp/wasmtime"
$WASMTIME serve -Scli --addr "127.0.0.1:$port" --dir "$tmp/wasmtime::/tasks" --env TOOLNEXUS_STORE=file:/tasks "$AGENT" >/dev/null 2>&1 & pids+=($!)
wait_card "http://127.0.0.1:$port"
theirs=$(measure "http://127.0.0.1:$port" /tmp/wrk-wasmtime-serve.txt)

echo "== GetTask req/s, ${CONNS} connections, ${SECS} s, wrk -t2 (details: /tmp/wrk-*.txt)"
echo "  native toolnexus serve, memory store      : $native_mem"
echo "  native toolnexus serve, file store        : $native_file"
echo "  agent component, toolnexus serve --component (file store, instance per request): $ours"
echo "  agent component, wasmtime serve 49 (file store, instance per request)         : $theirs"

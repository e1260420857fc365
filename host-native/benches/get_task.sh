#!/usr/bin/env bash
# GetTask throughput: `toolnexus serve` (release) against the official
# @a2a-js/sdk 1.3.0 server, same wrk load (default: 2 threads, 64 connections,
# 10 s), loopback only. Prints req/s for each and the ratio.
#   bash host-native/benches/get_task.sh [SECONDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
SECS="${1:-10}"; CONNS="${2:-64}"
command -v wrk >/dev/null || { apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }; }
bash tests/peers/setup.sh >/dev/null
cargo build -q --release -p toolnexus-host-native
LUA=host-native/benches/get_task.lua
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_card() { for _ in $(seq 1 200); do curl -sf "$1/.well-known/agent-card.json" >/dev/null && return 0; sleep 0.05; done; echo "no card at $1" >&2; return 1; }
rps() { sed -n 's/^Requests\/sec: *//p'; }

# Creates one task at $1 (1.0 SendMessage, blocking), checks GetTask answers
# it completed, then prints wrk's req/s for that GetTask; wrk's report goes to $2.
measure() {
  local url=$1 report=$2 id body check
  id=$(curl -s "$url/" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m1","parts":[{"text":"bench"}]}}}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["task"]["id"])')
  body="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{\"id\":\"$id\"}}"
  check=$(curl -s "$url/" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' -d "$body")
  echo "$check" | grep -q TASK_STATE_COMPLETED || { echo "GetTask check failed at $url: $check" >&2; return 1; }
  BODY="$body" A2A_VERSION=1.0 wrk -t2 -c"$CONNS" -d"${SECS}s" -s "$LUA" "$url/" | tee "$report" | rps
}

port=$(free_port)
target/release/toolnexus serve --addr "127.0.0.1:$port" --llm echo >/dev/null 2>&1 & pids+=($!)
wait_card "http://127.0.0.1:$port"
ours=$(measure "http://127.0.0.1:$port" /tmp/wrk-toolnexus.txt)

port=$(free_port)
node tests/peers/js/server.mjs --port "$port" >/dev/null 2>&1 & pids+=($!)
wait_card "http://127.0.0.1:$port"
theirs=$(measure "http://127.0.0.1:$port" /tmp/wrk-js.txt)

echo "GetTask req/s, ${CONNS} connections, ${SECS} s, wrk -t2 (details: /tmp/wrk-*.txt)"
echo "  toolnexus serve : $ours"
echo "  @a2a-js/sdk     : $theirs"
python3 -c "print(f'  ratio           : {float(\"$ours\")/float(\"$theirs\"):.1f}x')"

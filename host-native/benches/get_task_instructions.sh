#!/usr/bin/env bash
# User-space instructions per GetTask of one or more `toolnexus` binaries,
# counted by callgrind (valgrind), so the figure does not depend on what
# else the machine is doing: each binary serves (`--llm echo`, memory store)
# and answers N1 then N2 GetTasks of one task over one keep-alive
# connection, in two runs; the difference of the two totals over N2 - N1
# leaves out start-up and shut-down. A figure, not a test.
#   bash host-native/benches/get_task_instructions.sh BIN [BIN ...]
# N1/N2 (defaults 500 and 2500) can be set in the environment. Installs
# valgrind (Debian) when it is missing.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BIN [BIN ...]" >&2; exit 2; }
N1=${N1:-500}; N2=${N2:-2500}
command -v valgrind >/dev/null || { apt-get install -y valgrind >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y valgrind >/dev/null; }; }

# total BIN N: the instructions of one run answering N GetTasks.
total() {
  local bin=$1 n=$2 port out pid sum=0 t f
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  out=$(mktemp -d "${TMPDIR:-/tmp}/toolnexus-callgrind.XXXXXX")
  valgrind --tool=callgrind --callgrind-out-file="$out/cg.%p" "$bin" serve --addr "127.0.0.1:$port" --llm echo >/dev/null 2>"$out/valgrind.log" &
  pid=$!
  python3 - "$port" "$n" <<'PY'
import http.client, json, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
for _ in range(600):  # valgrind starts slowly: up to 60 s
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("GET", "/.well-known/agent-card.json")
        c.getresponse().read()
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("the server did not start")
h = {"Content-Type": "application/json", "A2A-Version": "1.0"}
send = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
    "role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "bench"}]}}}
c.request("POST", "/", json.dumps(send), h)
task = json.loads(c.getresponse().read())["result"]["task"]["id"]
body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task}})
for _ in range(n):
    c.request("POST", "/", body, h)
    r = c.getresponse()
    r.read()
    if r.status != 200:
        sys.exit(f"GetTask answered {r.status}")
PY
  kill -INT "$pid"; wait "$pid" 2>/dev/null || true
  for f in "$out"/cg.*; do
    t=$(awk '/^(summary|totals):/ { print $2; exit }' "$f")
    sum=$((sum + ${t:-0}))
  done
  rm -rf "$out"
  echo "$sum"
}

for bin in "$@"; do
  a=$(total "$bin" "$N1")
  b=$(total "$bin" "$N2")
  echo "$bin: $(( (b - a) / (N2 - N1) )) instructions per GetTask (runs of $N1 and $N2: $a, $b)"
done

#!/usr/bin/env bash
# Builds the two components of the WIT package toolnexus:a2a (wit/a2a.wit)
# for wasm32-wasip2 and checks them with wasm-tools:
#   dist/toolnexus-a2a.wasm    the library world (exports client and server)
#   dist/toolnexus-agent.wasm  the agent world (wasi:http/proxy)
# Prints each one's raw and gzip -9 size. Installs its tools (setup.sh).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
bash "$HERE/setup.sh" >/dev/null
WASM_TOOLS="$HERE/.venv/bin/wasm-tools"
PROFILE=wasm-release
OUT="$ROOT/target/wasm32-wasip2/$PROFILE"
DIST="$HERE/dist"
mkdir -p "$DIST"

cd "$ROOT"
# Two builds of one crate: its features pick the world.
cargo build -p toolnexus-component --target wasm32-wasip2 --profile "$PROFILE" --lib
cp "$OUT/toolnexus_component.wasm" "$DIST/toolnexus-a2a.wasm"
cargo build -p toolnexus-component --target wasm32-wasip2 --profile "$PROFILE" \
  --no-default-features --features agent --bin toolnexus-agent
cp "$OUT/toolnexus-agent.wasm" "$DIST/toolnexus-agent.wasm"

for name in toolnexus-a2a toolnexus-agent; do
  f="$DIST/$name.wasm"
  "$WASM_TOOLS" validate "$f"
  raw=$(stat -c %s "$f")
  gz=$(gzip -9 -c "$f" | wc -c)
  printf '%-22s %8d bytes raw (%.1f KB), %8d bytes gzip -9 (%.1f KB)\n' \
    "$name.wasm" "$raw" "$(echo "$raw/1000" | bc -l)" "$gz" "$(echo "$gz/1000" | bc -l)"
done

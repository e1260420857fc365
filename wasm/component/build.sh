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

size() {
  local raw gz
  raw=$(stat -c %s "$2")
  gz=$(gzip -9 -c "$2" | wc -c)
  printf '%-22s %-9s %8d bytes raw (%.1f KB), %8d bytes gzip -9 (%.1f KB)\n' \
    "$1" "$3" "$raw" "$(echo "$raw/1000" | bc -l)" "$gz" "$(echo "$gz/1000" | bc -l)"
}
# Smaller: wasm-opt -Oz on each core module of the component (`jco opt`,
# binaryen from npm, installed by setup.sh), then no custom sections (the
# function names alone are a third of the file). TOOLNEXUS_COMPONENT_OPT=0 skips both.
JCO="$HERE/js/node_modules/.bin/jco"
for name in toolnexus-a2a toolnexus-agent; do
  f="$DIST/$name.wasm"
  if [[ "${TOOLNEXUS_COMPONENT_OPT:-1}" != 0 && -x "$JCO" ]]; then
    size "$name.wasm" "$f" "(as built)"
    "$JCO" opt "$f" -o "$f.opt" --quiet -- -Oz --enable-bulk-memory --enable-sign-ext \
      --enable-nontrapping-float-to-int --enable-mutable-globals --enable-multivalue \
      --enable-reference-types
    "$WASM_TOOLS" strip --all "$f.opt" -o "$f"
    rm -f "$f.opt"
  fi
  "$WASM_TOOLS" validate "$f"
  size "$name.wasm" "$f" ""
done

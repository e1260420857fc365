#!/usr/bin/env bash
# Builds the npm package toolnexus-wasm into wasm/pkg and packs it into
# wasm/toolnexus-wasm-<version>.tgz. Idempotent; installs what it needs:
#   - the wasm32-unknown-unknown Rust target,
#   - wasm-bindgen-cli at exactly the wasm-bindgen version in Cargo.lock
#     (cargo install without --locked: the registry mirror may lack the newest
#     transitive versions),
#   - wasm-opt from the npm package binaryen (wasm/tools; never Debian's),
#     whose JS API wasm/tools/order-functions.mjs uses.
#
# Three builds of the crate: "full" (default features), "client" (feature
# `client`: agents, tools and toolkits only) and "skills" (feature `skill-md`:
# parseSkillMd, the YAML parser kept out of the other two). Each gets one
# optimised .wasm
# shared by two glues from wasm-bindgen: --target web (browsers, bundlers,
# workerd) and --target nodejs (Node, CommonJS; ESM wraps it).
#
# Usage: wasm/build.sh            (prints the sizes at the end)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PKG="$HERE/pkg"
PROFILE=wasm-release
TARGET=wasm32-unknown-unknown
CRATE=toolnexus_wasm
say() { printf '[build] %s\n' "$*"; }

# --- tools --------------------------------------------------------------------
command -v node >/dev/null || { echo "node (>= 18) is required" >&2; exit 1; }
command -v npm >/dev/null || { echo "npm is required" >&2; exit 1; }
if ! rustup target list --installed | grep -qx "$TARGET"; then
  say "adding the Rust target $TARGET"
  rustup target add "$TARGET"
fi

# The version wasm-bindgen resolved to (resolving first if Cargo.lock lacks it).
lock_version() {
  awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' "$ROOT/Cargo.lock"
}
WB_VERSION="$(lock_version || true)"
if [ -z "$WB_VERSION" ]; then
  (cd "$ROOT" && cargo metadata --format-version 1 >/dev/null)
  WB_VERSION="$(lock_version)"
fi
export PATH="$HOME/.cargo/bin:$PATH"
if ! wasm-bindgen --version 2>/dev/null | grep -qx "wasm-bindgen $WB_VERSION"; then
  say "installing wasm-bindgen-cli $WB_VERSION (about 2 minutes)"
  cargo install wasm-bindgen-cli --version "$WB_VERSION" --force
fi

WASM_OPT="$HERE/tools/node_modules/.bin/wasm-opt"
if ! [ -x "$WASM_OPT" ]; then
  say "installing binaryen (wasm-opt) from npm"
  (cd "$HERE/tools" && npm ci --no-audit --no-fund --loglevel=error)
fi

VERSION="$(awk -F'"' '/^\[workspace.package\]/ { w = 1 } w && /^version = / { print $2; exit }' "$ROOT/Cargo.toml")"

# --- the three builds -----------------------------------------------------------
FULL_NAMES="agent agentTools parseAgentsConfig buildAgentCard createToolkit createClient createA2AHandler sanitize describeCard listTasks"
CLIENT_NAMES="agent agentTools parseAgentsConfig createToolkit sanitize describeCard listTasks"
SKILLS_NAMES="parseSkillMd"

rm -rf "$PKG"
mkdir -p "$PKG/dist"
WORK="$ROOT/target/toolnexus-wasm-build"
rm -rf "$WORK"

# entries DIR "NAMES" [STREAM]: the runtime entry points around the two
# glues; STREAM=no for an entry without the Tool and Toolkit classes (skills).
entries() {
  local dir="$1" names="$2" stream="${3:-yes}" list cjs imports="" install="" require="" esm=""
  list="$(printf '%s, ' $names)"; list="${list%, }"
  cjs="$(for n in $names; do printf '  %s: glue.%s,\n' "$n" "$n"; done)"
  if [ "$stream" = yes ]; then
    # tool.stream / toolkit.stream (wasm/js/stream.js), once as ESM and once as CommonJS.
    { cat "$HERE/js/stream.js"; echo 'export { installStream };'; } >"$dir/stream.js"
    { echo '"use strict";'; cat "$HERE/js/stream.js"; echo 'module.exports = { installStream };'; } >"$dir/stream.cjs"
    imports=", Tool, Toolkit"
    esm='import { installStream } from "./stream.js";'
    install="installStream(Tool, Toolkit);"
    require='require("./stream.cjs").installStream(glue.Tool, glue.Toolkit);'
  fi
  # Browsers and bundlers: fetch and instantiate the .wasm next to the glue.
  cat >"$dir/browser.js" <<EOF
import init, { $list$imports } from "./$CRATE.js";
$esm
await init({ module_or_path: new URL("./${CRATE}_bg.wasm", import.meta.url) });
$install
export { $list };
EOF
  # workerd: the .wasm is imported as a CompiledWasm module, then initSync.
  cat >"$dir/workerd.js" <<EOF
import wasmModule from "./${CRATE}_bg.wasm";
import { initSync, $list$imports } from "./$CRATE.js";
$esm
initSync({ module: wasmModule });
$install
export { $list };
EOF
  # Node, CommonJS: wasm-bindgen's nodejs glue loads the .wasm synchronously.
  cat >"$dir/node.cjs" <<EOF
"use strict";
const glue = require("./$CRATE.cjs");
$require
module.exports = {
$cjs
};
EOF
  # Node, ESM: the same instance as require() gets (no dual-package state).
  cat >"$dir/node.js" <<EOF
import { createRequire } from "node:module";
const glue = createRequire(import.meta.url)("./node.cjs");
export const { $list } = glue;
EOF
}

# Only for the package's build (set the variable to choose other flags):
# - no inlining by size heuristics (a call is inlined only when it is the
#   callee's only one): smaller, async state machines stay in their own functions;
# - short source paths: panic locations (kept by `panic = "abort"`) name
#   files relative to the registry, the toolchain's sources and this tree.
flags="-Cllvm-args=-inline-threshold=0 -Cllvm-args=-inlinehint-threshold=0"
for dir in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/; do
  [ -d "$dir" ] && flags="$flags --remap-path-prefix=$dir="
done
RUST_COMMIT="$(rustc -vV | awk '/^commit-hash:/ { print $2 }')"
[ -n "$RUST_COMMIT" ] && flags="$flags --remap-path-prefix=/rustc/$RUST_COMMIT/="
flags="$flags --remap-path-prefix=$ROOT/="
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="${CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS-$flags}"

build() {
  local variant="$1" names="$2" stream="$3"; shift 3
  say "cargo build ($variant)"
  (cd "$ROOT" && cargo build -p toolnexus-wasm --target "$TARGET" --profile "$PROFILE" "$@")
  local raw="$ROOT/target/$TARGET/$PROFILE/$CRATE.wasm" out="$PKG/dist/$variant"
  mkdir -p "$WORK/$variant" "$out"
  wasm-bindgen --target web --no-typescript --out-dir "$WORK/$variant/web" "$raw"
  wasm-bindgen --target nodejs --no-typescript --out-dir "$WORK/$variant/node" "$raw"
  # Both glues import the same functions, so one .wasm serves both.
  if ! cmp -s "$WORK/$variant/web/${CRATE}_bg.wasm" "$WORK/$variant/node/${CRATE}_bg.wasm"; then
    echo "wasm-bindgen made different .wasm files for web and nodejs ($variant)" >&2
    exit 1
  fi
  say "wasm-opt -Oz ($variant)"
  # --low-memory-unused: rustc puts the stack first (it grows down from 1 MiB
  # to 0), so the low 1 KiB is never read or written and wasm-opt may fold
  # constant offsets into loads and stores; with --converge, about 1 KB gzip.
  # --flatten --rereloop before -Oz: another 0.4 KB, for ~30 s per variant.
  # --monomorphize (functions specialised for constant arguments where that
  # shrinks them) between the two -Oz: ~0.1-0.3 KB of the full .wasm.
  "$WASM_OPT" --low-memory-unused --flatten --rereloop -Oz --monomorphize -Oz --converge \
    --strip-debug --strip-producers \
    "$WORK/$variant/web/${CRATE}_bg.wasm" -o "$out/${CRATE}_bg.wasm"
  cp "$WORK/$variant/web/$CRATE.js" "$out/$CRATE.js"
  cp "$WORK/$variant/node/$CRATE.js" "$out/$CRATE.cjs"
  # Short import names (`a`, `b`, ... for `__wbg_fetch_08a6b76890f338a6`, a
  # hash gzip cannot squeeze), the same in the .wasm and both glues: ~1.5 KB
  # gzip of the client .wasm.
  node "$HERE/tools/short-imports.mjs" "$out/${CRATE}_bg.wasm" "$out/$CRATE.js" "$out/$CRATE.cjs" >/dev/null
  # The functions in the order, of a few tried, that gzip squeezes best
  # (grouped by size class and signature): ~2 KB gzip of the full .wasm.
  node "$HERE/tools/order-functions.mjs" "$out/${CRATE}_bg.wasm"
  # Last, the target_features section (read by wasm-opt and binaryen above,
  # by no runtime): ~100 B gzip of each .wasm.
  node "$HERE/tools/strip-target-features.mjs" "$out/${CRATE}_bg.wasm"
  entries "$out" "$names" "$stream"
}

build full "$FULL_NAMES" yes
build client "$CLIENT_NAMES" yes --no-default-features --features client
build skills "$SKILLS_NAMES" no --no-default-features --features skill-md

# --- the package ------------------------------------------------------------------
say "assembling $PKG"
sed "s/\"version\": \"0.0.0\"/\"version\": \"$VERSION\"/" "$HERE/js/package.json" >"$PKG/package.json"
cat "$HERE/js/client.d.ts" "$HERE/js/server.d.ts" >"$PKG/index.d.ts"
cp "$HERE/js/client.d.ts" "$PKG/client.d.ts"
cp "$HERE/js/skills.d.ts" "$PKG/skills.d.ts"
# toolnexus-wasm/durable: the Durable Object store, plain JS outside the .wasm.
mkdir -p "$PKG/dist/durable"
cp "$HERE/js/durable.js" "$PKG/dist/durable/durable.js"
cp "$HERE/js/durable.d.ts" "$PKG/durable.d.ts"
# CommonJS consumers get the same declarations as .d.cts.
cp "$PKG/index.d.ts" "$PKG/index.d.cts"
cp "$PKG/client.d.ts" "$PKG/client.d.cts"
cp "$PKG/skills.d.ts" "$PKG/skills.d.cts"
cp "$HERE/README.md" "$PKG/README.md"

rm -f "$HERE"/toolnexus-wasm-*.tgz
TARBALL="$(cd "$PKG" && npm pack --silent --pack-destination "$HERE")"
say "packed $HERE/$TARBALL"

# --- figures ------------------------------------------------------------------------
for variant in full client skills; do
  f="$PKG/dist/$variant/${CRATE}_bg.wasm"
  say "$variant .wasm: $(wc -c <"$f") bytes raw, $(gzip -9 -c "$f" | wc -c) bytes gzip -9"
done
say "durable.js: $(wc -c <"$PKG/dist/durable/durable.js") bytes raw, $(gzip -9 -c "$PKG/dist/durable/durable.js" | wc -c) bytes gzip -9"
say "tarball: $(wc -c <"$HERE/$TARBALL") bytes"

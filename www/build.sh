#!/usr/bin/env bash
# Builds the browser agent UI into www/dist: the page (plain ES modules, no
# bundler) plus the web build of the toolnexus-wasm package it imports.
# Idempotent; installs what it needs through wasm/build.sh (the Rust wasm
# target, wasm-bindgen-cli, binaryen), which runs only when the package
# tarball is missing or older than its sources.
#
# Usage: www/build.sh        then: toolnexus serve --skills examples/skills --ui www/dist
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
DIST="$HERE/dist"
VENDOR="$DIST/vendor/toolnexus-wasm"
say() { printf '[www] %s\n' "$*"; }

tarball() { ls "$ROOT"/wasm/toolnexus-wasm-*.tgz 2>/dev/null | head -1; }

# The package is stale when any of its inputs is newer than the tarball.
stale() {
  local tgz
  tgz="$(tarball)"
  [ -z "$tgz" ] && return 0
  [ -n "$(find "$ROOT/core" "$ROOT/wasm/src" "$ROOT/wasm/js" "$ROOT/wasm/build.sh" \
    "$ROOT/wasm/Cargo.toml" "$ROOT/wasm/README.md" "$ROOT/Cargo.lock" "$ROOT/Cargo.toml" \
    -newer "$tgz" -type f -not -path '*/target/*' -print -quit 2>/dev/null)" ]
}

if stale; then
  say "building the npm package (wasm/build.sh)"
  bash "$ROOT/wasm/build.sh"
else
  say "the npm package is up to date: $(basename "$(tarball)")"
fi
TGZ="$(tarball)"
[ -n "$TGZ" ] || { echo "www/build.sh: wasm/build.sh made no tarball" >&2; exit 1; }

# Unpack the tarball (what `npm install` would put in node_modules) and take
# the browser entry of the client build: agents, tools and toolkits only.
UNPACK="$(mktemp -d "${TMPDIR:-/tmp}/toolnexus-www.XXXXXX")"
trap 'rm -rf "$UNPACK"' EXIT
tar -xzf "$TGZ" -C "$UNPACK"
PKG="$UNPACK/package"
ENTRY="$(node -e 'const p=require(process.argv[1]); process.stdout.write(p.exports["./client"].browser.default)' "$PKG/package.json")"
ENTRY_DIR="$PKG/$(dirname "$ENTRY")"

rm -rf "$DIST"
mkdir -p "$VENDOR"
cp "$ENTRY_DIR"/*.js "$ENTRY_DIR"/*_bg.wasm "$VENDOR"/
rm -f "$VENDOR"/node.js "$VENDOR"/workerd.js
cp "$PKG/package.json" "$VENDOR/package.json"
cp "$HERE/index.html" "$DIST/"
cp "$HERE"/src/*.js "$HERE"/src/*.css "$HERE"/src/*.svg "$DIST/"

say "built $DIST ($(du -sk "$DIST" | cut -f1) KB; toolnexus-wasm $(node -p 'require(process.argv[1]).version' "$VENDOR/package.json"))"
say "serve it beside an agent: toolnexus serve --skills examples/skills --llm echo --ui www/dist"

#!/usr/bin/env bash
# The component outside Rust: the library component in Node through
# `jco transpile` (js/library.test.mjs) calling the official JS SDK server.
# Needs build.sh (run here if dist/ is missing) and tests/peers/setup.sh.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$HERE/setup.sh"
[[ -f "$HERE/dist/toolnexus-a2a.wasm" ]] || bash "$HERE/build.sh"
cd "$HERE/js"
node --test library.test.mjs

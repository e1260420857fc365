#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this).
# Installs what it needs on a fresh machine: the wasm32 target, the official
# A2A SDK peers (PyPI, npm), and whatever the wasm package's tests need.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*"; }

step "toolchain"
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  rustup target add wasm32-unknown-unknown
fi
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt

step "PostgreSQL 15 for the replica tests (host-native/tests/postgres.rs starts its own clusters)"
# The tests run initdb as the unprivileged postgres user in a temp folder, on
# a free loopback port, and stop it at the end; they only need the binaries.
if [ ! -x /usr/lib/postgresql/15/bin/initdb ]; then
  if [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql
  else
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql
  fi
fi

step "official A2A SDK peers (tests/peers/setup.sh)"
bash tests/peers/setup.sh

step "WebAssembly component toolchain and build (wasm/component/build.sh)"
bash wasm/component/build.sh

step "format and lints"
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# The library half of host-native, as an embedding program gets it: no CLI, no clap.
cargo clippy -p toolnexus-host-native --no-default-features --lib -- -D warnings
# The core's tests as they are run below without push and replicas.
cargo clippy -p toolnexus-core --no-default-features --features server --all-targets -- -D warnings

step "core builds for wasm32 without I/O (full, and client-only)"
cargo clippy -p toolnexus-core --target wasm32-unknown-unknown --all-targets -- -D warnings
# The npm package's three entries: client, full (default) and skills. Clippy
# lints every workspace member it compiles, so these also lint the core as
# each entry builds it: no features (client), `server` without SKILL.md
# texts (no YAML parser), `server` + `push`, and `skill-md` alone.
cargo clippy -p toolnexus-wasm --target wasm32-unknown-unknown --no-default-features --features client -- -D warnings
cargo clippy -p toolnexus-wasm --target wasm32-unknown-unknown --no-default-features --features skill-md -- -D warnings
# The npm full entry (default features: with push) and the server without push.
cargo clippy -p toolnexus-wasm --target wasm32-unknown-unknown -- -D warnings
cargo clippy -p toolnexus-wasm --target wasm32-unknown-unknown --no-default-features --features server -- -D warnings
cargo clippy -p toolnexus-component --target wasm32-wasip2 --all-targets -- -D warnings
cargo clippy -p toolnexus-component --target wasm32-wasip2 --no-default-features --features agent --all-targets -- -D warnings

step "Rust tests (core units, host scenarios, CLI, interop with the official SDKs)"
cargo test --workspace
# The core as the npm full entry compiles it: the server without SKILL.md
# texts (no YAML parser) and without push.
cargo test -p toolnexus-core --no-default-features --features server --lib

step "the component in wasmtime: the CLI contract and interop suites through --engine wasm, serve --component"
# One build of wasmtime (feature component), then the same CLI suites with
# every tools/call run by the library component.
# Only the targets the feature changes (the others were linted above).
cargo clippy -p toolnexus-host-native --features component --lib --bins \
  --test component_host --test readme_snippets --bench component -- -D warnings
# Compile the component once into wasmtime's cache (a debug-build cranelift
# takes long enough that many tests compiling it at once would time out).
cargo build -p toolnexus-host-native --features component
target/debug/toolnexus tools --engine wasm --component wasm/component/dist/toolnexus-a2a.wasm \
  http://127.0.0.1:9/.well-known/agent-card.json >/dev/null 2>&1 || true
TOOLNEXUS_COMPONENT="$PWD/wasm/component/dist/toolnexus-a2a.wasm" TOOLNEXUS_ENGINE=wasm \
  cargo test -p toolnexus-host-native --features component --test cli --test card_cache --test hostile_peers --test conversations --test interop --test component_host

step "the component in Node through jco (wasm/component/test.sh)"
bash wasm/component/test.sh

if [[ -f wasm/test.sh ]]; then
  step "npm package: Node, headless Chromium, workerd (wasm/test.sh)"
  bash wasm/test.sh
fi

if [[ -f www/test.sh ]]; then
  step "browser UI: the page in headless Chromium beside toolnexus serve --ui (www/test.sh)"
  bash www/test.sh
fi

step "all suites passed"

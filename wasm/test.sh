#!/usr/bin/env bash
# Runs every test of the npm package toolnexus-wasm and prints per-suite pass
# counts. Exits non-zero on any failure, and when a suite ran 0 tests.
#
# Installs what it needs on a clean machine: the Rust targets, wasm-bindgen-cli
# and binaryen (through build.sh), the test packages (npm ci on the committed
# wasm/tests/package-lock.json) and Debian's chromium + chromium-driver.
#
# Suites:
#   core-wasm32   the core's unit tests on wasm32-unknown-unknown (the target
#                 the package ships) under Node, through wasm-bindgen-test-runner,
#                 with and without the server feature; each run must run > 0 tests
#   package       the "env" import gate, the exports map, the .d.ts under tsc
#   node          the seed scenarios through the tarball, Node ESM + CJS
#   chromium      a page in headless Chromium (Playwright) calling a local agent
#   workerd       workers in Miniflare serving and calling agents; the
#                 Durable Object store (toolnexus-wasm/durable) across two
#                 isolates and a restart, and the worker template (wasm/worker)
#                 in Miniflare and under `npx wrangler dev`
#   push          createA2AHandler's push notifications through the package:
#                 configs kept by a JS store across handlers, delivery to a
#                 local webhook (workerd's push test is in the workerd suite)
#   peers         the package against the official SDKs (tests/peers): the
#                 client calling REST-only and protected Python / JS SDK
#                 servers, the SDKs' REST clients calling createA2AHandler
#
# Usage: wasm/test.sh [suite ...]     (default: all)
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
# shellcheck source=../tests/node-suites.sh
. "$ROOT/tests/node-suites.sh"
TESTS="$HERE/tests"
export PATH="$HOME/.cargo/bin:$PATH"
ALL_SUITES="core-wasm32 package node chromium workerd push peers"
SUITES="${*:-$ALL_SUITES}"
say() { printf '\n[test] %s\n' "$*"; }
die() { printf '[test] FATAL: %s\n' "$*" >&2; exit 1; }

wants() { case " $SUITES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
for s in $SUITES; do
  case " $ALL_SUITES " in *" $s "*) ;; *) die "unknown suite $s (suites: $ALL_SUITES)" ;; esac
done

# --- build and install -----------------------------------------------------------
say "building the package (wasm/build.sh)"
bash "$HERE/build.sh" || die "wasm/build.sh failed"
TARBALL="$(ls "$HERE"/toolnexus-wasm-*.tgz 2>/dev/null | head -1)"
[ -n "$TARBALL" ] || die "no tarball after build.sh"

if wants node || wants chromium || wants workerd; then
  say "building the native toolnexus CLI (peers and clients of the tests)"
  (cd "$ROOT" && cargo build -p toolnexus-host-native) || die "cargo build -p toolnexus-host-native failed"
fi

if wants node || wants workerd || wants peers; then
  say "the official SDK peers: a streaming server (node), the client (workerd) (tests/peers/setup.sh)"
  bash "$ROOT/tests/peers/setup.sh" || die "tests/peers/setup.sh failed"
fi

if wants package || wants node || wants chromium || wants workerd || wants push || wants peers; then
  say "installing the test packages (npm ci in wasm/tests)"
  if ! cmp -s "$TESTS/package-lock.json" "$TESTS/node_modules/.toolnexus-lock" 2>/dev/null; then
    (cd "$TESTS" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed in wasm/tests"
    cp "$TESTS/package-lock.json" "$TESTS/node_modules/.toolnexus-lock"
  fi

  APP="$(mktemp -d "${TMPDIR:-/tmp}/toolnexus-wasm-app.XXXXXX")"
  trap 'rm -rf "$APP"' EXIT
  say "installing $(basename "$TARBALL") into a fresh folder ($APP)"
  (
    cd "$APP" &&
      printf '{"name":"toolnexus-wasm-app","private":true,"version":"0.0.0"}\n' >package.json &&
      npm install --no-audit --no-fund --loglevel=error "$TARBALL"
  ) || die "npm install of the tarball failed"
  # How a user imports the package: bare specifiers, resolved by Node.
  printf 'export * from "toolnexus-wasm";\n' >"$APP/esm.mjs"
  printf 'export * from "toolnexus-wasm/client";\n' >"$APP/client.mjs"
  printf 'module.exports = require("toolnexus-wasm");\n' >"$APP/cjs.cjs"
  printf 'module.exports = require("toolnexus-wasm/client");\n' >"$APP/client.cjs"
  printf 'export * from "toolnexus-wasm/skills";\n' >"$APP/skills.mjs"
  printf 'module.exports = require("toolnexus-wasm/skills");\n' >"$APP/skills.cjs"
  export TOOLNEXUS_WASM_APP="$APP"
fi

if wants workerd; then
  # The worker template (wasm/worker) as its README section says: npm install
  # there (wrangler, toolnexus-wasm linked from wasm/pkg); the suite runs
  # `npx wrangler dev` in it.
  say "installing the worker template's packages (npm ci in wasm/worker)"
  if ! cmp -s "$HERE/worker/package-lock.json" "$HERE/worker/node_modules/.toolnexus-lock" 2>/dev/null; then
    (cd "$HERE/worker" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed in wasm/worker"
    cp "$HERE/worker/package-lock.json" "$HERE/worker/node_modules/.toolnexus-lock"
  fi
fi

if wants chromium && ! [ -x /usr/bin/chromium ]; then
  say "installing Debian's chromium and chromium-driver"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null ||
    die "apt-get install chromium chromium-driver failed"
fi

# --- suites ----------------------------------------------------------------------
if wants core-wasm32; then
  say "core-wasm32: cargo test -p toolnexus-core --target wasm32-unknown-unknown (Node, wasm-bindgen-test-runner)"
  # build.sh installed wasm-bindgen-cli at the Cargo.lock version; the test
  # runner ships with it and must match the wasm-bindgen-test in the build.
  WB_VERSION="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' "$ROOT/Cargo.lock")"
  wasm-bindgen-test-runner --version 2>/dev/null | grep -qx "wasm-bindgen-test-runner $WB_VERSION" ||
    die "wasm-bindgen-test-runner $WB_VERSION is not on PATH (wasm/build.sh installs it)"
  pass=0 failn=0
  for features in "" "--no-default-features"; do
    log="$(mktemp)"
    # No browser switch: wasm-bindgen-test-runner runs the tests in Node.
    (cd "$ROOT" && CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
      timeout 900 cargo test -p toolnexus-core --target wasm32-unknown-unknown $features 2>&1) | tee "$log" |
      grep -E '^(test result|running|error)|panicked|FAILED'
    rc=${PIPESTATUS[0]}
    p=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($(i+1) ~ /^passed/) s += $i } END { print s + 0 }' "$log")
    f=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($(i+1) ~ /^failed/) s += $i } END { print s + 0 }' "$log")
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    # A run that executed no test (say, a runner that found none) is a failure.
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
      echo "[test] core-wasm32 ${features:-(default features)}: ran 0 tests" >&2
      f=1
    fi
    echo "[test] core-wasm32 ${features:-(default features)}: $p passed, $f failed"
    pass=$((pass + p)) failn=$((failn + f))
    rm -f "$log"
  done
  suite_record core-wasm32 "$pass" "$failn"
fi

run_node_suite() { # suite file...
  local suite="$1" tap spec
  shift
  tap="$(mktemp)" spec="$(mktemp)"
  say "$suite: node --test $*"
  # The spec report goes to the log as it is written, and to a file: a
  # second source of the counts (see node_tap_counts).
  (
    cd "$TESTS" || exit 1
    timeout 900 node --test --test-concurrency=1 --test-timeout=180000 \
      --test-reporter=spec --test-reporter-destination=stderr \
      --test-reporter=tap --test-reporter-destination=stdout "$@" 2>&1 >"$tap" | tee "$spec" >&2
  )
  local rc=$?
  local p f
  read -r p f < <(node_tap_counts "$tap" "$rc" "$spec")
  suite_record "$suite" "$p" "$f"
  rm -f "$tap" "$spec"
}

wants package && run_node_suite package package.test.mjs
wants node && run_node_suite node node.test.mjs auth.test.mjs
wants chromium && run_node_suite chromium browser.test.mjs
wants workerd && run_node_suite workerd workerd.test.mjs durable.test.mjs
wants push && run_node_suite push push.test.mjs
wants peers && run_node_suite peers peers.test.mjs

# --- summary ---------------------------------------------------------------------
say "summary"
suite_summary

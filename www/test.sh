#!/usr/bin/env bash
# Tests the browser agent UI (www/) and prints per-suite pass counts, then a
# final line "N passed, N failed". Exits non-zero on any failure, and when a
# suite ran 0 tests.
#
# Installs what it needs on a clean machine: playwright-core (npm ci on the
# committed www/package-lock.json), Debian's chromium and chromium-driver
# (apt-get, when /usr/bin/chromium is missing), the official @a2a-js/sdk peer
# (tests/peers/setup.sh, when missing), the page and the npm package
# (www/build.sh, which runs wasm/build.sh when needed) and the toolnexus CLI
# (cargo build).
#
# Suites:
#   events the live timeline built from the package's call events (src/timeline.js) in Node
#   ui     the page in headless Chromium, served by `toolnexus serve --ui www/dist`
#          beside an agent answered by a stub model: connect, skills, a completed
#          run (screenshots in test-output/www/), Cancel, a timeout, a config with
#          a dead agent, an agent without CORS, non-card URLs, keyboard use, and
#          a streaming agent (the official @a2a-js/sdk peer of tests/peers/js,
#          behind a CORS proxy) whose events and text show before the end
#   security  the browser attack on a default `toolnexus serve`, in headless Chromium:
#          a page of another local origin cannot read its tasks (no CORS, no
#          preflight grant) nor start one blind, a DNS-rebinding page and a
#          foreign Host header get 421, and --cors-origin naming the page works
#
# Usage: www/test.sh [suite ...]     (default: all)
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
# shellcheck source=../tests/node-suites.sh
. "$ROOT/tests/node-suites.sh"
export PATH="$HOME/.cargo/bin:$PATH"
ALL_SUITES="events ui security"
SUITES="${*:-$ALL_SUITES}"
say() { printf '\n[www] %s\n' "$*"; }
die() { printf '[www] FATAL: %s\n' "$*" >&2; exit 1; }
wants() { case " $SUITES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
for s in $SUITES; do
  case " $ALL_SUITES " in *" $s "*) ;; *) die "unknown suite $s (suites: $ALL_SUITES)" ;; esac
done


# --- what the tests need ------------------------------------------------------------
command -v node >/dev/null || die "node (>= 20) is required"
[ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ] || die "node >= 20 is required (playwright-core)"

if wants ui || wants security; then
  say "installing playwright-core (npm ci in www/)"
  if ! cmp -s "$HERE/package-lock.json" "$HERE/node_modules/.toolnexus-lock" 2>/dev/null; then
    (cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed in www/"
    cp "$HERE/package-lock.json" "$HERE/node_modules/.toolnexus-lock"
  fi

  if ! [ -x /usr/bin/chromium ]; then
    say "installing Debian's chromium and chromium-driver"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; } ||
      die "apt-get install chromium chromium-driver failed"
  fi

  say "building the toolnexus CLI (cargo build -p toolnexus-host-native)"
  (cd "$ROOT" && cargo build -q -p toolnexus-host-native) || die "cargo build -p toolnexus-host-native failed"
fi

if wants ui; then
  if ! [ -d "$ROOT/tests/peers/js/node_modules/@a2a-js/sdk" ] || ! [ -d "$ROOT/tests/peers/js/node_modules/express" ]; then
    say "installing the official SDK peers (tests/peers/setup.sh)"
    bash "$ROOT/tests/peers/setup.sh" || die "tests/peers/setup.sh failed"
  fi

  say "building the page (www/build.sh)"
  bash "$HERE/build.sh" || die "www/build.sh failed"
  mkdir -p "$ROOT/test-output/www"
fi

# --- suites -------------------------------------------------------------------------
# `timeout` signals its whole process group, so a hung run also takes the
# agents and the stub model it started with it.
run_suite() { # suite file
  local suite="$1" file="$2" tap spec rc p f
  tap="$(mktemp)" spec="$(mktemp)"
  say "$suite: node --test tests/$file"
  # The spec report to the log and to a file: a second source of the
  # counts (see node_tap_counts).
  (
    cd "$HERE" || exit 1
    timeout -k 10 600 node --test --test-concurrency=1 --test-timeout=120000 \
      --test-reporter=spec --test-reporter-destination=stderr \
      --test-reporter=tap --test-reporter-destination=stdout "tests/$file" 2>&1 >"$tap" | tee "$spec" >&2
  )
  rc=$?
  read -r p f < <(node_tap_counts "$tap" "$rc" "$spec")
  suite_record "$suite" "$p" "$f"
  rm -f "$tap" "$spec"
}

wants events && run_suite events events.test.mjs
wants ui && run_suite ui ui.test.mjs
wants security && run_suite security security.test.mjs

# --- summary ------------------------------------------------------------------------
say "summary"
wants ui && echo "  screenshots: test-output/www/"
suite_summary

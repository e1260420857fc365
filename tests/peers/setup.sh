#!/usr/bin/env bash
# Installs the official-SDK A2A interop peers (idempotent; a no-op when done).
#   tests/peers/.venv         a2a-sdk[http-server]==1.3.0 + uvicorn (requirements.txt)
#   tests/peers/js/node_modules  @a2a-js/sdk 1.3.0 + express 5 (package-lock.json)
# Needs: python3 >= 3.10 with the venv module, node >= 20, npm; network access
# to PyPI and the npm registry only on the first run (or when the pins change).
# Env: PYTHON=/path/to/python3 to pick the interpreter.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"

hash_of() { sha256sum "$@" | sha256sum | cut -d' ' -f1; }

# ---- Python ----------------------------------------------------------------
VENV="$HERE/.venv"
PY_STAMP="$VENV/.peers-requirements.sha256"
py_want="$(hash_of "$HERE/requirements.txt")"
if [[ -x "$VENV/bin/python" && -f "$PY_STAMP" && "$(cat "$PY_STAMP")" == "$py_want" ]]; then
  echo "setup.sh: python peers up to date"
else
  echo "setup.sh: installing python peers into $VENV"
  if [[ ! -x "$VENV/bin/python" ]]; then
    "$PYTHON" -m venv "$VENV"
  fi
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-input -r "$HERE/requirements.txt"
  "$VENV/bin/python" -c 'import a2a.server.routes, uvicorn, starlette, sse_starlette, jwt, cryptography' 
  echo "$py_want" > "$PY_STAMP"
fi

# ---- Node ------------------------------------------------------------------
JS="$HERE/js"
JS_STAMP="$JS/node_modules/.peers-lock.sha256"
if [[ -f "$JS/package-lock.json" ]]; then
  js_want="$(hash_of "$JS/package.json" "$JS/package-lock.json")"
  if [[ -f "$JS_STAMP" && "$(cat "$JS_STAMP")" == "$js_want" ]]; then
    echo "setup.sh: js peers up to date"
  else
    echo "setup.sh: npm ci in $JS"
    (cd "$JS" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$js_want" > "$JS_STAMP"
  fi
else
  echo "setup.sh: no package-lock.json yet, npm install in $JS"
  (cd "$JS" && npm install --no-audit --no-fund --loglevel=error)
  js_want="$(hash_of "$JS/package.json" "$JS/package-lock.json")"
  echo "$js_want" > "$JS_STAMP"
fi
(cd "$JS" && node -e "import('@a2a-js/sdk/server/express').then(()=>import('express'))" )

echo "setup.sh: ok"

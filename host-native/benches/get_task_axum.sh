#!/usr/bin/env bash
# The HTTP server A/B of issue 22: GetTask req/s of `toolnexus serve` on its
# own hyper server (A) and on axum + tower-http (B, the `axum-ab` feature,
# chosen by TOOLNEXUS_HTTP_SERVER=axum), one release binary, interleaved
# rounds under get_task.sh's wrk load (get_task_ab.sh).
#   bash host-native/benches/get_task_axum.sh [ROUNDS] [SECONDS] [CONNECTIONS] [VARIANT]
# VARIANT: axum (default: with tower-http's body-limit and timeout layers)
# or axum-bare (no layers: what axum itself costs).
# Adopt axum if B/A stays above 0.95; record the figures either way.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
cargo build --release -p toolnexus-host-native --no-default-features --features cli,axum-ab --bin toolnexus
BIN=$PWD/target/release/toolnexus
AXUM=$(mktemp); trap 'rm -f "$AXUM"' EXIT
printf '#!/bin/sh\nTOOLNEXUS_HTTP_SERVER=%s exec "%s" "$@"\n' "${4:-axum}" "$BIN" >"$AXUM"
chmod +x "$AXUM"
echo "A: native hyper server   B: ${4:-axum} (same binary)"
bash host-native/benches/get_task_ab.sh "$BIN" "$AXUM" "${1:-5}" "${2:-5}" "${3:-64}"

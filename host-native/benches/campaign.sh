#!/usr/bin/env bash
# Issue 11's adversarial campaign, re-run against the release binary: for each
# of the 17 items, the figure the issue quoted and what the binary does now
# (fds, RSS, CPU, time, what the caller sees), then "holds" or "DOES NOT HOLD".
#
#   bash host-native/benches/campaign.sh            # every item (about 4-5 minutes)
#   bash host-native/benches/campaign.sh 7 10       # only items 7 and 10
#   TOOLNEXUS_BIN=/path/to/toolnexus bash host-native/benches/campaign.sh   # another build
#
# It builds target/release/toolnexus unless TOOLNEXUS_BIN names a binary.
# Everything runs on 127.0.0.1 and every wait is bounded. Needs python3, node,
# util-linux (prlimit, unshare, nsenter) and /usr/bin/time; item 2 needs root
# (it mounts a small tmpfs in a private mount namespace to make a real full
# disk and a real read-only store). Exit status 1 when an item does not hold.
# campaign.out.txt is a run on this tree; campaign.before.txt the same script
# against 6be1333, the tree before the first issue 11 fix (item 10 left out
# there: it took 6.5 GiB).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN="${TOOLNEXUS_BIN:-}"
if [[ -z "$BIN" ]]; then
  cargo build --release -q -p toolnexus-host-native --bin toolnexus
  BIN="${CARGO_TARGET_DIR:-target}/release/toolnexus"
fi
# 5,000 idle connections and 1,500 clients need descriptors on this side.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "# issue 11 campaign, $(date -u '+%Y-%m-%d %H:%M UTC'), binary $BIN ($("$BIN" --version)), tree $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "# uptime: $(uptime)"
echo "# $(nproc) cores; fd limit of this shell $(ulimit -n)"
exec python3 host-native/benches/campaign.py "$BIN" "$@"

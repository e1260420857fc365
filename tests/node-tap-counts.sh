# Sourced by wasm/test.sh and www/test.sh.
# node_tap_counts TAP_FILE EXIT_CODE prints "PASSED FAILED" for one `node --test`
# run that wrote a TAP report to TAP_FILE. A file that defines no tests counts
# as zero (Node reports it as one passing test), and a non-zero exit with no
# failure counted is one failure, so a suite can never pass by running nothing.
node_tap_counts() {
  local tap=$1 rc=$2 p f
  p=$(awk '/^# pass / { print $3 }' "$tap" | tail -1)
  f=$(awk '/^# fail / { print $3 }' "$tap" | tail -1)
  p=${p:-0} f=${f:-0}
  if ! grep -E '^\s*(not )?ok [0-9]+ - ' "$tap" | grep -qvE ' - \S*\.test\.mjs$'; then
    p=0 f=0
  fi
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
  echo "$p $f"
}

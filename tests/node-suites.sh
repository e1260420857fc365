# Sourced by wasm/test.sh and www/test.sh: counting `node --test` suites.
# node_tap_counts TAP_FILE EXIT_CODE [SPEC_FILE] prints "PASSED FAILED" for one
# `node --test` run that wrote a TAP report to TAP_FILE (and its spec report to
# SPEC_FILE). A file that defines no tests counts as zero (Node reports it as
# one passing test), and a non-zero exit with no failure counted is one
# failure, so a suite can never pass by running nothing. When the TAP report
# holds no test, the spec report's summary is counted, under the same rule,
# and a note says so.
#
# The checks are single awk programs, never `grep … | grep -q`: the callers
# run under `set -o pipefail`, and `grep -q` leaving early kills the first
# grep with SIGPIPE once it has more than a pipe buffer to write, which made
# a whole 50-test report count as "ran 0 tests" (about one run in six).
node_tap_counts() {
  local tap=$1 rc=$2 spec=${3:-} p f
  p=$(awk '/^# pass / { print $3 }' "$tap" | tail -1)
  f=$(awk '/^# fail / { print $3 }' "$tap" | tail -1)
  p=${p:-0} f=${f:-0}
  if ! awk '/^[ \t]*(not )?ok [0-9]+ - / && !/ - [^ \t]*\.test\.mjs$/ { n++ } END { exit !n }' "$tap"; then
    p=0 f=0
  fi
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ -n "$spec" ] && [ -s "$spec" ]; then
    p=$(awk '/^ℹ pass / { print $3 }' "$spec" | tail -1)
    f=$(awk '/^ℹ fail / { print $3 }' "$spec" | tail -1)
    p=${p:-0} f=${f:-0}
    if ! awk '/^[ \t]*(✔|✖) / && !/^[ \t]*(✔|✖) [^ \t]*\.test\.mjs( \(|$)/ { n++ } END { exit !n }' "$spec"; then
      p=0 f=0
    fi
    echo "(the TAP report held no test, $(wc -c <"$tap") bytes: counted from the spec report)" >&2
  fi
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
  echo "$p $f"
}

# suite_record SUITE PASSED FAILED adds one suite to the summary; a suite
# that ran nothing counts as a failure.
SUMMARY=()
TOTAL_PASS=0
TOTAL_FAIL=0
suite_record() {
  local suite="$1" pass="${2:-0}" failn="${3:-0}"
  if [ "$pass" -eq 0 ] && [ "$failn" -eq 0 ]; then
    failn=1
    SUMMARY+=("$(printf '%-12s ran 0 tests (counted as a failure)' "$suite")")
  else
    SUMMARY+=("$(printf '%-12s %d passed, %d failed' "$suite" "$pass" "$failn")")
  fi
  TOTAL_PASS=$((TOTAL_PASS + pass))
  TOTAL_FAIL=$((TOTAL_FAIL + failn))
}

# suite_summary prints each suite and the closing "N passed, N failed" line;
# its status is the run's.
suite_summary() {
  local line
  for line in "${SUMMARY[@]}"; do echo "  $line"; done
  echo "$TOTAL_PASS passed, $TOTAL_FAIL failed"
  [ "$TOTAL_FAIL" -eq 0 ]
}

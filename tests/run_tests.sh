#!/bin/sh
# Runs every test binary in $BUILD/tests (and the examples), adds up their
# "N passed, N failed, N skipped" lines and ends with "N passed, N failed".
# A binary that crashes or prints no summary counts as one failure.
# SJK_REQUIRE_ALL=1 (CI sets it) turns every skip into a failure.
# Each binary's line ends with its wall time ("(12.3 s)") and the run ends with the five
# slowest, so the cost of every test is visible in every log (CI's sanitizer passes set
# SJK_TEST_LIGHT=1 to keep it down; tests/harness.h, docs/RELIABILITY.md).
BUILD=${BUILD:-build}
pass=0; fail=0; skip=0
now() { date +%s.%N 2>/dev/null || date +%s; }
times=$(mktemp "${TMPDIR:-/tmp}/sjk-test-times.XXXXXX")
trap 'rm -f "$times"' EXIT
t_all=$(now)
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  t0=$(now)
  out=$($SJK_TEST_WRAP "$t" 2>&1); rc=$?
  secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  echo "$secs $name" >> "$times"
  summary=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped(; .*)?$' | tail -n 1)
  if [ -z "$summary" ]; then
    printf '%s\n' "$out" | tail -n 30
    echo "FAIL $name: no summary line (exit $rc) ($secs s)"
    fail=$((fail + 1)); continue
  fi
  p=$(echo "$summary" | cut -d' ' -f1); f=$(echo "$summary" | cut -d' ' -f3); s=$(echo "$summary" | cut -d' ' -f5 | tr -d ';')
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
  if [ "$f" -ne 0 ] || [ "$s" -ne 0 ]; then printf '%s\n' "$out" | grep -vE '^ok   ' ; fi
  echo "$name: $summary ($secs s)"
done
for e in "$BUILD"/examples/*; do
  [ -x "$e" ] || continue
  if $SJK_TEST_WRAP "$e" >/dev/null 2>&1; then pass=$((pass + 1)); echo "example $(basename "$e"): ok";
  else fail=$((fail + 1)); echo "FAIL example $(basename "$e")"; fi
done
if [ "${SJK_REQUIRE_ALL:-0}" = 1 ] && [ "$skip" -ne 0 ]; then
  echo "SJK_REQUIRE_ALL=1: $skip skipped test(s) count as failures"
  fail=$((fail + skip)); skip=0
fi
echo "wall $(awk -v a="$t_all" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }') s${SJK_TEST_LIGHT:+ (SJK_TEST_LIGHT=$SJK_TEST_LIGHT)}; slowest: $(sort -rn "$times" | head -n 5 | awk '{ printf "%s%s %s s", NR > 1 ? ", " : "", $2, $1 }')"
if [ "$skip" -ne 0 ]; then echo "WARNING: $skip test(s) skipped; see SKIP lines above"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

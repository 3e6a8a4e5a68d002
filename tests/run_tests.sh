#!/bin/sh
# Runs every test binary in $BUILD/tests (and the examples), adds up their
# "N passed, N failed, N skipped" lines and ends with "N passed, N failed".
# A binary that crashes or prints no summary counts as one failure.
# SJK_REQUIRE_ALL=1 (CI sets it) turns every skip into a failure, but those for this CPU (SKIP_HW:
# instructions it lacks, which nothing installs). SJK_TESTS="test_a test_b"
# runs only those binaries (and the examples); unset or empty, all of them.
# Each binary's line ends with its wall and CPU seconds ("(12.3 s, cpu 20.1 s)": CPU
# above wall is threads, wall far above CPU a loaded machine) and the run ends with the
# five slowest, so the cost of every test is visible in every log (the sanitizer passes
# set SJK_TEST_LIGHT=1 to keep it down: tests/harness.h, docs/RELIABILITY.md).
BUILD=${BUILD:-build}
pass=0; fail=0; skip=0; skip_hw=0
now() { date +%s.%N 2>/dev/null || date +%s; }
times=$(mktemp "${TMPDIR:-/tmp}/sjk-test-times.XXXXXX")
cpuf=$(mktemp "${TMPDIR:-/tmp}/sjk-test-cpu.XXXXXX")
trap 'rm -f "$times" "$cpuf"' EXIT
# user + system seconds of this shell's finished children (the builtin `times`, second
# line, "XmY.Zs XmY.Zs"; run in this shell, not a subshell, so that it sees them)
cpu_now() { times > "$cpuf"; }
cpu_secs() { awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); t += a[1] * 60 + a[2] } printf "%.2f", t }' "$cpuf"; }
t_all=$(now); cpu_now; c_all=$(cpu_secs)
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  if [ -n "${SJK_TESTS:-}" ]; then
    case " $SJK_TESTS " in *" $name "*) ;; *) continue ;; esac
  fi
  t0=$(now); cpu_now; c0=$(cpu_secs)
  out=$($SJK_TEST_WRAP "$t" 2>&1); rc=$?
  cpu_now; c1=$(cpu_secs)
  secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  csecs=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.1f", b - a }')
  echo "$secs $name" >> "$times"
  summary=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped(; .*)?$' | tail -n 1)
  if [ -z "$summary" ]; then
    printf '%s\n' "$out" | tail -n 30
    echo "FAIL $name: no summary line (exit $rc) ($secs s, cpu $csecs s)"
    fail=$((fail + 1)); continue
  fi
  p=$(echo "$summary" | cut -d' ' -f1); f=$(echo "$summary" | cut -d' ' -f3); s=$(echo "$summary" | cut -d' ' -f5 | tr -d ';')
  h=$(echo "$summary" | sed -nE 's/^[^;]*; ([0-9]+) for this CPU.*/\1/p'); h=${h:-0}
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s)); skip_hw=$((skip_hw + h))
  if [ "$f" -ne 0 ] || [ "$s" -ne 0 ]; then printf '%s\n' "$out" | grep -vE '^ok   ' ; fi
  echo "$name: $summary ($secs s, cpu $csecs s)"
done
for e in "$BUILD"/examples/*; do
  [ -x "$e" ] || continue
  if $SJK_TEST_WRAP "$e" >/dev/null 2>&1; then pass=$((pass + 1)); echo "example $(basename "$e"): ok";
  else fail=$((fail + 1)); echo "FAIL example $(basename "$e")"; fi
done
# Skips because this CPU lacks the instructions a kernel needs (SKIP_HW in tests/harness.h)
# are not failures even under SJK_REQUIRE_ALL: nothing CI installs provides them.
if [ "${SJK_REQUIRE_ALL:-0}" = 1 ] && [ "$((skip - skip_hw))" -ne 0 ]; then
  echo "SJK_REQUIRE_ALL=1: $((skip - skip_hw)) skipped test(s) count as failures"
  fail=$((fail + skip - skip_hw)); skip=$skip_hw
fi
cpu_now
echo "wall $(awk -v a="$t_all" -v b="$(now)" -v c="$c_all" -v d="$(cpu_secs)" 'BEGIN { printf "%.0f s, cpu %.0f", b - a, d - c }') s${SJK_TEST_LIGHT:+ (SJK_TEST_LIGHT=$SJK_TEST_LIGHT)}; slowest: $(sort -rn "$times" | head -n 5 | awk '{ printf "%s%s %s s", (NR > 1 ? ", " : ""), $2, $1 }')"
if [ "$skip" -ne 0 ]; then
  echo "WARNING: $skip test(s) skipped ($skip_hw of them because this CPU lacks the instructions they test); see SKIP lines above"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

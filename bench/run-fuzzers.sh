#!/bin/sh
# run-fuzzers.sh — runs every libFuzzer target (fuzz/fuzz_*.c) for SECONDS each (default
# 600), one after another at nice 19, and prints one result line per target. Logs and new
# corpus entries go to build/fuzz/ (never into the committed seeds); a crash leaves its
# input in build/fuzz/artifacts/ and makes the script exit non-zero.
#   sh bench/run-fuzzers.sh [SECONDS]
set -u
SECONDS_EACH=${1:-600}
FUZZ_BUILD=${FUZZ_BUILD:-build/fuzz}
make --no-print-directory fuzz-build FUZZ_BUILD="$FUZZ_BUILD" >/dev/null || exit 1
mkdir -p "$FUZZ_BUILD/logs" "$FUZZ_BUILD/artifacts"
status=0
for src in fuzz/fuzz_*.c; do
  t=$(basename "$src" .c); t=${t#fuzz_}
  mkdir -p "$FUZZ_BUILD/corpus/$t"
  start=$(date +%s)
  nice -n 19 "$FUZZ_BUILD/fuzz_$t" -max_total_time="$SECONDS_EACH" -print_final_stats=1 \
    -artifact_prefix="$FUZZ_BUILD/artifacts/$t-" "$FUZZ_BUILD/corpus/$t" "fuzz/corpus/$t" \
    > "$FUZZ_BUILD/logs/$t.log" 2>&1
  rc=$?
  end=$(date +%s)
  runs=$(grep -o 'number_of_executed_units: *[0-9]*' "$FUZZ_BUILD/logs/$t.log" | grep -o '[0-9]*$')
  cov=$(grep -o 'DONE *cov: [0-9]*' "$FUZZ_BUILD/logs/$t.log" | grep -o '[0-9]*$')
  if [ $rc -eq 0 ]; then res="no finding"; else res="FINDING (exit $rc, see $FUZZ_BUILD/logs/$t.log)"; status=1; fi
  echo "fuzz_$t: $((end - start)) s, ${runs:-?} runs, cov ${cov:-?}: $res"
done
exit $status

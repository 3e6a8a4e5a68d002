#!/usr/bin/env bash
# serve_memcheck.sh — `sjkvarn serve` under valgrind memcheck on loopback: a completion, a
# stream the client cuts after 300 bytes, an unknown route, bad JSON, /metrics, then
# SIGTERM. Exit status: valgrind's (99 on a memory error or a definite leak, else the
# server's own: 0 after the clean stop). Bounded: every request has a timeout.
#
#   bench/serve_memcheck.sh [build/sjkvarn]        (a few minutes: the model runs ~50x slower)
set -uo pipefail
BIN=${1:-build/sjkvarn}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
  "$BIN" serve -m gemma3-270m -c 256 -np 2 -t 2 --port 0 > "$T/out" 2> "$T/err" &
VP=$!
for _ in $(seq 1 300); do grep -q listening "$T/out" && break; sleep 1; done
PORT=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/out")
[ -n "$PORT" ] || { cat "$T/err"; kill "$VP"; exit 1; }
U=http://127.0.0.1:$PORT
curl -s -m 300 "$U/v1/completions" -d '{"prompt":"Hello","max_tokens":3,"temperature":0}'; echo
curl -s -m 300 -N "$U/v1/chat/completions" \
  -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":50,"stream":true}' | head -c 300; echo
curl -s -m 60 "$U/v1/nothing"; echo
curl -s -m 60 "$U/v1/completions" -d '{bad'; echo
curl -s -m 60 "$U/metrics" | grep -c '^sjkvarn_'
sleep 5
kill -TERM "$VP"
wait "$VP"; rc=$?
cat "$T/err"
echo "serve_memcheck: valgrind exit status $rc"
exit "$rc"

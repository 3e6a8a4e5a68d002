#!/bin/sh
# run.sh — the server's test as the suite runs it (build/tests/test_server execs this with
# the sjkvarn binary): tests/server/test_server.py with the Python of scripts/server-venv.
# Without that venv, or in a build without the server, it reports one SKIP (which
# SJK_REQUIRE_ALL=1 turns into a failure).
BIN=$1
PY=${SJK_SERVER_VENV:-$HOME/.cache/sjkvarn/server-venv}/bin/python
if [ ! -x "$PY" ] || ! "$PY" -c 'import openai' 2>/dev/null; then
  echo "  SKIP test_server: no Python venv with the openai client (run scripts/server-venv)"
  echo "SKIP test_server"; echo "0 passed, 0 failed, 1 skipped"; exit 0
fi
if ! "$BIN" serve --help >/dev/null 2>&1; then
  echo "  SKIP test_server: $BIN was built without the server (apt-get install libmicrohttpd-dev libjansson-dev)"
  echo "SKIP test_server"; echo "0 passed, 0 failed, 1 skipped"; exit 0
fi
exec "$PY" tests/server/test_server.py "$BIN"

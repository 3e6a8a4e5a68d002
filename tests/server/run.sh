#!/bin/sh
# run.sh — a server test as the suite runs it (build/tests/test_server and
# build/tests/test_store_server exec this with the sjkvarn binary and the test's name):
# tests/server/NAME.py with the Python of scripts/server-venv. Without that venv, or in a
# build without the server, it reports one SKIP (which SJK_REQUIRE_ALL=1 turns into a
# failure).
BIN=$1
NAME=${2:-test_server}
PY=${SJK_SERVER_VENV:-$HOME/.cache/sjkvarn/server-venv}/bin/python
if [ ! -x "$PY" ] || ! "$PY" -c 'import openai' 2>/dev/null; then
  echo "  SKIP $NAME: no Python venv with the openai client (run scripts/server-venv)"
  echo "SKIP $NAME"; echo "0 passed, 0 failed, 1 skipped"; exit 0
fi
if ! "$BIN" serve --help >/dev/null 2>&1; then
  echo "  SKIP $NAME: $BIN was built without the server (apt-get install libmicrohttpd-dev libjansson-dev)"
  echo "SKIP $NAME"; echo "0 passed, 0 failed, 1 skipped"; exit 0
fi
exec "$PY" "tests/server/$NAME.py" "$BIN"

#!/usr/bin/env bash
# make demo: a short, honest session with the elrun store until the elastic
# training example lands.  Starts `elrun store` on a free port, has PyTorch's
# own TCPStore client and a two-process gloo group use it, and stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
out=$(mktemp -d)
trap 'kill $pid 2>/dev/null; rm -rf "$out"' EXIT
"$BUILD/elrun" store --listen 127.0.0.1:0 >"$out/store.out" 2>"$out/store.err" &
pid=$!
until grep -q '^listening on' "$out/store.out" 2>/dev/null; do
    kill -0 $pid 2>/dev/null || { cat "$out/store.err"; exit 1; }
    sleep 0.01
done
port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$out/store.out")
echo "demo: elrun store listening on 127.0.0.1:$port"
echo "demo: PyTorch's TCPStore client runs every operation against it"
/usr/bin/python3 tests/e2e/py/store_client_ops.py "$port" | sed 's/^/  /'
echo "demo: two PyTorch processes form a gloo group on it and all_reduce"
/usr/bin/python3 tests/e2e/py/store_gloo_pg.py "$port" | sed 's/^/  /'
kill -TERM $pid; wait $pid
echo "demo: store stopped cleanly"

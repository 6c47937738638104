#!/usr/bin/env bash
# The elrun store serves PyTorch's real TCPStore client (Debian python3-torch
# 1.13): every client operation, and a gloo process group of two processes,
# while another connection holds a partial frame (which hangs PyTorch 1.13's
# own server for everyone).
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

start_store
# A 2.x VALIDATE cut short, held open for the whole script.
exec 7<>"/dev/tcp/127.0.0.1/$STORE_PORT"
printf '\x00\xce\xf7' >&7

test_expect_success 'PyTorch TCPStore client: every operation' '
    timeout 120 $PY "$ROOT/tests/e2e/py/store_client_ops.py" "$STORE_PORT" >"$T/ops.out" 2>&1 || { cat "$T/ops.out"; false; }
    grep -q "^all ok" "$T/ops.out"
'

test_expect_success 'PyTorch gloo process group of two on the store' '
    timeout 180 $PY "$ROOT/tests/e2e/py/store_gloo_pg.py" "$STORE_PORT" >"$T/pg.out" 2>&1 || { cat "$T/pg.out"; false; }
    grep -q "^all ok" "$T/pg.out"
'
exec 7>&-

test_expect_success 'bad flags and a busy port give a clear one-line error' '
    refute "$ELRUN" store --listen nowhere >"$T/e1" 2>&1
    grep -q "needs HOST:PORT" "$T/e1"
    refute "$ELRUN" store --max-key-len -3 >"$T/e2" 2>&1
    grep -q "positive integer" "$T/e2"
    refute "$ELRUN" store --bogus >"$T/e3" 2>&1
    grep -q "unknown or incomplete option" "$T/e3"
    refute "$ELRUN" store --listen "127.0.0.1:$STORE_PORT" >"$T/e4" 2>&1
    grep -q "cannot listen" "$T/e4"
'

kill -TERM "$STORE_PID"
wait "$STORE_PID"
store_status=$?
test_expect_success 'SIGTERM stops the store with status 0' '
    [[ $store_status -eq 0 ]]
    grep -q "shutting down" "$T/store.err"
'
test_done

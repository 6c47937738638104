#!/usr/bin/env bash
# The store's limits against misbehaving clients (issue #11, items 2 and 4),
# with PyTorch's real TCPStore client (Debian python3-torch) as the client
# that must keep being served:
#   * 20 clients that send GETs of a 4 MiB value and never read: the store
#     holds at most --max-total-buffer (plus a small floor per connection),
#     not 20 x --max-conn-buffer, and says so in its log;
#   * 300 held-open silent connections against a store whose descriptor
#     limit is 128 (ulimit -n): a new PyTorch client still connects.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
HOG="$ROOT/tests/e2e/py/store_hog.py"
GOOD="$ROOT/tests/e2e/py/store_good_client.py"

# vm_hwm PID: the process's peak resident set in KiB.
vm_hwm() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }

test_expect_success 'clients that never read: memory stays under the total cap, others are served' '
    start_store --max-total-buffer 33554432
    timeout 60 $PY "$GOOD" "$STORE_PORT" 1 --put big 4194304 >"$T/put.out" 2>&1 || { cat "$T/put.out"; false; }
    $PY "$HOG" noread "$STORE_PORT" 20 /big 64 >"$T/hog.out" 2>&1 &
    track_pid $!
    wait_for_line "$T/hog.out" "^ready 20" 30
    wait_for_line "$T/store.err" "past max_total_buffer" 30
    timeout 120 $PY "$GOOD" "$STORE_PORT" 200 >"$T/good.out" 2>&1 || { cat "$T/good.out" "$T/store.err"; false; }
    grep "^all ok 200" "$T/good.out"
    hwm=$(vm_hwm "$STORE_PID")
    echo "store peak RSS: $hwm KiB"
    # 32 MiB of buffers + the 4 MiB value + a floor per connection; without
    # the caps 20 connections held 65 MiB each.
    ((hwm < 120 * 1024))
    kill -TERM "$STORE_PID"
    wait "$STORE_PID"
'

test_expect_success 'held-open connections at a descriptor limit of 128: a PyTorch client still connects' '
    ( ulimit -n 128; exec "$ELRUN" store --listen 127.0.0.1:0 ) >"$T/store2.out" 2>"$T/store2.err" &
    pid=$!
    track_pid $pid
    wait_for_line "$T/store2.out" "^listening on " 20
    port=$(sed -n "s/^listening on .*:\([0-9]*\)$/\1/p" "$T/store2.out")
    # A worker connected before the flood keeps its connection.
    $PY - "$port" "$T/flood_done" >"$T/old.out" 2>&1 <<PYEOF &
import datetime, os, sys, time
import torch.distributed as dist
s = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 1, False, timeout=datetime.timedelta(seconds=30))
s.set("old", "1")
print("connected", flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
print("still served", s.get("old"), flush=True)
PYEOF
    track_pid $!
    wait_for_line "$T/old.out" "^connected" 60
    $PY "$HOG" hold "$port" 300 >"$T/hold.out" 2>&1 &
    track_pid $!
    wait_for_line "$T/hold.out" "^ready" 60
    cat "$T/hold.out"
    sleep 1.1 # the store drops only connections quiet for a second
    timeout 60 $PY "$GOOD" "$port" 20 >"$T/good2.out" 2>&1 || { cat "$T/good2.out" "$T/store2.err"; false; }
    grep "^all ok 20" "$T/good2.out"
    grep -q "dropped to make room for a new client" "$T/store2.err"
    touch "$T/flood_done"
    wait_for_line "$T/old.out" "^still served" 30
'

test_expect_success 'limit flags: bad values get a clear one-line error' '
    refute "$ELRUN" store --max-total-buffer 0
    out=$("$ELRUN" store --max-total-buffer 0 2>&1) || true
    [[ $out == *"--max-total-buffer needs a positive integer"* ]]
    refute "$ELRUN" store --fd-reserve x
    "$ELRUN" store --help | contains -- "--max-conns-per-peer"
'
test_done

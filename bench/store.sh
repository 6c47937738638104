#!/usr/bin/env bash
# store.sh -- the store figures of issue 2, measured side by side in one run:
# elrun's store server (`elrun store`) against PyTorch 1.13's own TCPStore
# server (Debian's python3-torch, via bench/store_torch_server.py), driven by
# the same C client (bench/store_bench.c, raw TCPStore 1.13 frames) on the
# same machine.  Three parts, then one summary table:
#
#   1. throughput of set / get (WAIT+GET, as the PyTorch client does it) /
#      add, plus elrun's one-round-trip get (xget, elrun only), with 1, 16
#      and 256 concurrent clients: medians over REPS repetitions, the two
#      servers interleaved repetition by repetition, and the server's CPU
#      time per op;
#   2. a connection storm: N clients connect, ADD one key, WAIT until the
#      count reaches N (a barrier), for each N in STORM_N, a fresh server
#      each time;
#   3. server memory per idle connection (RSS with IDLE_N idle connections
#      minus RSS with none, divided by IDLE_N), a fresh server each time;
#      for elrun also with every connection holding a partial frame (not
#      for PyTorch 1.13, whose server stalls on a partial frame).
#
# Run, as root, from anywhere (it builds what it needs into $BUILD):
#
#   bench/store.sh                 full run, about 7 minutes on 2 vCPUs
#   QUICK=1 bench/store.sh         smoke run, about 1 minute
#
# Knobs (environment): REPS (7), SECS per throughput measurement (1),
# CLIENTS ("1,16,256"), STORM_N ("1000 10000 <largest that fits the fd
# limit> 50000"), STORM_REPS (3, for N <= 10000), STORM_WINDOW (4096
# connections of the storm in their handshake or first ADD at once; more
# than PyTorch 1.13's listen backlog of 2048), IDLE_N (10000),
# STORM_TIMEOUT (60 s), TORCH_STORM_TIMEOUT (60 s; PyTorch's server is
# time-boxed), BUILD (build-bench).
#
# For the run it raises net.core.somaxconn to 65535 (restored on exit) and
# tries to raise the descriptor limit to 200000 with prlimit (which needs
# CAP_SYS_RESOURCE; when the hard limit cannot be raised, a storm larger
# than it is still run, time-boxed, to show what each server does at its
# descriptor limit).  Traffic goes only to 127.0.0.0/8: servers listen on
# 127.0.0.1, storm clients are bound to 127.0.0.2-127.0.0.9.  Every wait is
# bounded, and every process it starts is killed on exit (trap).
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build-bench}
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
    REPS=${REPS:-1}; SECS=${SECS:-0.5}; IDLE_N=${IDLE_N:-2000}
    STORM_N=${STORM_N:-"1000 5000"}
else
    REPS=${REPS:-7}; SECS=${SECS:-1}; IDLE_N=${IDLE_N:-10000}
fi
CLIENTS=${CLIENTS:-1,16,256}
STORM_WINDOW=${STORM_WINDOW:-4096}
STORM_TIMEOUT=${STORM_TIMEOUT:-60}
STORM_REPS=${STORM_REPS:-3}
TORCH_STORM_TIMEOUT=${TORCH_STORM_TIMEOUT:-60}
PY=/usr/bin/python3
BENCH="$ROOT/$BUILD/bench/store_bench"
ELRUN="$ROOT/$BUILD/elrun"
TMP=$(mktemp -d /tmp/storebench.XXXXXX)
PIDS=()
OLD_SOMAXCONN=

cleanup() {
    local p
    for p in "${PIDS[@]}"; do
        kill "$p" 2>/dev/null
    done
    sleep 0.2
    for p in "${PIDS[@]}"; do
        kill -9 "$p" 2>/dev/null
    done
    if [ -n "$OLD_SOMAXCONN" ]; then
        echo "$OLD_SOMAXCONN" > /proc/sys/net/core/somaxconn 2>/dev/null
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { printf '%s  %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# --- build -------------------------------------------------------------------
log "building $BUILD/elrun and $BUILD/bench/store_bench"
if ! make -s -C "$ROOT" BUILD="$BUILD" "$BUILD/elrun" "$BUILD/bench/store_bench" \
        > "$TMP/build.log" 2>&1; then
    cat "$TMP/build.log" >&2
    echo "store.sh: build failed" >&2
    exit 1
fi
# The server runs from a copy named bench_kv: on a shared machine a
# concurrent `pkill elrun` (someone else's test cleanup) would otherwise end
# it in the middle of a measurement.
cp "$ELRUN" "$TMP/bench_kv"
ELRUN="$TMP/bench_kv"
if ! $PY -c 'import torch.distributed' 2>/dev/null; then
    echo "store.sh: $PY cannot import torch (apt-get install python3-torch)" >&2
    exit 1
fi

# --- limits --------------------------------------------------------------------
PRL=()
if prlimit --nofile=200000:200000 true 2>/dev/null; then
    PRL=(prlimit --nofile=200000:200000)
    FDMAX=200000
else
    FDMAX=$(ulimit -Hn)
    log "cannot raise the descriptor hard limit above $FDMAX (no CAP_SYS_RESOURCE):" \
        "one server process holds at most ~$FDMAX connections here"
fi
if [ -w /proc/sys/net/core/somaxconn ]; then
    OLD_SOMAXCONN=$(cat /proc/sys/net/core/somaxconn)
    echo 65535 > /proc/sys/net/core/somaxconn
fi
if [ -z "${STORM_N:-}" ]; then
    FIT=$(( (FDMAX - 1000) / 1000 * 1000 ))
    if [ "$FIT" -lt 50000 ]; then
        STORM_N="1000 10000 $FIT 50000"
    else
        STORM_N="1000 10000 50000"
    fi
fi

# --- servers -------------------------------------------------------------------
# start_server elrun|torch: sets SRV_PID and SRV_ADDR (HOST:PORT).
start_server() {
    local kind=$1 out="$TMP/$1.$RANDOM.out"
    if [ "$kind" = elrun ]; then
        "${PRL[@]}" "$ELRUN" store --listen 127.0.0.1:0 > "$out" 2>&1 &
    else
        "${PRL[@]}" $PY "$ROOT/bench/store_torch_server.py" 0 \
            --max-seconds 3600 > "$out" 2>&1 &
    fi
    SRV_PID=$!
    PIDS+=("$SRV_PID")
    SRV_ADDR=
    local i
    for i in $(seq 1 300); do
        SRV_ADDR=$(sed -n 's/^listening on \(127\.0\.0\.1:[0-9]*\).*/\1/p' "$out" | head -1)
        [ -n "$SRV_ADDR" ] && return 0
        kill -0 "$SRV_PID" 2>/dev/null || break
        sleep 0.1
    done
    cat "$out" >&2
    echo "store.sh: the $kind server did not start" >&2
    exit 1
}

stop_server() {
    local pid=$1 i
    kill "$pid" 2>/dev/null
    for i in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}

# --- machine -----------------------------------------------------------------
{
    echo "machine: $(nproc) vCPU, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)," \
         "$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r)"
    echo "elrun: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)$(git -C "$ROOT" diff --quiet HEAD -- src include Makefile 2>/dev/null || echo ' (+ uncommitted changes in src/)');" \
         "PyTorch: $(dpkg-query -W -f '${Version}' python3-torch 2>/dev/null)" \
         "(torch.__version__ $($PY -c 'import torch; print(torch.__version__)' 2>/dev/null))"
    echo "descriptor hard limit: $FDMAX; somaxconn: $(cat /proc/sys/net/core/somaxconn)"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$TMP/machine.txt"
cat "$TMP/machine.txt" >&2

# --- 1. throughput ---------------------------------------------------------------
log "throughput: $REPS repetitions x $SECS s, clients $CLIENTS (both servers interleaved)"
start_server elrun; E_PID=$SRV_PID; E_ADDR=$SRV_ADDR
start_server torch; T_PID=$SRV_PID; T_ADDR=$SRV_ADDR
timeout 1800 "$BENCH" tput --server "elrun=$E_ADDR" --server "torch=$T_ADDR" \
    --pid "elrun=$E_PID" --pid "torch=$T_PID" --native elrun \
    --clients "$CLIENTS" --ops set,get,add,xget --reps "$REPS" --seconds "$SECS" \
    > "$TMP/tput.txt" 2> "$TMP/tput.err"
grep '^tput ' "$TMP/tput.txt" >&2
sort -u "$TMP/tput.err" >&2
for p in "$E_PID:elrun" "$T_PID:torch"; do
    kill -0 "${p%%:*}" 2>/dev/null ||
        echo "WARNING: the ${p#*:} server died during the throughput runs" | tee -a "$TMP/machine.txt" >&2
done
stop_server "$E_PID"
stop_server "$T_PID"

# --- 2. connection storm ----------------------------------------------------------
: > "$TMP/storm.txt"
for n in $STORM_N; do
    # small storms are repeated (median); the time-boxed big ones run once
    reps=$STORM_REPS
    [ "$n" -gt 10000 ] && reps=1
    for r in $(seq 1 "$reps"); do
        for kind in elrun torch; do
            to=$STORM_TIMEOUT
            [ "$kind" = torch ] && to=$TORCH_STORM_TIMEOUT
            if [ $((n + 100)) -gt "$FDMAX" ] && [ "$kind" = elrun ]; then
                to=15 # cannot complete here: show the behaviour at the limit
            fi
            log "storm: $kind, N=$n, run $r of $reps (time box ${to}s)"
            start_server "$kind"
            timeout $((to + 60)) "$BENCH" storm --addr "$SRV_ADDR" --name "$kind" \
                --n "$n" --window "$STORM_WINDOW" --timeout "$to" \
                >> "$TMP/storm.txt" 2> "$TMP/storm.err"
            [ $? -eq 124 ] &&
                echo "RESULT storm server=$kind n=$n result=killed" >> "$TMP/storm.txt"
            alive=yes
            kill -0 "$SRV_PID" 2>/dev/null || alive=no
            echo "ALIVE server=$kind n=$n alive=$alive" >> "$TMP/storm.txt"
            grep "^RESULT storm server=$kind n=$n " "$TMP/storm.txt" | tail -1 >&2
            stop_server "$SRV_PID"
        done
    done
done

# --- 3. memory per idle connection ------------------------------------------------
: > "$TMP/idle.txt"
for kind in elrun torch elrun-partial; do
    log "idle memory: $kind, $IDLE_N connections"
    partial=0
    [ "$kind" = elrun-partial ] && partial=9
    start_server "${kind%-partial}"
    sleep 1
    timeout 300 "$BENCH" idle --addr "$SRV_ADDR" --pid "$SRV_PID" --name "$kind" \
        --n "$IDLE_N" --partial "$partial" >> "$TMP/idle.txt" 2>&1
    tail -1 "$TMP/idle.txt" >&2
    stop_server "$SRV_PID"
done

# --- summary ----------------------------------------------------------------------
field() { # field NAME LINE
    sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<< "$2"
}
echo
echo "=== elrun store vs PyTorch 1.13 TCPStore ($(date -u '+%Y-%m-%d %H:%M UTC')) ==="
cat "$TMP/machine.txt"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "(elrun/torch: ratio of the medians; paired: median of the ratios of the"
echo " back-to-back measurements of each repetition.  get = WAIT + GET, as"
echo " PyTorch's client does it; xget = elrun's one-round-trip get, elrun only)"
sed -n '/^Throughput/,$p' "$TMP/tput.txt" | grep -v '^RESULT'
echo
echo "Connection storm: N clients connect, ADD 1 to one key, WAIT on 'done' (set"
echo "by the client whose ADD returned N); time until every client's WAIT returned:"
echo "median (min-max) of the runs, and the median time until all had connected"
printf '%-7s %-54s %-54s\n' N elrun torch
median() { sort -g | awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)], v[1], v[NR]}'; }
for n in $STORM_N; do
    cells=()
    for kind in elrun torch; do
        lines=$(grep "^RESULT storm server=$kind n=$n " "$TMP/storm.txt")
        oks=$(grep ' result=ok ' <<< "$lines")
        line=$(grep -v ' result=ok ' <<< "$lines" | head -1)
        alive=$(grep "^ALIVE server=$kind n=$n .*alive=no" "$TMP/storm.txt" | head -1)
        runs=$(grep -c . <<< "$lines")
        nok=$(grep -c . <<< "$oks")
        res=$(field result "$line")
        if [ "$nok" -gt 0 ]; then
            read -r med lo hi < <(while read -r l; do field t_done "$l"; done <<< "$oks" | median)
            read -r cmed _ < <(while read -r l; do field t_connected "$l"; done <<< "$oks" | median)
            if [ "$nok" = "$runs" ]; then
                cell="$med s ($lo-$hi, $runs runs; connected $cmed s)"
            else
                cell="$med s ($lo-$hi); $((runs - nok)) of $runs runs $res:"
                cell="$cell $(field failed "$line") reset"
            fi
        elif [ -n "$res" ]; then
            cell="$res: $(field done "$line") done, $(field added "$line") added,"
            cell="$cell $(field failed "$line") failed"
            [ -n "$alive" ] && cell="$cell, server DIED"
        else
            cell="no result"
        fi
        cells+=("$cell")
    done
    printf '%-7s %-54s %-54s\n' "$n" "${cells[0]}" "${cells[1]}"
done
echo
echo "Memory per idle connection (server RSS with $IDLE_N idle connections minus"
echo "with none, divided by $IDLE_N; kernel socket memory not included;"
echo "elrun-partial: each connection also holds the first 9 bytes of a SET)"
for kind in elrun torch elrun-partial; do
    line=$(grep "^RESULT idle server=$kind " "$TMP/idle.txt" | head -1)
    printf '%-13s %s bytes/connection (RSS %s -> %s KiB, opened %s)\n' "$kind" \
        "$(field bytes_per_conn "$line")" "$(field rss_before_kib "$line")" \
        "$(field rss_with_kib "$line")" "$(field opened "$line")"
done
echo
echo "Raw result lines:"
grep -h '^RESULT' "$TMP/tput.txt" "$TMP/storm.txt" "$TMP/idle.txt"

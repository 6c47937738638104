#!/usr/bin/env bash
# events.sh -- the cost of the job's events and the time of `elrun status`
# (issue #17's figures; docs/EVENTS.md).
#
#   agent   one agent of a c10d job on an `elrun store` (--nnodes=1:2, so
#           the rendezvous is the elastic one), 2 workers, for WINDOW s:
#           its CPU time (every thread's schedstat) over the window and its
#           peak RSS (VmHWM), events on (the default) against off
#           (ELRUN_EVENTS=0) and the base build (no events code), each
#           idle (workers sleep) and busy (a worker fails every 0.3 s:
#           failure, restart, round and recovery events, about 13 a second)
#   status  `elrun status` of a fake 256-node job in a real elrun store
#           (bench/events_fill.c: the rendezvous keys of round 7 with 256
#           members, 2000 events in the history), the process's wall time,
#           against the 100 ms goal, and `elrun events` of all 2000; both
#           also with the base build, side by side (the same store, the same
#           run)
#   etcd    `elrun events` of 2000 events in a real etcd (tests/infra, when
#           etcd is installed), this build and the base build
#
#   bench/events.sh                 RUNS=5 WINDOW=5 STATUS_RUNS=30
#   BASE=/work/base/build bench/events.sh
#   PARTS=status,etcd bench/events.sh   (the parts to run: agent,status,etcd)
#   BEFORE=/tmp/old/build/elrun PARTS=status,etcd bench/events.sh
#                                   (the reads before and after a change)
# Prints one RESULT line per figure: median (min-max).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BASE=${BASE:-/work/base/build}
RUNS=${RUNS:-5}
WINDOW=${WINDOW:-5}
STATUS_RUNS=${STATUS_RUNS:-30}
PARTS=${PARTS:-agent,status,etcd}
part() { [[ ,$PARTS, == *,$1,* ]]; }
ELRUN=$PWD/$BUILD/elrun
FILL=$PWD/$BUILD/bench/events_fill
[[ -x $ELRUN && -x $FILL ]] || { echo "build first: make BUILD=$BUILD all" >&2; exit 2; }
W=$(mktemp -d "${TMPDIR:-/tmp}/events-bench.XXXXXX")
pids=()
ETCD_PORT=
trap 'for p in "${pids[@]:-}"; do [[ -n $p ]] && kill -KILL "$p" 2>/dev/null || true; done
      [[ -n $ETCD_PORT ]] && ETCD_BASE="$W/etcd" bash tests/infra/etcd-stop.sh "$ETCD_PORT" >/dev/null 2>&1
      rm -rf "$W"' EXIT

. bench/lib.sh # stats, cpu_ms, hwm_kib

"$ELRUN" store --listen 127.0.0.1:0 >"$W/store.out" 2>"$W/store.err" &
pids+=("$!")
for _ in $(seq 500); do grep -q '^listening on' "$W/store.out" 2>/dev/null && break; sleep 0.01; done
PORT=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$W/store.out" | head -1)
[[ -n $PORT ]] || { echo "no store" >&2; exit 1; }

# one_agent BIN EVENTS(0|1) LOAD(idle|busy) RUN: prints "cpu_ms hwm_kib events".
one_agent() {
    local bin=$1 ev=$2 load=$3 id=j$4$RANDOM w
    if [[ $load == idle ]]; then w='sleep 1000'; else w='sleep 0.3; exit 1'; fi
    local env=(); ((ev)) || env=(ELRUN_EVENTS=0)
    env "${env[@]}" "$bin" --nnodes=1:2 --nproc-per-node=2 --rdzv-backend=c10d \
        --rdzv-endpoint=127.0.0.1:"$PORT" --rdzv-id="$id" --max-restarts=100000 \
        --restart-backoff=0 --rdzv-conf last_call_timeout=0 \
        --no-python /bin/sh -c "$w" >"$W/agent.log" 2>&1 &
    local apid=$!
    pids+=("$apid")
    sleep 1
    local c0; c0=$(cpu_ms "$apid")
    sleep "$WINDOW"
    local c1 h; c1=$(cpu_ms "$apid"); h=$(hwm_kib "$apid")
    kill -TERM "$apid"; wait "$apid" 2>/dev/null || true
    local n; n=$({ "$ELRUN" events --rdzv-endpoint=127.0.0.1:"$PORT" --rdzv-id="$id" 2>/dev/null || true; } | wc -l)
    echo "$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }') $h $n"
}

declare -A NAME=([base]="base build" [off]="events off" [on]="events on")
part agent && for load in idle busy; do
    for mode in base off on; do
        bin=$ELRUN; ev=1
        [[ $mode == off ]] && ev=0
        if [[ $mode == base ]]; then
            [[ -x $BASE/elrun ]] || continue
            bin=$BASE/elrun; ev=0
        fi
        : >"$W/res"
        for r in $(seq "$RUNS"); do one_agent "$bin" "$ev" "$load" "$r" >>"$W/res"; done
        echo "RESULT agent $load cpu_ms/${WINDOW}s ${NAME[$mode]}: $(cut -d' ' -f1 "$W/res" | stats)"
        echo "RESULT agent $load peak_rss_kib ${NAME[$mode]}: $(cut -d' ' -f2 "$W/res" | stats)"
        echo "RESULT agent $load events stored ${NAME[$mode]}: $(cut -d' ' -f3 "$W/res" | stats)"
    done
done

# timed BIN ARGS...: STATUS_RUNS wall times of `BIN ARGS` in ms, one a line.
timed() {
    for _ in $(seq "$STATUS_RUNS"); do
        t0=$(date +%s%N)
        "$@" >/dev/null
        t1=$(date +%s%N)
        echo $(((t1 - t0) / 1000))
    done | awk '{ print $1 / 1000 }'
}
# builds: this build, then BEFORE's (an elrun of the commit before a
# change, built elsewhere) and the base build, those that have the verbs
builds=("this:$ELRUN")
for b in "before:${BEFORE:-}" "base:$BASE/elrun"; do
    [[ -x ${b#*:} ]] && "${b#*:}" events --help >/dev/null 2>&1 && builds+=("$b")
done

# elrun status and elrun events of a 256-node job
if part status; then
    "$FILL" 127.0.0.1 "$PORT" big 256 2000
    "$ELRUN" status --rdzv-endpoint=127.0.0.1:"$PORT" --rdzv-id=big >"$W/status.txt"
    grep -q '^world:     256 nodes, 2048 workers (MIN:MAX 128:256)' "$W/status.txt" ||
        { echo "unexpected status:" >&2; cat "$W/status.txt" >&2; exit 1; }
    [[ $("$ELRUN" events --rdzv-endpoint=127.0.0.1:"$PORT" --rdzv-id=big | wc -l) == 2000 ]]
    for b in "${builds[@]}"; do
        bin=${b#*:}
        echo "RESULT elrun status ms, 256 nodes, 2000 events (goal < 100), ${b%%:*} build: $(timed "$bin" status --rdzv-endpoint=127.0.0.1:"$PORT" --rdzv-id=big | stats)"
        echo "RESULT elrun events ms, all 2000 events (store), ${b%%:*} build: $(timed "$bin" events --rdzv-endpoint=127.0.0.1:"$PORT" --rdzv-id=big | stats)"
    done
fi

# elrun events of 2000 events in etcd (written as the agents write them)
if part etcd && command -v etcd >/dev/null; then
    low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range)
    for _ in $(seq 100); do
        p=$((12000 + RANDOM % (low - 22000)))
        [[ -z $(ss -Htan "( sport = :$p or sport = :$((p + 10000)) )") ]] && { ETCD_PORT=$p; break; }
    done
    EP=$(ETCD_BASE="$W/etcd" bash tests/infra/etcd-start.sh "$ETCD_PORT" 2>"$W/etcd.log") || { cat "$W/etcd.log" >&2; exit 1; }
    EP=${EP#http://}
    python3 tests/e2e/py/etcd_events.py "$EP" big 2000
    EVE=(events --rdzv-backend=etcd --rdzv-endpoint="$EP" --rdzv-id=big)
    [[ $("$ELRUN" "${EVE[@]}" | wc -l) == 2000 ]]
    for b in "${builds[@]}"; do
        echo "RESULT elrun events ms, all 2000 events (etcd), ${b%%:*} build: $(timed "${b#*:}" "${EVE[@]}" | stats)"
    done
fi

#!/usr/bin/env bash
# dashboard.sh -- what the live dashboard costs (issue #17's figures).
#
#   agent     an agent running 2 workers that report step and loss 20 times
#             a second, for WINDOW seconds: its peak RSS (VmHWM) and CPU time
#             (every thread's schedstat) over the window, for: the base
#             build (no dashboard code, no progress fd: the workers only
#             sleep), this build without flags, with --metrics-addr, with
#             --dashboard-addr (nobody looking), and with the page open (the
#             page's own poll: GET /api/job every second, plus one GET of the
#             page and its assets at the start)
#   events    the same agent after EVENTS events recorded (the ring full:
#             512 kept), to show the record's bound: RSS with the dashboard
#   api       GET /api/job of that agent: curl's time_total, API requests
#   assets    the embedded page's size: files, bytes, and the .rodata the
#             binary grew by (size(1) against the base build)
#
#   bench/dashboard.sh                  RUNS=5 WINDOW=5 API=200
#   PARTS="events assets" bench/dashboard.sh   only those parts
#   BASE=/work/base/build bench/dashboard.sh
# Prints one RESULT line per figure: median (min-max).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BASE=${BASE:-/work/base/build}
RUNS=${RUNS:-5}
WINDOW=${WINDOW:-5}
API=${API:-200}
PARTS=" ${PARTS:-agent events api assets} "
PY=${PYTHON_EXEC:-/usr/bin/python3}
ELRUN=$PWD/$BUILD/elrun
[[ -x $ELRUN ]] || { echo "build first: make BUILD=$BUILD" >&2; exit 2; }
command -v curl >/dev/null || { echo "needs curl" >&2; exit 2; }
W=$(mktemp -d "${TMPDIR:-/tmp}/dash-bench.XXXXXX")
pids=()
trap 'for p in "${pids[@]:-}"; do [[ -n $p ]] && kill -KILL "$p" 2>/dev/null || true; done; rm -rf "$W"' EXIT

. bench/lib.sh
# url_of WHAT LOG: the URL of the "WHAT at http://..." line, once logged.
url_of() {
    for _ in $(seq 500); do
        u=$(sed -n "s|.* $1 at \(http://[^ ]*\)$|\1|p" "$2" | head -1)
        [[ -n $u ]] && { echo "$u"; return; }
        sleep 0.01
    done
    echo "no '$1 at' line in $2" >&2; return 1
}
# The workers: progress with a loss when there is a fd, until killed.
cat >"$W/w.py" <<'PYEOF'
import os, sys, time
fd = int(os.environ.get("ELRUN_PROGRESS_FD", "-1"))
for s in range(1, 10**7):
    if fd >= 0:
        try: os.write(fd, b"step %d samples %d loss %.5f\n" % (s, 32 * s, 2.0 / s))
        except BlockingIOError: pass
    time.sleep(0.05)
PYEOF

# one_agent BIN MODE: prints "cpu_ms hwm_kib" of WINDOW s.
one_agent() {
    local bin=$1 mode=$2 args=() log=$W/agent.log
    case $mode in
    metrics) args=(--metrics-addr=127.0.0.1:0) ;;
    dash | looked) args=(--dashboard-addr=127.0.0.1:0) ;;
    esac
    : >"$log"
    PYTHON_EXEC=$PY "$bin" --standalone --nproc-per-node=2 "${args[@]}" "$W/w.py" >"$log" 2>&1 &
    local apid=$! pp=
    pids+=("$apid")
    # Running: both workers are the agent's children.
    for _ in $(seq 500); do (($(pgrep -c -P "$apid" || true) == 2)) && break; sleep 0.01; done
    sleep 1 # the workers' first reports (a bench: not a readiness wait)
    if [[ $mode == looked ]]; then
        local u; u=$(url_of dashboard "$log")
        for f in "" dash.js dash.css; do curl -s -o /dev/null "$u$f"; done
        (while :; do curl -s -o /dev/null "${u}api/job"; sleep 1; done) &
        pp=$!; pids+=("$pp")
    fi
    local c0; c0=$(cpu_ms "$apid")
    sleep "$WINDOW"
    local c1 h; c1=$(cpu_ms "$apid"); h=$(hwm_kib "$apid")
    [[ -n $pp ]] && kill "$pp" 2>/dev/null
    kill -TERM "$apid"; wait "$apid" || true
    echo "$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }') $h"
}

part() { [[ $PARTS == *" $1 "* ]]; }
declare -A NAME=([base]="base build" [off]="this build, no flag" [metrics]="--metrics-addr"
                 [dash]="--dashboard-addr, not looked at" [looked]="--dashboard-addr, page open (1 poll/s)")
part agent && agent_table base off metrics dash looked

# A full event ring: 2 workers that exit 1 at once, 200 restarts (1000+
# events: exits, failures, restarts, rounds; 512 kept), against the same run
# without the dashboard.  Peak RSS of the agent from wait4 (agent_wallrss).
if part events; then
printf '%s\n' '#!/bin/sh' 'exit 1' >"$W/fail.sh"; chmod +x "$W/fail.sh"
WR=$PWD/$BUILD/bench/agent_wallrss
declare -A ENAME=([off]="no flag" [metrics]="--metrics-addr" [dash]="--dashboard-addr")
for mode in off metrics dash; do
    args=()
    [[ $mode == metrics ]] && args=(--metrics-addr=127.0.0.1:0)
    [[ $mode == dash ]] && args=(--dashboard-addr=127.0.0.1:0)
    for _ in $(seq "$RUNS"); do
        "$WR" run "$ELRUN" --standalone --nproc-per-node=2 --max-restarts=200 \
            --restart-backoff=0 "${args[@]}" --no-python "$W/fail.sh" 2>/dev/null |
            sed -n 's/.*maxrss_kib=\([0-9]*\).*/\1/p'
    done >"$W/ev"
    echo "RESULT agent peak_rss_kib, 200 restarts, ${ENAME[$mode]}: $(stats <"$W/ev")"
done
fi

# GET /api/job of a running agent (2 workers reporting).
if part api; then
PYTHON_EXEC=$PY "$ELRUN" --standalone --nproc-per-node=2 --dashboard-addr=127.0.0.1:0 \
    "$W/w.py" >"$W/api.log" 2>&1 &
pids+=("$!")
u=$(url_of dashboard "$W/api.log")
sleep 2
bytes=$(curl -s "${u}api/job" | wc -c)
for _ in $(seq "$API"); do curl -s -o /dev/null -w '%{time_total}\n' "${u}api/job"; done |
    awk '{ print $1 * 1000 }' >"$W/api"
echo "RESULT GET /api/job ms, new connection each ($bytes bytes, 2 workers reporting): $(stats <"$W/api")"
fi


if part assets; then
files=$(ls src/dashboard/assets | wc -l)
bytes=$(cat src/dashboard/assets/* | wc -c)
echo "RESULT embedded assets: $files files, $bytes bytes"
if [[ -x $BASE/elrun ]]; then
    r() { size -A "$1" | awk '$1 == ".rodata" { print $2 }'; }
    t() { size -A "$1" | awk '$1 == ".text" { print $2 }'; }
    echo "RESULT build/elrun .rodata grew by $(($(r "$ELRUN") - $(r "$BASE/elrun"))) bytes, .text by $(($(t "$ELRUN") - $(t "$BASE/elrun"))) bytes (against $BASE)"
fi
fi

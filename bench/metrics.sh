#!/usr/bin/env bash
# metrics.sh -- the cost of being watched (issue #17's figures).
#
#   agent     an agent running 2 workers (`sleep`) for WINDOW seconds:
#             its CPU time (every thread's schedstat) over the window and
#             its peak RSS (VmHWM), for: the base build (no metrics code),
#             this build without --metrics-addr, with it (not scraped), and
#             with it scraped every 100 ms (10x a 1 s scrape interval)
#   scrape    GET /metrics of one agent (2 workers reporting progress):
#             curl's time_total, a fresh connection per request and one
#             keep-alive connection for all
#
#   bench/metrics.sh                 RUNS=5 WINDOW=5 SCRAPES=200
#   BASE=/work/base/build bench/metrics.sh
# Prints one RESULT line per figure: median (min-max).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BASE=${BASE:-/work/base/build}
RUNS=${RUNS:-5}
WINDOW=${WINDOW:-5}
SCRAPES=${SCRAPES:-200}
ELRUN=$PWD/$BUILD/elrun
[[ -x $ELRUN ]] || { echo "build first: make BUILD=$BUILD" >&2; exit 2; }
command -v curl >/dev/null || { echo "needs curl" >&2; exit 2; }
W=$(mktemp -d "${TMPDIR:-/tmp}/metrics-bench.XXXXXX")
pids=()
# (|| true: under set -e a pid already gone would end the trap early.)
trap 'for p in "${pids[@]:-}"; do [[ -n $p ]] && kill -KILL "$p" 2>/dev/null || true; done; rm -rf "$W"' EXIT

. bench/lib.sh
metrics_port() { # LOG
    for _ in $(seq 500); do
        p=$(sed -n 's|.*metrics at http://.*:\([0-9]*\)/metrics$|\1|p' "$1" | head -1)
        [[ -n $p ]] && { echo "$p"; return; }
        sleep 0.01
    done
    echo "no metrics line in $1" >&2; return 1
}

# one_agent BIN MODE: run one agent for WINDOW s; prints "cpu_ms hwm_kib".
one_agent() {
    local bin=$1 mode=$2 args=() log=$W/agent.log
    [[ $mode != off ]] && args=(--metrics-addr=127.0.0.1:0)
    "$bin" --standalone --nproc-per-node=2 "${args[@]}" --no-python \
        /bin/sleep $((WINDOW + 3)) >"$log" 2>&1 &
    local apid=$! sp=
    pids+=("$apid")
    sleep 1
    if [[ $mode == scraped ]]; then
        local port; port=$(metrics_port "$log")
        (while :; do curl -s -o /dev/null "http://127.0.0.1:$port/metrics"; sleep 0.1; done) &
        sp=$!; pids+=("$sp")
    fi
    local c0; c0=$(cpu_ms "$apid")
    sleep "$WINDOW"
    local c1 h; c1=$(cpu_ms "$apid"); h=$(hwm_kib "$apid")
    [[ -n $sp ]] && kill "$sp" 2>/dev/null
    wait "$apid" || true
    echo "$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }') $h"
}

declare -A NAME=([base]="base build" [off]="metrics off" [on]="metrics on" [scraped]="on, scraped /100 ms")
agent_table base off on scraped

# scrape latency: 2 workers reporting progress 20 times a second.
cat >"$W/w.py" <<'EOF'
import os, time
fd = int(os.environ["ELRUN_PROGRESS_FD"])
for s in range(1, 100000):
    os.write(fd, b"step %d samples %d\n" % (s, 32 * s))
    time.sleep(0.05)
EOF
PYTHON_EXEC=${PYTHON_EXEC:-/usr/bin/python3} "$ELRUN" --standalone --nproc-per-node=2 \
    --metrics-addr=127.0.0.1:0 "$W/w.py" >"$W/scrape.log" 2>&1 &
pids+=("$!")
port=$(metrics_port "$W/scrape.log")
url=http://127.0.0.1:$port/metrics
sleep 2
bytes=$(curl -s "$url" | wc -c)
for _ in $(seq "$SCRAPES"); do
    curl -s -o /dev/null -w '%{time_total}\n' "$url"
done | awk '{ print $1 * 1000 }' >"$W/fresh"
urls=(); for _ in $(seq "$SCRAPES"); do urls+=(-o /dev/null "$url"); done
curl -s -w '%{time_total}\n' "${urls[@]}" | awk '{ print $1 * 1000 }' >"$W/ka"
echo "RESULT scrape ms, new connection each ($bytes bytes): $(stats <"$W/fresh")"
echo "RESULT scrape ms, one keep-alive connection: $(stats <"$W/ka")"

#!/usr/bin/env bash
# latency_hist.sh -- issue #17's figure "detection and recovery latency
# histograms from a run with 20 injected worker and agent kills, as
# Prometheus reports them".
#
# A 3-agent c10d job of the C example (examples/train_fmnist, 1 worker per
# node, --nnodes 2:3) on 127.0.0.1 with an `elrun store`; each agent serves
# /metrics on a port of its own slot (the same port for every life of that
# node), and is started again whenever it dies, as a scheduler would, so
# the job keeps 2-3 nodes.  A real Prometheus scrapes the three every
# 500 ms.  `elrun chaos` injects COUNT faults (worker-kill and agent-kill,
# one every 6-9 s); then Prometheus' HTTP API answers, over the whole run
# (increase() over the run's range: counter resets of killed agents are
# counted by Prometheus itself):
#   histogram_quantile(0.5 | 0.9 | 0.99, sum by (le) (increase(<h>_bucket[R])))
# and the count of observations, for
#   elrun_failure_detection_seconds   (the node of the killed worker)
#   elrun_recovery_seconds            (every node that re-formed; by cause)
# A quantile is interpolated inside its bucket (docs/METRICS.md lists the
# bounds), as Prometheus does.  Under 5 minutes.
#
#   bench/latency_hist.sh                  COUNT=20 SEED=1
# Prints the chaos lines, then one RESULT line per figure.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
COUNT=${COUNT:-20}
SEED=${SEED:-1}
ELRUN=$PWD/$BUILD/elrun
TRAIN=$PWD/$BUILD/examples/train_fmnist
DATA=/usr/share/datasets/fashion-mnist
[[ -x $ELRUN && -x $TRAIN ]] || { echo "build first: make BUILD=$BUILD" >&2; exit 2; }
[[ -f $DATA/train-images-idx3-ubyte.gz ]] || { echo "needs dataset-fashion-mnist ($DATA)" >&2; exit 2; }
command -v prometheus >/dev/null || { echo "needs Debian's prometheus" >&2; exit 2; }
command -v curl >/dev/null || { echo "needs curl" >&2; exit 2; }
W=$(mktemp -d "${TMPDIR:-/tmp}/latency-hist.XXXXXX")
pids=()
# Each node's loop first, then what it runs (by pid: nothing else).
cleanup() {
    exec 2>/dev/null # the shell's "Killed" notes of its own children
    touch "$W/done"
    local p
    for p in "${pids[@]:-}"; do
        [[ -n $p ]] || continue
        pkill -KILL -P "$p" 2>/dev/null || true
        kill -KILL "$p" 2>/dev/null || true
    done
    for f in "$W"/agent.*.pid; do
        [[ -f $f ]] || continue
        p=$(cat "$f")
        pkill -KILL -P "$p" 2>/dev/null || true
        kill -KILL "$p" 2>/dev/null || true
    done
    rm -rf "$W"
}
trap cleanup EXIT

# wait_for CMD TIMEOUT_S: until CMD succeeds (0) or the time is up (1).
wait_for() {
    local end=$((SECONDS + $2))
    while ((SECONDS < end)); do
        eval "$1" && return 0
        sleep 0.2
    done
    echo "timed out waiting for: $1" >&2
    return 1
}
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

"$ELRUN" store --listen 127.0.0.1:0 >"$W/store.out" 2>"$W/store.err" &
pids+=("$!")
wait_for "grep -q '^listening on ' '$W/store.out'" 20
SP=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$W/store.out" | head -1)

KA=last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=3
declare -A MP
# node I: agent I, started again after every exit until the run is over.
node() {
    local i=$1
    while [[ ! -f $W/done ]]; do
        "$ELRUN" --nnodes=2:3 --nproc-per-node=1 --rdzv-backend=c10d \
            --rdzv-endpoint=127.0.0.1:$SP --rdzv-id=lh --rdzv-conf=$KA \
            --max-restarts=1000 --metrics-addr=127.0.0.1:${MP[$i]} \
            --no-python "$TRAIN" --epochs 1000 --hidden 64 --threads 1 \
            --ckpt-every 200 --ckpt-dir "$W/ck$i" >>"$W/agent.$i.log" 2>&1 &
        echo $! >"$W/agent.$i.pid"
        { wait $!; } 2>/dev/null || true
        sleep 0.2 # a port in use (the killed life's) is tried again
    done
}
for i in 1 2 3; do
    MP[$i]=$(free_port)
    node $i &
    pids+=("$!")
done

mkdir -p "$W/prom"
cat >"$W/prom/prometheus.yml" <<EOF
global:
  scrape_interval: 500ms
scrape_configs:
  - job_name: elrun
    static_configs:
      - targets: ['127.0.0.1:${MP[1]}', '127.0.0.1:${MP[2]}', '127.0.0.1:${MP[3]}']
EOF
prometheus --config.file="$W/prom/prometheus.yml" --storage.tsdb.path="$W/prom/data" \
    --web.listen-address=127.0.0.1:0 >"$W/prom/log" 2>&1 &
PROM=$!
pids+=("$PROM")
wait_for "grep -q 'Server is ready to receive web requests' '$W/prom/log'" 60
PP=$(ss -Hltnp 2>/dev/null | sed -n "s/.*127\.0\.0\.1:\([0-9]*\) .*pid=$PROM,.*/\1/p" | head -1)
[[ -n $PP ]] || { echo "cannot find Prometheus' port" >&2; exit 1; }
# promq EXPR: the value of a one-element vector, "none" when empty.
promq() {
    local out
    out=$(curl -sfG "http://127.0.0.1:$PP/api/v1/query" --data-urlencode "query=$1") || { echo error; return; }
    [[ $out == *'"result":[]'* ]] && { echo none; return; }
    sed -n 's/.*"value":\[[^,]*,"\([^"]*\)"\].*/\1/p' <<<"$out"
}

T0=$SECONDS
wait_for '[[ $(promq "sum(elrun_workers{state=\"running\"})") == 3 ]]' 90
echo "job of 3 nodes running after $((SECONDS - T0)) s; chaos: $COUNT faults, seed $SEED"
"$ELRUN" chaos --rdzv-id=lh --every 6s-9s --count "$COUNT" --seed "$SEED" \
    --faults worker-kill,agent-kill | tee "$W/chaos.out"
# The last fault's recovery, then two more scrapes.
wait_for '[[ $(promq "sum(elrun_workers{state=\"running\"})") -ge 2 ]]' 60
sleep 2
R="$((SECONDS - T0 + 30))s"
kills_w=$(grep -c ' worker-kill pid ' "$W/chaos.out" || true)
kills_a=$(grep -c ' agent-kill pid ' "$W/chaos.out" || true)
echo "faults: $kills_w worker-kill, $kills_a agent-kill; run $((SECONDS - T0)) s; range $R"
declare -A PCT=([0.5]=50 [0.9]=90 [0.99]=99)
fig() { # NAME METRIC SELECTOR
    local name=$1 m=$2 sel=$3 q v line
    line="RESULT $name:"
    for q in 0.5 0.9 0.99; do
        v=$(promq "histogram_quantile($q, sum by (le) (increase(${m}_bucket${sel}[$R])))")
        line+=" p${PCT[$q]}=$(printf '%.4g' "$v" 2>/dev/null || echo "$v")s"
    done
    v=$(promq "sum(increase(${m}_count${sel}[$R]))")
    line+=" count=$(printf '%.0f' "$v" 2>/dev/null || echo "$v")"
    echo "$line"
}
fig "failure detection (elrun_failure_detection_seconds)" elrun_failure_detection_seconds ""
fig "recovery, all (elrun_recovery_seconds)" elrun_recovery_seconds ""
fig "recovery, cause=worker_failure" elrun_recovery_seconds '{cause="worker_failure"}'
fig "recovery, cause=membership" elrun_recovery_seconds '{cause="membership"}'
echo "RESULT wall: $((SECONDS - T0)) s from the job's start"

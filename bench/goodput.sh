#!/usr/bin/env bash
# goodput.sh -- ETTR under a fault schedule: the C example (examples/
# train_fmnist) on three c10d agents on this machine (127.0.0.1, a
# standalone `elrun store`, one worker per agent, a checkpoint directory
# per node), a fixed number of steps, run once without faults and once with
# `elrun chaos` injecting a seeded schedule of worker SIGKILL, agent SIGKILL
# (node loss), agent SIGSTOP (node hang, SIGCONT after STOP_FOR) and agent
# SIGTERM (preemption).  Each agent runs in a loop that starts it again
# after it exits, as a scheduler replaces a node.
#
#   bench/goodput.sh                    EPOCHS=40 EVERY=20s-60s SEED=1
#   EPOCHS=20 EVERY=8s-15s bench/goodput.sh     (a shorter run)
#   AT=12s,24s,36s,48s bench/goodput.sh   the four faults in turn, at those times
#   KEEP=1 ...                          keep the logs (the path is printed)
#
# Reports: wall time fault-free and faulted, ETTR = fault-free / faulted,
# the faults injected, and per fault the time from the fault to training
# resumed (the next "resumed from checkpoint" line of any worker) and the
# steps redone (that resume's step against the newest step any worker had
# saved or reported before it).  The torchrun side (bench/agent_torchrun311
# with bench/train_fmnist_ddp.py) is not scripted yet: see BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ELRUN=$PWD/$BUILD/elrun
TRAIN=$PWD/$BUILD/examples/train_fmnist
EPOCHS=${EPOCHS:-40}
EVERY=${EVERY:-20s-60s}
SEED=${SEED:-1}
STOP_FOR=${STOP_FOR:-10s}
FAULTS=${FAULTS:-worker-kill,agent-kill,agent-stop,agent-term}
[[ -x $ELRUN && -x $TRAIN ]] || { echo "build first: make BUILD=$BUILD" >&2; exit 2; }
W=$(mktemp -d "${TMPDIR:-/tmp}/goodput.XXXXXX")
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]:-}"; do [[ -n $p ]] && kill -KILL -- "$p" 2>/dev/null; done
    pkill -KILL -P $$ 2>/dev/null || true
    [[ -n ${KEEP:-} ]] && echo "logs kept in $W" >&2 || rm -rf "$W"
}
trap cleanup EXIT
KA="last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=3"
ARGS="--epochs $EPOCHS --hidden 256 --ckpt-every 100 --threads 1"

"$ELRUN" store --listen 127.0.0.1:0 >"$W/store.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 200); do grep -q '^listening on ' "$W/store.out" && break; sleep 0.05; done
PORT=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$W/store.out" | head -1)

# node JOB I: agent I of JOB, started again after any exit until the job
# is done.
node() {
    local job=$1 i=$2
    (
        while [[ ! -f $W/$job/done ]]; do
            ELRUN_LOG_LEVEL=info "$ELRUN" --nnodes=2:3 --nproc-per-node=1 \
                --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$PORT \
                --rdzv-id="$job" --rdzv-conf=$KA --max-restarts=100 \
                --no-python "$TRAIN" $ARGS --ckpt-dir "$W/$job/ck$i" \
                >>"$W/$job/a$i.log" 2>&1 && touch "$W/$job/done"
        done
    ) &
    NODE_PID[$i]=$!
}

# run JOB [chaos]: the job's wall time (s) into $W/JOB/wall.
run() {
    local job=$1 t0 t1
    mkdir -p "$W/$job"
    t0=$(date +%s.%N)
    declare -gA NODE_PID
    for i in 1 2 3; do node "$job" $i; done
    if [[ ${2:-} == chaos ]]; then
        date +%s.%N >"$W/$job/chaos_t0"
        local when=(--every "$EVERY"); [[ -n ${AT:-} ]] && when=(--at "$AT")
        "$ELRUN" chaos --rdzv-id="$job" "${when[@]}" --seed "$SEED" \
            --stop-for "$STOP_FOR" --faults "$FAULTS" >"$W/$job/chaos.out" 2>&1 &
        CHAOS=$!
    fi
    for i in 1 2 3; do wait "${NODE_PID[$i]}"; done
    t1=$(date +%s.%N)
    [[ ${2:-} == chaos ]] && { kill -TERM $CHAOS 2>/dev/null || true; wait $CHAOS || true; }
    echo "$t1 - $t0" | bc -l >"$W/$job/wall"
    grep -h "^final: " "$W/$job"/a*.log | tail -1 >"$W/$job/final"
}

echo "== fault-free: $EPOCHS epochs, 3 agents" >&2
run clean
echo "== faulted: chaos --every $EVERY --seed $SEED" >&2
run faulted chaos

clean=$(cat "$W/clean/wall"); faulted=$(cat "$W/faulted/wall")
printf 'RESULT goodput wall fault-free %.1f s, faulted %.1f s, ETTR %.3f\n' \
    "$clean" "$faulted" "$(echo "$clean / $faulted" | bc -l)"
echo "RESULT final fault-free: $(cat "$W/clean/final")"
echo "RESULT final faulted:    $(cat "$W/faulted/final")"

# Per fault: the time to the next resume, and the steps redone there.
# Agent and worker lines carry ISO timestamps (UTC); the chaos lines are
# seconds since chaos's start.
c0=$(cat "$W/faulted/chaos_t0")
grep -h "resumed from checkpoint step" "$W/faulted"/a*.log |
    sed -n 's/^\([0-9T:.-]*\)Z .*resumed from checkpoint step \([0-9]*\) .*/\1 \2/p' |
    while read -r ts step; do echo "$(date -u -d "$ts" +%s.%N) $step"; done |
    sort -g >"$W/resumes"
grep -h "saved checkpoint step\|checkpoint step [0-9]* saved\|last step [0-9]" "$W/faulted"/a*.log |
    sed -n 's/^\([0-9T:.-]*\)Z .*\(checkpoint step\|last step\) \([0-9]*\).*/\1 \3/p' |
    while read -r ts step; do echo "$(date -u -d "$ts" +%s.%N) $step"; done |
    sort -g >"$W/saved"
grep -E '^ +[0-9.]+s (worker|agent)-(kill|stop|term) pid' "$W/faulted/chaos.out" |
while read -r rel kind _; do
    ft=$(echo "$c0 + ${rel%s}" | bc -l)
    line=$(awk -v t="$ft" '$1 > t { print; exit }' "$W/resumes")
    if [[ -z $line ]]; then
        printf 'RESULT fault %-11s at %6.1f s: no resume after it\n' "$kind" "${rel%s}"
        continue
    fi
    rt=${line% *}; rs=${line#* }
    best=$(awk -v t="$rt" '$1 < t && $2 > m { m = $2 } END { print m + 0 }' "$W/saved")
    redo=$((best > rs ? best - rs : 0))
    printf 'RESULT fault %-11s at %6.1f s: resumed after %.2f s from step %d (%d steps redone)\n' \
        "$kind" "${rel%s}" "$(echo "$rt - $ft" | bc -l)" "$rs" "$redo"
done
grep -c -E '^ +[0-9.]+s (worker|agent)-(kill|stop|term) pid' "$W/faulted/chaos.out" |
    sed 's/^/RESULT faults injected: /'

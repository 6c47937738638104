#!/usr/bin/env bash
# goodput.sh -- ETTR under one seeded fault schedule, elrun and torchrun 1.13
# side by side in one run.  Two programs: the C example (examples/
# train_fmnist, `--no-python` under both launchers) and a PyTorch DDP (gloo)
# script with checkpoints (bench/train_ddp_ckpt.py).  Each runs on three
# c10d agents of one worker on this machine (127.0.0.1, a standalone `elrun
# store`, which torchrun's c10d backend uses with is_host=false; keep-alive
# 1 s x 3 for both; a store for each run), a checkpoint directory per node, every 100 steps, to a
# fixed number of steps; once without faults and once under `elrun chaos`
# with the same --seed: worker SIGKILL, agent SIGKILL (the node: agent and
# workers), agent SIGSTOP (the node frozen, SIGCONT after STOP_FOR), agent
# SIGTERM (preemption).  Each agent runs in a loop that starts it again
# after it exits, as a scheduler replaces a node.  A run that is not done in
# TIMEOUT s is stopped and reported as such (torchrun on a frozen node).
#
#   bench/goodput.sh                         the whole comparison (~25 min)
#   PROGS=c LAUNCHERS=elrun bench/goodput.sh one row
#   EPOCHS_C=40 EPOCHS_PY=6 EVERY=20s-60s SEED=1 STOP_FOR=10s TIMEOUT=400
#   AT=12s,24s,36s,48s ...                   the faults in turn at those times
#   TORCHRUN_MONITOR=0.1                     torchrun's --monitor_interval
#   KEEP=1 ...                               keep the logs (the path is printed)
#   REPS=3 ...                               each run 3 times, then medians
#   BUILD=/work/base/build ...               another build's elrun and example
#
# REPS=N repeats every (program, launcher, fault-free | faulted) run N times,
# repetition by repetition (in each: every launcher fault-free, then every
# launcher faulted, so that the machine's load drifts over both alike), the
# faulted runs of repetition r with --seed SEED+r-1 (the same schedule for
# every launcher within it, more kinds of faults across them); then it
# prints, per program, the MEDIANS of wall time, ETTR and time lost per
# fault, and per fault type of the time to "resumed" and "back", every
# launcher side by side (bench/goodput_report.py --medians).
#
# Reports per program and launcher: the wall time fault-free and faulted,
# ETTR = fault-free / faulted, the time lost per fault and the ETTR that
# makes at one fault a minute (60 / (60 + lost)), and per fault: the time
# from the fault to the next attempt's start ("resumed": its resume line, or
# its first line when it starts from step 0), to the job being past the step
# it had reached ("back": its next checkpoint beyond that step; with no
# fault this comes within one checkpoint interval), and the steps redone.
# Every output line of every node is stamped with the wall clock as it
# arrives, so both launchers are measured the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
[[ $BUILD == /* ]] || BUILD=$PWD/$BUILD # BUILD=/work/base/build: before/after
ELRUN=$BUILD/elrun
TRAIN=$BUILD/examples/train_fmnist
TORCHRUN=$PWD/bench/agent_torchrun311
PYSCRIPT=$PWD/bench/train_ddp_ckpt.py
PY=/usr/bin/python3
EPOCHS_C=${EPOCHS_C:-40}
EPOCHS_PY=${EPOCHS_PY:-6}
EVERY=${EVERY:-20s-60s}
SEED=${SEED:-1}
STOP_FOR=${STOP_FOR:-10s}
TIMEOUT=${TIMEOUT:-400}
FAULTS=${FAULTS:-worker-kill,agent-kill,agent-stop,agent-term}
PROGS=${PROGS:-c py}
LAUNCHERS=${LAUNCHERS:-elrun torchrun}
TORCHRUN_MONITOR=${TORCHRUN_MONITOR:-0.1}
REPS=${REPS:-1}
[[ $REPS =~ ^[1-9][0-9]*$ ]] || { echo "goodput.sh: REPS must be a positive integer, not '$REPS'" >&2; exit 2; }
[[ -x $ELRUN && -x $TRAIN ]] || { echo "build first: make BUILD=$BUILD" >&2; exit 2; }
if [[ $LAUNCHERS == *torchrun* || $PROGS == *py* ]] && ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "goodput.sh: torchrun and the PyTorch script need $PY with torch (python3-torch)" >&2
    exit 2
fi
W=$(mktemp -d "${TMPDIR:-/tmp}/goodput.XXXXXX")
TAG=gp$$
STORE=

# job_pids JOB: every live process of the job (agents by their rdzv id,
# workers by TORCHELASTIC_RUN_ID, orphans included) and its node loops.
job_pids() {
    { grep -lzx "TORCHELASTIC_RUN_ID=$1\|GOODPUT_JOB=$1" /proc/[0-9]*/environ
      grep -lzx -- "--rdzv[-_]id=$1" /proc/[0-9]*/cmdline; } 2>/dev/null |
        cut -d/ -f3 | grep -vx "$$" | sort -u || true
}
kill_job() {
    local p
    for p in $(job_pids "$1"); do kill -CONT "$p" 2>/dev/null || true; kill -KILL "$p" 2>/dev/null || true; done
}
cleanup() {
    local j
    for j in "$W"/*/; do [[ -d $j ]] && kill_job "$(basename "$j")"; done
    [[ -n $STORE ]] && kill -KILL "$STORE" 2>/dev/null
    [[ -n ${KEEP:-} ]] && echo "logs kept in $W" >&2 || rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
KA="last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=3"

# new_store DIR: a store of the run's own into STORE and PORT.  One store
# a run: the workers' keys of a job's last round stay in the store
# (/worker/attempt_<round>/, not named by the job), and the next elrun job's
# round of the same number found them and hung until its first fault.
new_store() {
    [[ -n $STORE ]] && { kill -KILL "$STORE" 2>/dev/null; wait "$STORE" 2>/dev/null || true; }
    "$ELRUN" store --listen 127.0.0.1:0 >"$1/store.out" 2>&1 &
    STORE=$!
    PORT=
    for _ in $(seq 200); do grep -q '^listening on ' "$1/store.out" && break; sleep 0.05; done
    PORT=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$1/store.out" | head -1)
    [[ -n $PORT ]] || { cat "$1/store.out" >&2; exit 1; }
}

# Each line on stdin, with the wall clock (s) in front.
stamp() { local l; while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done; }

# cmd LAUNCHER PROG JOB I: the agent's command line into CMD.
cmd() {
    local launcher=$1 prog=$2 job=$3 i=$4 prog_args
    if [[ $prog == c ]]; then
        # debug: rank 0 logs every checkpoint (the progress the report reads)
        prog_args=(env ELRUN_LOG_LEVEL=debug "$TRAIN" --epochs "$EPOCHS_C" --hidden 256
            --ckpt-every 100 --threads 1 --ckpt-dir "$W/$job/ck$i")
    else
        prog_args=("$PYSCRIPT" --epochs "$EPOCHS_PY" --ckpt-every 100 --ckpt-dir "$W/$job/ck$i")
    fi
    if [[ $launcher == elrun ]]; then
        CMD=("$ELRUN" --nnodes=2:3 --nproc-per-node=1 --rdzv-backend=c10d
            --rdzv-endpoint=127.0.0.1:$PORT --rdzv-id="$job" --rdzv-conf=$KA
            --max-restarts=100)
        [[ $prog == c ]] && CMD+=(--no-python) || CMD+=(--no-python "$PY" -u)
    else
        CMD=("$PY" "$TORCHRUN" --nnodes=2:3 --nproc_per_node=1 --rdzv_backend=c10d
            --rdzv_endpoint=127.0.0.1:$PORT --rdzv_id="$job"
            --rdzv_conf=$KA,is_host=false --max_restarts=100
            --monitor_interval="$TORCHRUN_MONITOR")
        [[ $prog == c ]] && CMD+=(--no_python) || CMD+=(--no_python "$PY" -u)
    fi
    CMD+=("${prog_args[@]}")
}

# node LAUNCHER PROG JOB I: agent I of JOB, started again after any exit
# until the job is done (an agent exited 0) or stopped.
node() {
    local launcher=$1 prog=$2 job=$3 i=$4
    cmd "$launcher" "$prog" "$job" "$i"
    (
        export GOODPUT_JOB=$job
        while [[ ! -f $W/$job/done && ! -f $W/$job/stop ]]; do
            rc=0
            { ELRUN_LOG_LEVEL=info LOGLEVEL=INFO "${CMD[@]}" 2>&1 </dev/null | stamp >>"$W/$job/a$i.log"
              rc=${PIPESTATUS[0]}; } || true
            ((rc == 0)) && touch "$W/$job/done"
            echo "$EPOCHREALTIME goodput: agent exited $rc" >>"$W/$job/a$i.log"
        done
    ) 2>/dev/null &
    NODE_PID[$i]=$!
}

# run LAUNCHER PROG JOB [chaos SEED]: the job's wall time (s) into
# $W/JOB/wall, or "timeout".
run() {
    local launcher=$1 prog=$2 job=$3 seed=${5:-$SEED} t0 t1 chaos=
    mkdir -p "$W/$job"
    new_store "$W/$job"
    declare -gA NODE_PID
    t0=$EPOCHREALTIME
    for i in 1 2 3; do node "$launcher" "$prog" "$job" $i; done
    if [[ ${4:-} == chaos ]]; then
        local when=(--every "$EVERY"); [[ -n ${AT:-} ]] && when=(--at "$AT")
        "$ELRUN" chaos --rdzv-id="$job" "${when[@]}" --seed "$seed" \
            --stop-for "$STOP_FOR" --faults "$FAULTS" > >(stamp >"$W/$job/chaos.out") 2>&1 &
        chaos=$!
    fi
    local deadline=$((SECONDS + TIMEOUT))
    while [[ ! -f $W/$job/done ]] && ((SECONDS < deadline)); do sleep 0.2; done
    t1=$EPOCHREALTIME
    touch "$W/$job/stop"
    if [[ ! -f $W/$job/done ]]; then echo timeout >"$W/$job/wall"; else echo "$t1 - $t0" | bc -l >"$W/$job/wall"; fi
    # The job's last agents finish on their own within seconds.
    local end=$((SECONDS + 15))
    while [[ -n $(job_pids "$job" | grep -vx "${chaos:-none}" || true) ]] && ((SECONDS < end)); do sleep 0.2; done
    [[ -n $chaos ]] && { kill -TERM "$chaos" 2>/dev/null || true; wait "$chaos" 2>/dev/null || true; }
    kill_job "$job"
    for i in 1 2 3; do wait "${NODE_PID[$i]}" 2>/dev/null || true; done
    grep -h " final: " "$W/$job"/a*.log | tail -1 | cut -d' ' -f2- >"$W/$job/final" || true
}

echo "goodput: $(nproc) cores, $(uname -r), $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg); build $BUILD; programs: $PROGS; launchers: $LAUNCHERS;" \
    "faults: $([[ -n ${AT:-} ]] && echo "at $AT" || echo "every $EVERY") seed $SEED$( ((REPS > 1)) && echo "..$((SEED + REPS - 1))"), stop for $STOP_FOR; torchrun --monitor_interval=$TORCHRUN_MONITOR; $REPS repetition(s)"
for prog in $PROGS; do
    declare -A PAIRS=()
    for r in $(seq "$REPS"); do
        sfx=$TAG; ((REPS > 1)) && sfx=r$r-$TAG
        for l in $LAUNCHERS; do
            echo "== $prog under $l: fault-free (repetition $r/$REPS, $(date -u +%T), load $(cut -d' ' -f1 /proc/loadavg))" >&2
            run "$l" "$prog" "$prog-$l-clean-$sfx"
        done
        for l in $LAUNCHERS; do
            echo "== $prog under $l: faulted, seed $((SEED + r - 1)) (repetition $r/$REPS, $(date -u +%T), load $(cut -d' ' -f1 /proc/loadavg))" >&2
            run "$l" "$prog" "$prog-$l-faulted-$sfx" chaos $((SEED + r - 1))
        done
        for l in $LAUNCHERS; do
            ((REPS > 1)) && echo "-- repetition $r/$REPS, seed $((SEED + r - 1))"
            "$PY" bench/goodput_report.py "$prog" "$l" "$W/$prog-$l-clean-$sfx" "$W/$prog-$l-faulted-$sfx" "$TIMEOUT"
            PAIRS[$l]+="$W/$prog-$l-clean-$sfx:$W/$prog-$l-faulted-$sfx,"
        done
    done
    if ((REPS > 1)); then
        args=()
        for l in $LAUNCHERS; do args+=("$l=${PAIRS[$l]}"); done
        "$PY" bench/goodput_report.py --medians "$prog" "$TIMEOUT" "${args[@]}"
    fi
    unset PAIRS
done

#!/usr/bin/env bash
# Goodput under faults, on three c10d agents of the C example on 127.0.0.1
# (a standalone store, so that no agent's loss takes the store with it):
# SIGTERM to one agent re-forms the other two without charging a restart
# (--max-restarts=0); a preemption notice file makes the node's workers
# checkpoint at once, the agent leave at the deadline with exit status 75,
# and the survivors resume from that step; a SIGSTOPped worker is found by
# --worker-stall-timeout, reported hung with its rank and last step, and
# the group restarts as for a crash.
. "$(dirname "$0")/lib.sh"
TRAIN="$ROOT/$BUILD/examples/train_fmnist"
DATA=/usr/share/datasets/fashion-mnist
if [[ ! -x $TRAIN || ! -f $DATA/train-images-idx3-ubyte.gz ]]; then
    test_skip 'goodput' "needs $TRAIN and dataset-fashion-mnist"
    test_done
    exit
fi
# About 1.7 s per epoch of 469 steps with three ranks here.
ARGS="--epochs 8 --hidden 256 --ckpt-every 100 --threads 1"
KA="last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=3"
start_store

# gp_agent JOB I EXTRA...: agent I of job JOB, its own checkpoint directory;
# sets GP_PID[I].
declare -A GP_PID
gp_agent() {
    local job=$1 i=$2; shift 2
    mkdir -p "$T/$job"
    ELRUN_LOG_LEVEL=info "$ELRUN" --nnodes=2:3 --nproc-per-node=1 \
        --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$STORE_PORT \
        --rdzv-id="$job" --rdzv-conf=$KA "$@" --no-python "$TRAIN" $ARGS \
        --ckpt-dir "$T/$job/ck$i" >"$T/$job/a$i.log" 2>&1 &
    GP_PID[$i]=$!
    track_pid $!
}
# gp_stop: kill what a case started (its trap on EXIT: a case that fails
# half-way must not leave agents running; started inside the case's
# subshell, they would outlive it and the script's cleanup).
gp_stop() {
    local p
    for p in "${GP_PID[@]}"; do
        pkill -KILL -P "$p" 2>/dev/null || true
        kill -KILL "$p" 2>/dev/null || true
    done
}
# gp_wait I: wait for agent I; RC = its status.
gp_wait() { RC=0; wait "${GP_PID[$1]}" || RC=$?; }
# gp_ok JOB I...: each agent I must exit 0 (else its log's end is shown).
gp_ok() {
    local job=$1 i; shift
    for i in "$@"; do
        gp_wait $i
        ((RC == 0)) || { echo "agent $i exited $RC"; tail -n 12 "$T/$job/a$i.log"; return 1; }
    done
}
# rank0_log JOB: the log of the agent whose worker is rank 0 now.
final_of() { grep -h "^final: " "$T/$1"/a*.log | tail -1; }

test_expect_success 'SIGTERM to one of three agents: the other two re-form and finish, no restart charged' '
    trap gp_stop EXIT
    for i in 1 2 3; do gp_agent term $i --max-restarts=0; done
    wait_until "grep -q \"round 0: 3 nodes\" \"$T/term/a1.log\"" 30
    wait_until "grep -hq \"^epoch 1/8\" \"$T\"/term/a*.log" 60
    kill -TERM ${GP_PID[3]}
    gp_wait 3; [[ $RC -eq 1 ]]
    grep -q "received signal 15 (TERM)" "$T/term/a3.log"
    gp_ok term 1 2
    grep -hq "round [0-9]*: 2 nodes" "$T"/term/a1.log
    final_of term | contains "(3752 steps).*world 2$"
    refute grep -hq "the job restarts on every node\|restarting (" "$T"/term/a*.log
'

test_expect_success 'a preemption notice file: the workers checkpoint at once, the agent leaves at the deadline (75), the survivors resume from that step' '
    trap gp_stop EXIT
    for i in 1 2 3; do
        gp_agent notice $i --max-restarts=2 --preempt-notice-file "$T/notice/n$i" --preempt-notice-secs 30
    done
    wait_until "grep -hq \"^epoch 1/8\" \"$T\"/notice/a*.log" 60
    echo 2 >"$T/notice/n3"
    wait_for_line "$T/notice/a3.log" "preemption notice \(.*n3 appeared\): this node leaves the job in 2 s" 10
    wait_for_line "$T/notice/a3.log" "sent signal 10 \(USR1\) to worker local_rank 0" 10
    gp_wait 3; [[ $RC -eq 75 ]]
    grep -q "preempted: left the job after a preemption notice" "$T/notice/a3.log"
    s=$(grep -h "a node got a preemption notice: checkpointing step" "$T"/notice/a*.log | sed "s/.*step \([0-9]*\) now/\1/")
    [[ -n $s ]]
    gp_ok notice 1 2
    r=$(grep -h "resumed from checkpoint step" "$T"/notice/a*.log | sed "s/.*checkpoint step \([0-9]*\) .*/\1/" | head -1)
    [[ -n $r ]] && ((r >= s))
    final_of notice | contains "(3752 steps).*world 2$"
'

# The three jobs of this script share one store, and the workers' keys
# (/worker/attempt_<round>/) do not carry the run id: the round that
# follows the hang is attempt 1, where the jobs above left their workers'
# addresses.  A worker that read a dead rank's address there dialled it
# until its 60 s connect timeout (the flake of #14: rank 0 timed out
# waiting for ranks 1 and 2).  Planted here so that the case always meets
# them, and a canary checks that the round's opener cleared its attempt.
test_expect_success 'a SIGSTOPped worker: reported hung with its rank, host and last step, killed, the group restarts' '
    trap gp_stop EXIT
    # What the jobs above leave in attempt 1 (the addresses of dead ranks),
    # and a canary that must be gone afterwards.
    /usr/bin/python3 "$ROOT/tests/e2e/py/stale_worker_keys.py" set $STORE_PORT
    for i in 1 2 3; do gp_agent stall $i --max-restarts=1 --worker-stall-timeout 4; done
    # Past the first epoch: the round of three has settled.
    wait_until "grep -hq \"^epoch 1/8:\" \"$T\"/stall/a*.log" 60
    wpid=$(pgrep -P ${GP_PID[2]} -f train_fmnist)
    kill -STOP $wpid
    wait_for_line "$T/stall/a2.log" "worker rank [0-9] \(local_rank 0, pid $wpid\) on .* is hung: no heartbeat for [0-9.]+ s \(last step [0-9]+; --worker-stall-timeout 4 s\); killing it" 20
    gp_ok stall 1 2 3
    /usr/bin/python3 "$ROOT/tests/e2e/py/stale_worker_keys.py" gone $STORE_PORT
    grep -hq "the job restarts on every node" "$T"/stall/a*.log
    final_of stall | contains "(3752 steps).*world 3$"
'

# gp_node JOB I EXTRA...: agent I as a node that a scheduler replaces: run
# again after any exit until one agent of the job succeeded.
gp_node() {
    local job=$1 i=$2; shift 2
    mkdir -p "$T/$job"
    (
        while [[ ! -f $T/$job/done ]]; do
            ELRUN_LOG_LEVEL=info "$ELRUN" --nnodes=2:3 --nproc-per-node=1 \
                --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$STORE_PORT \
                --rdzv-id="$job" --rdzv-conf=$KA "$@" --no-python "$TRAIN" \
                $ARGS --ckpt-dir "$T/$job/ck$i" >>"$T/$job/a$i.log" 2>&1 &&
                touch "$T/$job/done"
        done
    ) &
    GP_PID[$i]=$!
    track_pid $!
}

test_expect_success 'elrun chaos: worker-kill, agent-kill, agent-stop, agent-term on a 3-agent job; one line each; the job finishes; nothing of it is left' '
    trap gp_stop EXIT
    # 40 epochs: 35-60 s here, well past the last fault.
    ARGS="--epochs 40 --hidden 256 --ckpt-every 100 --threads 1"
    for i in 1 2 3; do gp_node chaos $i --max-restarts=10; done
    wait_until "grep -hq \"^epoch 1/40:\" \"$T\"/chaos/a*.log" 60
    "$ELRUN" chaos --rdzv-id=chaos --at 1s,4s,7s,10s --stop-for 5s --seed 7 \
        --faults worker-kill,agent-kill,agent-stop,agent-term >"$T/chaos.out" 2>&1
    cat "$T/chaos.out"
    grep -Eq "^ +[0-9.]+s chaos on job chaos: seed 7" "$T/chaos.out"
    for f in worker-kill agent-kill agent-stop agent-term; do
        [[ $(grep -Ec "^ +[0-9.]+s $f pid [0-9]+ \((agent|worker|agent and [0-9]+ workers?)\)$" "$T/chaos.out") -eq 1 ]]
    done
    grep -Eq "^ +[0-9.]+s agent-cont pid [0-9]+ \(after agent-stop\)$" "$T/chaos.out"
    for i in 1 2 3; do wait ${GP_PID[$i]}; done
    grep -h "^final: " "$T"/chaos/a*.log | contains "(18760 steps)"
    refute pgrep -f "rdzv-id=chaos"
'

test_expect_success 'elrun chaos: bad schedules and a job that is not there get a clear line' '
    refute "$ELRUN" chaos --rdzv-id=x --every 0s 2>"$T/c1"
    grep -q "^elrun chaos: --every: expected a duration" "$T/c1"
    refute "$ELRUN" chaos --rdzv-id=x --at 10s --faults link-down 2>"$T/c2"
    grep -q "^elrun chaos: --faults: expected" "$T/c2"
    refute "$ELRUN" chaos --every 1s 2>"$T/c3"
    grep -q "^elrun chaos: --rdzv-id=ID is required" "$T/c3"
'

test_expect_success 'bad values are refused with a clear line' '
    refute "$ELRUN" --worker-stall-timeout=-1 --no-python true 2>"$T/e1"
    grep -q "worker-stall-timeout" "$T/e1"
    refute "$ELRUN" --preempt-signal=SIGKILL --no-python true 2>"$T/e2"
    grep -q "preempt-signal" "$T/e2"
'
test_done

#!/usr/bin/env bash
# The chaos soak, small and bounded (issue 14): a 3-agent job of the C example
# on 127.0.0.1 (a standalone store; each agent a node that a scheduler starts
# again after it exits) runs once without faults and once under 20 random
# faults of every kind `elrun chaos` has for a loopback job (worker-kill,
# agent-kill, agent-stop, agent-term; link-cut needs netns hosts and is
# t0956's).  The faulted job finishes; its final test accuracy is within 0.5
# points of the fault-free run's; no resume starts before the newest
# checkpoint saved before it; nothing of the job is left afterwards; and the
# open fds and RSS of each agent that lived through several rounds do not grow
# between its second round and its last.  About 2-3 minutes here; the 200-fault
# soak is a benchmark (SOAK_FAULTS=200 FAULT_EVERY=3s-8s SOAK_EPOCHS=... runs
# it, not in CI).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node-loop.bash"
TRAIN="$ROOT/$BUILD/examples/train_fmnist"
DATA=/usr/share/datasets/fashion-mnist
if [[ ! -x $TRAIN || ! -f $DATA/train-images-idx3-ubyte.gz ]]; then
    test_skip 'chaos soak' "needs $TRAIN and dataset-fashion-mnist"
    test_done
    exit
fi
FAULTS_N=${SOAK_FAULTS:-20}
EVERY=${FAULT_EVERY:-1s-2s}
# 784-64-10 on the whole set (469 steps an epoch): 0.3-0.6 s an epoch with
# three ranks here, so 100 epochs (30-60 s fault-free) outlast 20 faults
# 1-2 s apart (at most 40 s, and every fault slows the job down).
ARGS="--epochs ${SOAK_EPOCHS:-100} --hidden 64 --ckpt-every 200 --threads 1"
KA="last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=3"
start_store

# soak_node JOB I: agent I of JOB, started again after every exit until an
# agent of the job succeeded; launch N logs to JOB/aI.N.log, its pid to
# JOB/pidI.  Rank 0 logs every checkpoint (ELRUN_LOG_LEVEL=debug for the
# worker only).
soak_node() {
    local job=$1 i=$2
    mkdir -p "$T/$job"
    node_loop "$T/$job/done" "$T/$job/pid$i" "$T/$job/a$i.%d.log" \
        env ELRUN_LOG_LEVEL=info "$ELRUN" --nnodes=2:3 --nproc-per-node=1 \
        --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$STORE_PORT \
        --rdzv-id="$job" --rdzv-conf=$KA --max-restarts=100 \
        --no-python env ELRUN_LOG_LEVEL=debug "$TRAIN" $ARGS \
        --ckpt-dir "$T/$job/ck$i"
    SOAK_NODE[$i]=$NODE_LOOP_PID
}
declare -A SOAK_NODE
soak_stop() {
    # SOAK_KEEP: a copy of the script's directory after each case.
    [[ -n ${SOAK_KEEP:-} ]] && rm -rf "$SOAK_KEEP" && cp -r "$T" "$SOAK_KEEP"
    local p
    for p in "${SOAK_NODE[@]}"; do
        for c in $(_descendants "$p"); do kill -CONT "$c" 2>/dev/null; kill -KILL "$c" 2>/dev/null; done
        kill -KILL "$p" 2>/dev/null || true
    done
}
# job_procs JOB: pids of the job's agents and workers still alive.
job_procs() {
    { grep -lzx "TORCHELASTIC_RUN_ID=$1" /proc/[0-9]*/environ
      grep -lzx -- "--rdzv-id=$1" /proc/[0-9]*/cmdline; } 2>/dev/null | cut -d/ -f3 | sort -u
}
final_acc() { cat "$T/$1"/a*.log | sed -n "s/^final: test accuracy \([0-9.]*\)%.*/\1/p" | tail -1; }

test_expect_success 'fault-free run of the soak job' '
    trap soak_stop EXIT
    for i in 1 2 3; do soak_node clean $i; done
    for i in 1 2 3; do wait ${SOAK_NODE[$i]}; done
    [[ -n $(final_acc clean) ]]
    final_acc clean >"$T/clean.acc"
'

test_expect_success "$FAULTS_N random faults (worker-kill, agent-kill, agent-stop, agent-term): the job finishes at the fault-free accuracy, no step redone before the last checkpoint, nothing left, no fd or RSS growth" '
    trap soak_stop EXIT
    # A store of its own (KNOWN: on the fault-free job'"'"'s store, the workers
    # of this second job sometimes never printed a line in 60 s; 3 runs of 5).
    start_store
    for i in 1 2 3; do soak_node soak $i; done
    wait_until "grep -hqs \"^epoch 1/\" \"$T\"/soak/a*.log" 60
    # The agents: pid, launch log, rounds so far, open fds, RSS (kB).
    (
        set +e +o pipefail # an agent may be gone between two reads
        while [[ ! -f $T/soak/done ]]; do
            for i in 1 2 3; do
                read -r pid log <"$T/soak/pid$i" || continue
                fds=$(ls /proc/$pid/fd 2>/dev/null | wc -l)
                rss=$(sed -n "s/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p" /proc/$pid/status 2>/dev/null)
                st=$(sed -n "s/^State:[[:space:]]*\(.\).*/\1/p" /proc/$pid/status 2>/dev/null)
                rounds=$(grep -c "round [0-9]*: [0-9]* nodes" "$log" 2>/dev/null || true)
                [[ -n $rss && $st != T ]] && echo "$pid $rounds $fds $rss"
            done
            sleep 0.25
        done
    ) >"$T/samples" &
    sampler=$!
    "$ELRUN" chaos --rdzv-id=soak --every "$EVERY" --count "$FAULTS_N" --seed 11 \
        --stop-for 3s --faults worker-kill,agent-kill,agent-stop,agent-term >"$T/chaos.out" 2>&1
    cat "$T/chaos.out"
    [[ $(grep -Ec "^ +[0-9.]+s (worker|agent)-(kill|stop|term) pid [0-9]+ \(" "$T/chaos.out") -eq $FAULTS_N ]]
    for f in worker-kill agent-kill agent-stop agent-term; do grep -q " $f pid " "$T/chaos.out"; done
    for i in 1 2 3; do wait ${SOAK_NODE[$i]}; done
    wait $sampler
    # The job finished, at the fault-free accuracy (0.5 points).
    acc=$(final_acc soak); echo "accuracy: fault-free $(cat "$T/clean.acc"), under faults $acc"
    [[ -n $acc ]]
    awk -v a="$acc" -v b="$(cat "$T/clean.acc")" "BEGIN { d = a - b; exit !(d <= 0.5 && d >= -0.5) }"
    # Nothing of the job is left (the exits are seen by now: its agents waited for their workers).
    refute test -n "$(job_procs soak)"
    # No resume before the newest checkpoint saved before it (ISO stamps sort).
    cat "$T"/soak/a*.log | grep -E "^[0-9T:.-]+Z " | sort | sed -E -n \
        -e "s/^([^ ]+) .*resumed from checkpoint step ([0-9]+).*/\1 R \2/p" \
        -e "s/^([^ ]+) .*(checkpoint step ([0-9]+) saved|saved checkpoint step ([0-9]+)).*/\1 S \3\4/p" >"$T/ckpts"
    resumes=$(grep -c " R " "$T/ckpts" || true); echo "resumes: $resumes"
    ((resumes >= 3))
    refute awk "\$2 == \"S\" && \$3 > m { m = \$3 } \$2 == \"R\" && \$3 < m { print \"resumed from step \" \$3 \" after step \" m \" was saved: \" \$1; bad = 1 } END { exit !bad }" "$T/ckpts"
    # fds and RSS: each agent that lived through 3 rounds or more, at its
    # second round against its last; the median sample of each round, since
    # a sample may fall on a moment with a connection or pipe more or less
    # (the smallest one failed the 200-fault soak on a 15 among 17s).  An
    # agent opens up to two descriptors late, once (the 200-fault soak: 16
    # in early rounds, 17 from the seventh on, never more; a CI-like run: 15
    # in round 2, 17 after), so a leak is more than +2; a descriptor a round
    # gives +3 or more by an agent'"'"'s fifth round.
    per_round_median() {
        sort -k1,1n -k2,2n -k"$1","$1"n "$T/samples" | awk -v c="$1" "
            function out() { if (p != \"\") print p, v[int((n + 1) / 2)] }
            { k = \$1 \" \" \$2; if (k != p) { out(); p = k; n = 0 } v[++n] = \$c } END { out() }"
    }
    paste -d " " <(per_round_median 3) <(per_round_median 4 | cut -d " " -f 3) >"$T/medians"
    awk "{ k = \$1 \" \" \$2; f[k] = \$3; r[k] = \$4
           if (\$2 >= 2 && (!(\$1 in lo) || \$2 < lo[\$1])) lo[\$1] = \$2; if (!(\$1 in hi) || \$2 > hi[\$1]) hi[\$1] = \$2 }
         END { for (p in lo) if (hi[p] - lo[p] >= 2) print p, lo[p], hi[p], f[p \" \" lo[p]], f[p \" \" hi[p]], r[p \" \" lo[p]], r[p \" \" hi[p]] }" "$T/medians" >"$T/growth"
    echo "pid round-from round-to fds-from fds-to rss-from rss-to"; cat "$T/growth"
    [[ -s $T/growth ]]
    refute awk "\$5 > \$4 + 2 || \$7 > \$6 + 256 { bad = 1 } END { exit !bad }" "$T/growth"
'
test_done

#!/usr/bin/env bash
# The elastic rendezvous (--rdzv-backend=c10d --nnodes=MIN:MAX) across
# simulated hosts: network namespaces elh1..elh4 made by tests/infra, each
# agent a real elrun process with its own hostname.  Jobs form, grow, shrink
# when an agent is killed or its link is cut, use hot spares, time out with
# too few nodes, end cleanly when the store host dies, and share a store.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rdzv-common.bash"
INFRA="$ROOT/tests/infra"
W="$ROOT/tests/e2e/bin/rdzv_worker.sh"

if [[ $(id -u) != 0 ]] || ! command -v ip >/dev/null; then
    test_skip "elastic rendezvous on simulated hosts" "needs root and iproute2"
    test_done; exit
fi
netns_hosts 4
_old_cleanup=$(trap -p EXIT)
trap '_cleanup; bash "$INFRA/netns-fault.sh" clear >/dev/null 2>&1; bash "$INFRA/netns-down.sh" >/dev/null 2>&1' EXIT

# agent I JOB NNODES EXTRA...: start elrun on host I for job JOB; its workers
# write into $T/JOB.  Sets AGENT_PID[I].
declare -A AGENT_PID
agent() {
    local i=$1 job=$2 nnodes=$3; shift 3
    mkdir -p "$T/$job"
    ELRUN_LOG_LEVEL=info bash "$INFRA/netns-run.sh" "$i" "$ELRUN" --nnodes="$nnodes" \
        --nproc-per-node=2 --rdzv-backend=c10d --rdzv-id="$job" "$@" \
        --no-python "$W" "$T/$job" >"$T/$job/agent.$i.log" 2>&1 &
    AGENT_PID[$i]=$!
    track_pid $!
}


EP=10.77.0.1:29400
# ---------------------------------------------------------------------------
agent 1 a 3:3 --rdzv-endpoint=$EP
agent 2 a 3:3 --rdzv-endpoint=$EP
agent 3 a 3:3 --rdzv-endpoint=$EP
workers a 6; r_a=$?; RA=$ROUND
test_expect_success '3 hosts form one job: WORLD_SIZE 6, ranks 0-5, node ranks by host' '
    [[ $r_a -eq 0 ]]
    [[ "$(ranks a $RA)" == "0 1 2 3 4 5 " ]]
    refute grep -v "world=6 " "$T"/a/w.$RA.*
    [[ $(grep -h -o "host=elh[0-9]" "$T"/a/w.$RA.* | sort -u | wc -l) -eq 3 ]]
    grep -q "hosting the rendezvous store on 10.77.0.1:29400" "$T/a/agent.1.log"
    grep -q "round 0: 3 nodes" "$T/a/agent.2.log"
'
finish a 1 2 3; r_fin=$?
test_expect_success 'a finished job: every agent exits 0' '[[ $r_fin -eq 0 ]]'

# ---------------------------------------------------------------------------
# Grow, then shrink on SIGKILL (keep-alive window 60 s: only the pushed
# notice can be that fast), then shrink on a cut link (window 2 s).
KA="keep_alive_interval=1,keep_alive_max_attempt=2"
agent 1 b 2:4 --rdzv-endpoint=$EP --rdzv-conf=last_call_timeout=1,$KA
agent 2 b 2:4 --rdzv-endpoint=$EP --rdzv-conf=last_call_timeout=1,$KA
agent 3 b 2:4 --rdzv-endpoint=$EP --rdzv-conf=last_call_timeout=1,$KA
workers b 6; r_b0=$?; RB0=$ROUND
agent 4 b 2:4 --rdzv-endpoint=$EP --rdzv-conf=last_call_timeout=1,$KA
workers b 8 $RB0; r_b1=$?; RB1=$ROUND
test_expect_success 'a fourth host joins mid-run and the job grows to 8 workers' '
    [[ $r_b0 -eq 0 && $r_b1 -eq 0 ]]
    [[ "$(ranks b $RB1)" == "0 1 2 3 4 5 6 7 " ]]
    # stable ranks: the old hosts keep their order, the new one goes last
    for f in "$T"/b/w.$RB0.*; do
        h=$(grep -o "host=elh[0-9]" "$f"); g=$(grep -o "group=[0-9]" "$f")
        grep -q "$h .*$g " "$T"/b/w.$RB1.* || { echo "$h moved"; false; }
    done
    grep -q "host=elh4 .*group=3 " "$T"/b/w.$RB1.*
    grep "round $RB1:" "$T/b/agent.1.log"
    grep -q "round $RB1: 4 nodes (joined: elh4/[0-9a-f]\{4\}; left: -); this node (elh1/[0-9a-f]\{4\}) is rank [0-3]$" "$T/b/agent.1.log"
'
t0=$(date +%s%N)
kill -KILL "${AGENT_PID[4]}"
workers b 6 $RB1 20; r_b2=$?; RB2=$ROUND
t_kill=$(( ($(date +%s%N) - t0) / 1000000 ))
test_expect_success 'an agent is SIGKILLed: the job re-forms with 3 hosts at once' '
    [[ $r_b2 -eq 0 ]]
    [[ "$(ranks b $RB2)" == "0 1 2 3 4 5 " ]]
    refute grep -h -q "host=elh4" "$T"/b/w.$RB2.*
    (( t_kill < 2000 ))   # the keep-alive window is 2 s; a push is ms
    echo "re-formed in $t_kill ms"
    grep -q "left: elh4" "$T/b/agent.1.log"
'
bash "$INFRA/netns-fault.sh" cut 3 >/dev/null 2>&1
workers b 4 $RB2 20; r_b3=$?; RB3=$ROUND
test_expect_success 'a host link is cut: the job re-forms after the keep-alive window' '
    [[ $r_b3 -eq 0 ]]
    [[ "$(ranks b $RB3)" == "0 1 2 3 " ]]
    refute grep -h -q "host=elh3" "$T"/b/w.$RB3.*
'
wait_exit 3 30; r_cut=$RC
test_expect_success 'the cut-off agent gives up with a clear error' '
    [[ $r_cut -ne 0 && $r_cut -ne 124 ]]
    grep -q "lost the rendezvous store" "$T/b/agent.3.log"
' 
bash "$INFRA/netns-fault.sh" uncut 3 >/dev/null 2>&1
finish b 1 2; r_fin=$?
test_expect_success 'the shrunk job finishes: surviving agents exit 0' '[[ $r_fin -eq 0 ]]'

# ---------------------------------------------------------------------------
# Hot spare: MAX 2, three hosts; a member dies and the spare takes its place
# without waiting for last_call_timeout (30 s).
agent 1 c 2:2 --rdzv-endpoint=$EP --rdzv-conf=last_call_timeout=30
agent 2 c 2:2 --rdzv-endpoint=$EP --rdzv-conf=last_call_timeout=30
workers c 4; r_c0=$?; RC0=$ROUND
agent 3 c 2:2 --rdzv-endpoint=$EP --rdzv-conf=last_call_timeout=30
wait_for_line "$T/c/agent.3.log" "waits as a hot spare" 20; r_sp=$?
kill -KILL "${AGENT_PID[2]}"
t0=$(date +%s%N)
workers c 4 $RC0 10; r_c1=$?; RC1=$ROUND
t_spare=$(( ($(date +%s%N) - t0) / 1000000 ))
test_expect_success 'a hot spare takes a dead node'"'"'s place at once' '
    [[ $r_c0 -eq 0 && $r_sp -eq 0 && $r_c1 -eq 0 ]]
    grep -h -q "host=elh3" "$T"/c/w.$RC1.*
    grep -h -q "host=elh1 .*group=0 " "$T"/c/w.$RC1.*
    echo "spare took over in $t_spare ms"
    (( t_spare < 10000 ))   # last_call_timeout is 30 s
'
finish c 1 3; r_fin=$?
test_expect_success 'the job with the former spare finishes' '[[ $r_fin -eq 0 ]]'

# ---------------------------------------------------------------------------
agent 2 d 3:3 --rdzv-endpoint=$EP --rdzv-conf=join_timeout=2
agent 1 d 3:3 --rdzv-endpoint=$EP --rdzv-conf=join_timeout=2
wait_exit 2 30; r_d2=$RC
wait_exit 1 30; r_d1=$RC
test_expect_success 'fewer than MIN nodes until join_timeout: a clear error' '
    cat "$T/d/agent.1.log" "$T/d/agent.2.log"
    [[ $r_d1 -ne 0 && $r_d1 -ne 124 && $r_d2 -ne 0 && $r_d2 -ne 124 ]]
    grep -q "no round with at least 3 nodes formed within 2 s" "$T/d/agent.1.log"
'

# ---------------------------------------------------------------------------
agent 1 e 3:3 --rdzv-endpoint=$EP
agent 2 e 3:3 --rdzv-endpoint=$EP
agent 3 e 3:3 --rdzv-endpoint=$EP
workers e 6; r_e=$?
kill -KILL "${AGENT_PID[1]}"
wait_exit 2 30; r_e2=$RC
wait_exit 3 30; r_e3=$RC
test_expect_success 'the store host is killed: the other agents exit non-zero, no hang' '
    [[ $r_e -eq 0 && $r_e2 -ne 0 && $r_e2 -ne 124 && $r_e3 -ne 0 && $r_e3 -ne 124 ]]
    grep -q "lost the rendezvous store" "$T/e/agent.2.log"
    grep -q "lost the rendezvous store" "$T/e/agent.3.log"
    refute pgrep -f "rdzv_worker.sh $T/e"   # no worker left behind
'

# ---------------------------------------------------------------------------
# Two jobs on one separate store in the hub namespace.
mkdir -p "$T/store"
ip netns exec elhub "$ELRUN" store --listen 10.77.0.254:29500 >"$T/store/out" 2>"$T/store/err" &
track_pid $!
wait_for_line "$T/store/out" "^listening on" 10
agent 1 f 2:2 --rdzv-endpoint=10.77.0.254:29500
agent 2 g 2:2 --rdzv-endpoint=10.77.0.254:29500
agent 3 f 2:2 --rdzv-endpoint=10.77.0.254:29500
agent 4 g 2:2 --rdzv-endpoint=10.77.0.254:29500
workers f 4; r_f=$?; RF=$ROUND
workers g 4; r_g=$?; RG=$ROUND
test_expect_success 'two jobs with different --rdzv-id share one store' '
    [[ $r_f -eq 0 && $r_g -eq 0 ]]
    [[ "$(ranks f $RF)" == "0 1 2 3 " && "$(ranks g $RG)" == "0 1 2 3 " ]]
    [[ $(grep -h -o "host=elh[0-9]" "$T"/f/w.$RF.* | sort -u | tr "\n" " ") == "host=elh1 host=elh3 " ]]
    [[ $(grep -h -o "host=elh[0-9]" "$T"/g/w.$RG.* | sort -u | tr "\n" " ") == "host=elh2 host=elh4 " ]]
    grep -h -q "master=10.77.0.254:29500" "$T"/g/w.$RG.*
'
finish f 1 3 && finish g 2 4; r_fin=$?
test_expect_success 'both jobs finish' '[[ $r_fin -eq 0 ]]'
# ---------------------------------------------------------------------------
# A frozen member that comes back (issue #11.1): agent 3 is stopped past the
# keep-alive window (2 s), the others re-form without it, its workers fail
# (their peers moved on: rdzv_peer_worker.sh), then it continues.  It must
# rejoin once as a new member, not make the job churn.
W="$ROOT/tests/e2e/bin/rdzv_peer_worker.sh"
KA="last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=2"
agent 1 h 2:3 --rdzv-endpoint=$EP --rdzv-conf=$KA
agent 2 h 2:3 --rdzv-endpoint=$EP --rdzv-conf=$KA
agent 3 h 2:3 --rdzv-endpoint=$EP --rdzv-conf=$KA
workers h 6; r_h0=$?; RH0=$ROUND
kill -STOP "${AGENT_PID[3]}"
workers h 4 "${RH0:--1}" 30; r_h1=$?; RH1=$ROUND
kill -CONT "${AGENT_PID[3]}"
workers h 6 "${RH1:--1}" 30; r_h2=$?; RH2=$ROUND
test_expect_success 'a frozen member declared dead rejoins once as a new member' '
    [[ $r_h0 -eq 0 && $r_h1 -eq 0 && $r_h2 -eq 0 ]]
    grep -q "this node (elh3/[0-9a-f]\{4\}) was declared dead by the others: it was silent for longer than the keep-alive window (2 s), e.g. paused or cut off; it rejoins as a new member (elh3/[0-9a-f]\{4\})" "$T/h/agent.3.log"
    [[ $(grep -h -o "host=elh[0-9]" "$T"/h/w.$RH2.* | sort -u | wc -l) -eq 3 ]]
    (( RH2 == RH1 + 1 ))   # one round to take it back in
'
# gone I...: every agent I exited (so that finish cannot hang on a churn).
gone() { local i; for i in "$@"; do [[ ! -e /proc/${AGENT_PID[$i]} ]] || return 1; done; }
touch "$T/h/finish"
r_fin=1; wait_until 'gone 1 2 3' 30; r_hw=$?
((r_hw == 0)) && { finish h 1 2 3; r_fin=$?; }
n_rounds=$(cat "$T"/h/agent.*.log | grep -c "INFO .* round [0-9]*: node")
test_expect_success 'the job with the resumed member finishes, without churn' '
    [[ $r_hw -eq 0 && $r_fin -eq 0 ]]
    [[ $(latest h) -eq $RH2 ]]
    echo "agents took $n_rounds rounds"
    (( n_rounds <= 8 ))    # 3 + 2 + 3
'
W="$ROOT/tests/e2e/bin/rdzv_worker.sh"

# ---------------------------------------------------------------------------
# The store host is paused past the keep-alive window (issue #11.10): when
# it continues it says what happened to it, not that its store is gone.
KA="last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=2"
agent 1 k 2:3 --rdzv-endpoint=$EP --rdzv-conf=$KA
agent 2 k 2:3 --rdzv-endpoint=$EP --rdzv-conf=$KA
agent 3 k 2:3 --rdzv-endpoint=$EP --rdzv-conf=$KA
workers k 6; r_k0=$?; RK0=$ROUND
kill -STOP "${AGENT_PID[1]}"
sleep 4   # the stimulus: paused for twice the keep-alive window
kill -CONT "${AGENT_PID[1]}"
wait_for_line "$T/k/agent.1.log" "was declared dead by the others" 20; r_k1=$?
workers k 6 "${RK0:--1}" 30; r_k2=$?
test_expect_success 'the paused store host says it was declared dead, and the job goes on' '
    [[ $r_k0 -eq 0 && $r_k1 -eq 0 && $r_k2 -eq 0 ]]
    refute grep -q "lost the rendezvous store" "$T/k/agent.1.log"
'
touch "$T/k/finish"
r_fin=1; wait_until 'gone 1 2 3' 30 && { finish k 1 2 3; r_fin=$?; }
test_expect_success 'the job whose store host was paused finishes' '[[ $r_fin -eq 0 ]]'
test_done

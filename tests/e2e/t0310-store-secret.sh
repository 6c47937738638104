#!/usr/bin/env bash
# A c10d job with a job secret (issue #11, item 3): its agents authenticate
# to the store, its PyTorch workers (Debian python3-torch, unauthenticated)
# still run a gloo allreduce on the agent's store, and an outsider cannot
# end it, forge a death or join it; a third agent with the secret can.
# Also: the secret's sources and errors, the warning for an elastic job
# without one on a non-loopback address, and `elrun store --secret-file`.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/t01-common.bash"
. "$(dirname "$0")/rdzv-common.bash"
PY=/usr/bin/python3
export PYTHON_EXEC=$PY
WORKER="$ROOT/tests/e2e/py/secret_worker.py"

head -c 32 /dev/urandom | base64 >"$T/secret"
chmod 600 "$T/secret"
head -c 32 /dev/urandom | base64 >"$T/other"
chmod 600 "$T/other"
PORT=$(free_port)
mkdir "$T/job"
declare -A AGENT_PID

# agent I [ARGS...]: an agent of the job, its log in $T/job/agent.I.log.
agent() {
    local i=$1; shift
    "$ELRUN" --nnodes=2:3 --nproc-per-node=1 --rdzv-backend=c10d \
        --rdzv-endpoint=127.0.0.1:$PORT --rdzv-id=job --max-restarts=0 \
        --monitor-interval=0.1 "$@" "$WORKER" "$T/job" >"$T/job/agent.$i.log" 2>&1 &
    AGENT_PID[$i]=$!
    track_pid $!
}

# Started here, not in a case (a case is a subshell): the cases below share
# AGENT_PID.  One agent reads the secret's path from --rdzv-conf, the other
# from the environment.
agent 0 --rdzv-conf=secret_file=$T/secret,last_call_timeout=1,keep_alive_interval=1
ELRUN_SECRET_FILE=$T/secret agent 1 --rdzv-conf=last_call_timeout=1,keep_alive_interval=1

test_expect_success 'agents with the secret form a job; PyTorch workers allreduce on their store' '
    workers job 2 -1 120
    [[ $ROUND == 0 ]]
    grep -q "world=2 sum=1" "$T/job/w.0.0"
    grep -q "world=2 sum=1" "$T/job/w.0.1"
'

test_expect_success 'an outsider cannot end the job, forge a death or move the round' '
    timeout 30 $PY "$ROOT/tests/e2e/py/store_outsider.py" "$PORT" job >"$T/outsider.out" 2>&1 || { cat "$T/outsider.out"; false; }
    cat "$T/outsider.out"
    [[ $(grep -c ": refused$" "$T/outsider.out") -eq 5 ]]
    refute grep -q ACCEPTED "$T/outsider.out"
    # The hosting agent logs each refusal, naming the peer and the key.
    wait_until "grep -q \"refused: COMPARE_SET of .*/elrun/job/closed\" $T/job/agent.0.log $T/job/agent.1.log" 10
'

test_expect_success 'an elrun without the secret, or with another, cannot join' '
    set +e
    env -u ELRUN_SECRET_FILE timeout 60 "$ELRUN" --nnodes=2:3 --rdzv-backend=c10d \
        --rdzv-endpoint=127.0.0.1:$PORT --rdzv-id=job --no-python true >"$T/in1.out" 2>&1
    s1=$?
    timeout 60 "$ELRUN" --nnodes=2:3 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$PORT \
        --rdzv-id=job --rdzv-conf=secret_file=$T/other --no-python true >"$T/in2.out" 2>&1
    s2=$?
    set -e
    cat "$T/in1.out" "$T/in2.out"
    ((s1 != 0 && s2 != 0))
    grep -q "rendezvous" "$T/in1.out"
    grep -q "the secret files differ" "$T/in2.out"
'

test_expect_success 'the job went on untouched' '
    alive "${AGENT_PID[0]}"
    alive "${AGENT_PID[1]}"
    [[ $(latest job) == 0 ]]
'

agent 2 --rdzv-conf=secret_file=$T/secret,last_call_timeout=1,keep_alive_interval=1
test_expect_success 'a third agent with the secret joins it' '
    workers job 3 0 120
    [[ $ROUND == 1 ]]
    [[ $(ranks job 1) == "0 1 2 " ]]
    grep -q "world=3 sum=3" "$T/job/w.1.0"
    # The first two were never told the job closed or a member died.
    alive "${AGENT_PID[0]}"
    alive "${AGENT_PID[1]}"
    refute grep -qE "job is closed|rendezvous is closed|left: [^-]" "$T/job/agent.0.log" "$T/job/agent.1.log"
'
touch "$T/job/finish"
codes=()
for i in 0 1 2; do wait "${AGENT_PID[$i]}"; codes+=($?); done
test_expect_success 'every agent of the job exits 0' '
    echo "exit statuses: ${codes[*]}"
    [[ "${codes[*]}" == "0 0 0" ]]
'

test_expect_success 'secret errors: on the command line, readable by all, too short, missing' '
    set +e
    "$ELRUN" --nnodes=1:2 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$PORT \
        --rdzv-conf=secret=hunter2hunter2hunter2 --no-python true >"$T/e1" 2>&1; s1=$?
    cp "$T/secret" "$T/open"; chmod 644 "$T/open"
    "$ELRUN" --nnodes=1:2 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$PORT \
        --rdzv-conf=secret_file=$T/open --no-python true >"$T/e2" 2>&1; s2=$?
    echo short >"$T/short"; chmod 600 "$T/short"
    ELRUN_SECRET_FILE=$T/short "$ELRUN" --nnodes=1:2 --rdzv-backend=c10d \
        --rdzv-endpoint=127.0.0.1:$PORT --no-python true >"$T/e3" 2>&1; s3=$?
    "$ELRUN" store --listen 127.0.0.1:0 --secret-file "$T/nothere" >"$T/e4" 2>&1; s4=$?
    set -e
    cat "$T/e1" "$T/e2" "$T/e3" "$T/e4"
    ((s1 == 2 && s2 == 2 && s3 == 2 && s4 == 2))
    grep -q "would show in ps" "$T/e1"
    grep -q "chmod 600" "$T/e2"
    grep -q "at least 16" "$T/e3"
    grep -q "cannot read the secret file" "$T/e4"
'

test_expect_success 'an elastic job without a secret on a non-loopback address is warned about' '
    ip=$(hostname -I | tr " " "\n" | grep -v "^127\." | grep -v : | head -1)
    [[ -n $ip ]] || { echo "no non-loopback IPv4 address here"; false; }
    p=$(free_port)
    env -u ELRUN_SECRET_FILE timeout 60 "$ELRUN" --nnodes=1:2 --rdzv-backend=c10d \
        --rdzv-endpoint=$ip:$p --rdzv-conf=last_call_timeout=0.1 --no-python true >"$T/w.out" 2>&1
    grep -q "has no job secret: anyone who reaches it can end, stall or join" "$T/w.out"
    timeout 60 "$ELRUN" --nnodes=1:2 --rdzv-backend=c10d --rdzv-endpoint=$ip:$p \
        --rdzv-conf=last_call_timeout=0.1,secret_file=$T/secret --no-python true >"$T/w2.out" 2>&1
    refute grep -q "no job secret" "$T/w2.out"
'

test_expect_success 'elrun store --secret-file: agents with the secret use it, others cannot' '
    start_store --secret-file "$T/secret"
    grep -q "with a job secret" "$T/store.err"
    timeout 60 "$ELRUN" --nnodes=1:2 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$STORE_PORT \
        --rdzv-id=s --rdzv-conf=is_host=0,last_call_timeout=0.1,secret_file=$T/secret \
        --no-python true >"$T/s1.out" 2>&1 || { cat "$T/s1.out"; false; }
    set +e
    env -u ELRUN_SECRET_FILE timeout 60 "$ELRUN" --nnodes=1:2 --rdzv-backend=c10d \
        --rdzv-endpoint=127.0.0.1:$STORE_PORT --rdzv-id=s2 \
        --rdzv-conf=is_host=0,last_call_timeout=0.1 --no-python true >"$T/s2.out" 2>&1; st=$?
    set -e
    cat "$T/s2.out"
    ((st != 0))
    grep -q "refused: .*needs a connection authenticated with the job secret" "$T/store.err"
'
test_done

#!/usr/bin/env bash
# Signals: TERM/INT/HUP/QUIT (and --signals-to-handle ones) sent to the agent
# reach every worker, then the agent exits 1 as torchrun does, leaving no
# process behind (workers, their children); the agent's death kills its
# workers; a signal during the rendezvous ends the wait at once.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/t01-common.bash"

# sigworker.sh DIR: records the signal it gets, has a child of its own
# (same process group), reports ready.
cat >"$T/sigworker.sh" <<'EOF'
#!/bin/bash
dir=$1
for s in TERM INT HUP QUIT USR1; do
    trap "echo $s > $dir/got.\$RANK; exit 0" $s
done
sleep 300 &
echo $! > "$dir/child.$RANK"
echo $$ > "$dir/ready.$RANK"
wait
EOF
chmod +x "$T/sigworker.sh"

# run_and_signal SIG DIR [FLAGS...]: start the agent, wait until both
# workers are ready, send SIG, wait for the agent; sets ST and APID.
run_and_signal() {
    local sig=$1 dir=$2; shift 2
    mkdir -p "$dir"
    "$ELRUN" --standalone --nproc-per-node=2 "$@" --no-python "$T/sigworker.sh" "$dir" \
        >"$dir/out" 2>"$dir/err" &
    APID=$!
    wait_for_file "$dir/ready.0"; wait_for_file "$dir/ready.1"
    wait_for_file "$dir/child.0"; wait_for_file "$dir/child.1"
    TREE=$(tree_pids $APID | tr "\n" " ")
    kill -$sig $APID
    set +e; wait $APID; ST=$?; set -e
}

for sig in TERM INT HUP QUIT; do
    test_expect_success "SIG$sig to the agent: forwarded, exit 1, nothing left" '
        run_and_signal '$sig' "$T/'$sig'"
        [[ $ST == 1 ]]
        [[ $(cat $T/'$sig'/got.0) == '$sig' && $(cat $T/'$sig'/got.1) == '$sig' ]]
        [[ $(wc -w <<<"$TREE") -ge 5 ]]   # agent, 2 workers, 2 children
        for p in $TREE; do ! alive $p || { ps -o pid,stat,cmd -p $p; false; }; done
        grep -q "received signal" "$T/'$sig'/err"
    '
done

test_expect_success '--signals-to-handle=SIGUSR1 (Slurm preemption) is forwarded too' '
    run_and_signal USR1 "$T/usr1" --signals-to-handle=SIGTERM,SIGUSR1
    [[ $ST == 1 ]]
    [[ $(cat $T/usr1/got.0) == USR1 && $(cat $T/usr1/got.1) == USR1 ]]
    for p in $TREE; do refute alive $p; done
'

test_expect_success 'the agent killed with SIGKILL takes its workers along' '
    mkdir "$T/k9"
    "$ELRUN" --standalone --nproc-per-node=2 --no-python "$T/sigworker.sh" "$T/k9" 2>/dev/null &
    apid=$!
    wait_for_file "$T/k9/ready.0"; wait_for_file "$T/k9/ready.1"
    w0=$(cat $T/k9/ready.0) w1=$(cat $T/k9/ready.1)
    kill -KILL $apid; wait $apid || true
    [[ -n $w0 && -n $w1 ]]
    wait_until "! alive $w0 && ! alive $w1" 10
'

# stubborn.sh: ignores SIGTERM.
cat >"$T/stubborn.sh" <<'EOF'
#!/bin/bash
trap "" TERM
echo $$ > "$1/ready.$RANK"
while :; do sleep 1; done
EOF
chmod +x "$T/stubborn.sh"

test_expect_success 'a second SIGTERM ends the grace: workers are killed at once' '
    mkdir "$T/two"
    "$ELRUN" --standalone --nproc-per-node=2 --stop-timeout=60 --no-python "$T/stubborn.sh" "$T/two" 2>"$T/two/err" &
    apid=$!
    wait_for_file "$T/two/ready.0"; wait_for_file "$T/two/ready.1"
    kill -TERM $apid
    wait_for_line "$T/two/err" "received signal 15"
    kill -TERM $apid
    set +e; timeout 10 tail --pid=$apid -f /dev/null; st=$?; set -e
    [[ $st == 0 ]]
    p0=$(cat $T/two/ready.0); [[ -n $p0 ]]
    refute alive "$p0"
'

# failstub.sh: rank 0 ignores SIGTERM (a long grace); rank 1 fails as soon
# as rank 0 ignores it (else, on a busy machine, the agent's SIGTERM could
# reach rank 0 before its trap and end the stop at once).
cat >"$T/failstub.sh" <<'EOF'
#!/bin/bash
echo "$TORCHELASTIC_RESTART_COUNT $RANK" >> "$1/starts"
if [[ $RANK == 1 ]]; then
    until [[ -e $1/ignoring.$TORCHELASTIC_RESTART_COUNT ]]; do sleep 0.01; done
    exit 1
fi
trap "" TERM
touch "$1/ignoring.$TORCHELASTIC_RESTART_COUNT"
while :; do sleep 1; done
EOF
chmod +x "$T/failstub.sh"

test_expect_success 'a signal that arrives while a failed group stops: no restart, exit 1' '
    mkdir "$T/ss"
    "$ELRUN" --standalone --nproc-per-node=2 --max-restarts=3 --stop-timeout=1 \
        --no-python "$T/failstub.sh" "$T/ss" 2>"$T/ss/err" &
    apid=$!
    wait_for_line "$T/ss/err" "exited with code 1"
    kill -TERM $apid
    set +e; timeout 10 tail --pid=$apid -f /dev/null; t=$?; wait $apid; st=$?; set -e
    [[ $t == 0 && $st == 1 ]]
    refute grep -q "^1 " "$T/ss/starts"
    refute grep -q "restarting" "$T/ss/err"
'

test_expect_success 'SIGTERM while waiting in the rendezvous ends the agent at once' '
    port=$(free_port)
    "$ELRUN" --nnodes=2 --node-rank=0 --master-port=$port --no-python true 2>"$T/rd.err" &
    apid=$!
    # Node 0 hosts the store, so the port answers once it waits.
    wait_until "(exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null" 10
    kill -TERM $apid
    set +e; timeout 5 tail --pid=$apid -f /dev/null; st=$?; wait $apid; ast=$?; set -e
    [[ $st == 0 && $ast == 1 ]]
'

# stopped.sh DIR: in attempt 0, rank 0 stops itself with SIGSTOP (a worker
# under a debugger, or ^Z'd) and rank 1 fails once rank 0 is stopped;
# attempt 1 succeeds.  A stopped process cannot act on SIGTERM until it is
# continued, so unless the agent sends SIGCONT with it the stop waits the
# whole grace (30 s by default) and ends in SIGKILL.
cat >"$T/stopped.sh" <<'EOF'
#!/bin/bash
dir=$1
echo "$TORCHELASTIC_RESTART_COUNT $RANK" >> "$dir/starts"
[[ $TORCHELASTIC_RESTART_COUNT == 0 ]] || exit 0
if [[ $RANK == 0 ]]; then
    echo $$ > "$dir/pid.0.tmp"; mv "$dir/pid.0.tmp" "$dir/pid.0"
    kill -STOP $$
    exec sleep 300
fi
until [[ -s $dir/pid.0 && $(ps -o stat= -p "$(cat "$dir/pid.0")") == T* ]]; do sleep 0.01; done
exit 1
EOF
chmod +x "$T/stopped.sh"

test_expect_success 'a SIGSTOPped worker gets SIGCONT with the SIGTERM: the stop ends without the 30 s grace' '
    mkdir "$T/cont"
    # The default --stop-timeout (30 s).  The proof is an event, not a
    # clock: rank 0 dies of the SIGTERM itself (it can only act on it once
    # continued), and the grace never runs out (no SIGKILL).  timeout 60
    # only keeps a broken build from hanging the suite.
    set +e
    ELRUN_LOG_LEVEL=debug timeout 60 "$ELRUN" --standalone --nproc-per-node=2 --max-restarts=1 \
        --no-python "$T/stopped.sh" "$T/cont" 2>"$T/cont/err"; st=$?
    set -e
    cat "$T/cont/err"
    [[ $st == 0 ]]
    [[ $(grep -c "^1 " "$T/cont/starts") == 2 ]]
    grep -q "worker local_rank 0 (rank 0, pid $(cat "$T/cont/pid.0")) killed by signal 15 (TERM)" "$T/cont/err"
    refute grep -q "sending SIGKILL" "$T/cont/err"
'

test_done

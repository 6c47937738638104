#!/usr/bin/env bash
# Two static nodes on this machine (--nnodes=2 --node-rank=i --master-addr
# --master-port): node 0 hosts the store, both wait for each other, ranks
# follow node order; a failure on one node restarts both (one global round
# number); the exit barrier holds node 0 for node 1 but never holds a failed
# job; a lost node 0 ends node 1.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/t01-common.bash"

cat >"$T/envdump.sh" <<'EOF'
#!/bin/sh
env > "$1/env.$TORCHELASTIC_RESTART_COUNT.$RANK"
EOF
chmod +x "$T/envdump.sh"

# node I NPROC DIR [FLAGS...] -- CMD...: one agent in the background;
# its pid in NODE_PID[I].
declare -a NODE_PID
node() {
    local i=$1 n=$2 dir=$3; shift 3
    "$ELRUN" --nnodes=2 --node-rank=$i --master-addr=127.0.0.1 --master-port=$PORT \
        --nproc-per-node=$n --rdzv-id=job2 --rdzv-conf=timeout=30 "$@" >"$dir/out.$i" 2>"$dir/err.$i" &
    NODE_PID[$i]=$!
}

test_expect_success 'two nodes: every rank'"'"'s environment (2 + 1 workers)' '
    PORT=$(free_port); mkdir "$T/env"
    node 1 1 "$T/env" --no-python "$T/envdump.sh" "$T/env"   # node 1 first: it waits
    node 0 2 "$T/env" --no-python "$T/envdump.sh" "$T/env"
    wait ${NODE_PID[0]}; wait ${NODE_PID[1]}
    for r in 0 1 2; do
        f=$T/env/env.0.$r
        [[ $(envval $f RANK) == $r && $(envval $f ROLE_RANK) == $r ]]
        [[ $(envval $f WORLD_SIZE) == 3 && $(envval $f ROLE_WORLD_SIZE) == 3 ]]
        [[ $(envval $f GROUP_WORLD_SIZE) == 2 ]]
        [[ $(envval $f MASTER_ADDR) == 127.0.0.1 && $(envval $f MASTER_PORT) == $PORT ]]
        [[ $(envval $f TORCHELASTIC_USE_AGENT_STORE) == True ]]
        [[ $(envval $f TORCHELASTIC_RUN_ID) == job2 ]]
        [[ $(envval $f TORCHELASTIC_RESTART_COUNT) == 0 ]]
    done
    [[ $(envval $T/env/env.0.0 GROUP_RANK) == 0 && $(envval $T/env/env.0.1 GROUP_RANK) == 0 ]]
    [[ $(envval $T/env/env.0.2 GROUP_RANK) == 1 && $(envval $T/env/env.0.2 LOCAL_RANK) == 0 ]]
    [[ $(envval $T/env/env.0.0 LOCAL_WORLD_SIZE) == 2 && $(envval $T/env/env.0.2 LOCAL_WORLD_SIZE) == 1 ]]
'

# fail1.sh DIR: global rank 2 (node 1) fails in round 0; others wait to be
# stopped; round 1 succeeds.
cat >"$T/fail1.sh" <<'EOF'
#!/bin/bash
echo "$TORCHELASTIC_RESTART_COUNT $RANK" >> "$1/starts"
if [[ $TORCHELASTIC_RESTART_COUNT == 0 ]]; then
    [[ $RANK == 2 ]] && exit 7
    exec sleep 60
fi
exit 0
EOF
chmod +x "$T/fail1.sh"

test_expect_success 'a failure on node 1 restarts both nodes into round 1' '
    PORT=$(free_port); mkdir "$T/rs"
    node 0 2 "$T/rs" --max-restarts=1 --no-python "$T/fail1.sh" "$T/rs"
    node 1 2 "$T/rs" --max-restarts=1 --no-python "$T/fail1.sh" "$T/rs"
    wait ${NODE_PID[0]}; wait ${NODE_PID[1]}
    [[ $(grep -c "^1 " $T/rs/starts) == 4 ]]
    grep -q "restarting (1 of 1 restarts used)" "$T/rs/err.1"
    grep -q "other nodes are waiting for a new round" "$T/rs/err.0"
    refute grep -q "restarting (" "$T/rs/err.0"
'

test_expect_success 'node 1 failing for good ends node 0 too (exit 1 both)' '
    PORT=$(free_port); mkdir "$T/ff"
    node 0 2 "$T/ff" --no-python "$T/fail1.sh" "$T/ff"
    node 1 2 "$T/ff" --no-python "$T/fail1.sh" "$T/ff"
    set +e; timeout 20 tail --pid=${NODE_PID[0]} -f /dev/null; wait ${NODE_PID[0]}; s0=$?
    wait ${NODE_PID[1]}; s1=$?; set -e
    [[ $s0 == 1 && $s1 == 1 ]]
    grep -q "ChildFailedError" "$T/ff/err.1"
    grep -q "closed by another node" "$T/ff/err.0"
'

test_expect_success 'exit barrier: node 0 (the store) waits for node 1 to finish' '
    PORT=$(free_port); mkdir "$T/eb"
    ELRUN_LOG_LEVEL=info node 0 1 "$T/eb" --no-python true
    node 1 1 "$T/eb" --no-python sh -c "while [ ! -f $T/eb/go ]; do sleep 0.02; done"
    wait_for_line "$T/eb/err.0" "succeeded; waiting for the other nodes"
    for i in 1 2 3 4 5; do kill -0 ${NODE_PID[0]}; sleep 0.05; done
    touch "$T/eb/go"
    wait ${NODE_PID[1]}; wait ${NODE_PID[0]}
'

test_expect_success 'exit barrier timeout lets node 0 go' '
    PORT=$(free_port); mkdir "$T/et"
    node 0 1 "$T/et" --exit-barrier-timeout=0.3 --no-python true
    node 1 1 "$T/et" --no-python sh -c "while [ ! -f $T/et/go ]; do sleep 0.02; done"
    set +e; timeout 10 tail --pid=${NODE_PID[0]} -f /dev/null; st=$?; set -e
    [[ $st == 0 ]]
    wait ${NODE_PID[0]}
    grep -q "exit barrier" "$T/et/err.0"
    touch "$T/et/go"; wait ${NODE_PID[1]} || true
'

# late.sh: rank 1 (node 1) dies in round 0; rank 0 (node 0) succeeds at once.
cat >"$T/late.sh" <<'EOF'
#!/bin/sh
[ "$RANK" = 1 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && kill -KILL $$
exit 0
EOF
chmod +x "$T/late.sh"

test_expect_success 'no restart after another node finished; nobody held hostage' '
    PORT=$(free_port); mkdir "$T/late"
    node 0 1 "$T/late" --max-restarts=1 --no-python "$T/late.sh"
    node 1 1 "$T/late" --max-restarts=1 --no-python "$T/late.sh"
    set +e
    timeout 20 tail --pid=${NODE_PID[0]} -f /dev/null; t0=$?
    timeout 20 tail --pid=${NODE_PID[1]} -f /dev/null; t1=$?
    wait ${NODE_PID[0]}; s0=$?; wait ${NODE_PID[1]}; s1=$?
    set -e
    [[ $t0 == 0 && $t1 == 0 ]]
    # Node 0 finished its work; node 1 cannot restart without it.
    [[ $s0 == 0 ]]
    if [[ $s1 != 0 ]]; then
        [[ $s1 == 1 ]]
        grep -q "another node already finished the job" "$T/late/err.1"
    fi
'

test_expect_success 'two agents with the same --node-rank: a clear error' '
    PORT=$(free_port); mkdir "$T/dup"
    node 0 1 "$T/dup" --no-python sh -c "touch $T/dup/up.\$RANK; exec sleep 60"
    node 1 1 "$T/dup" --no-python sh -c "touch $T/dup/up.\$RANK; exec sleep 60"
    wait_until "[[ -e \$T/dup/up.0 && -e \$T/dup/up.1 ]]" 20
    set +e
    "$ELRUN" --nnodes=2 --node-rank=1 --master-addr=127.0.0.1 --master-port=$PORT \
        --rdzv-id=job2 --rdzv-conf=timeout=20 --no-python true 2>"$T/dup/err.x"; st=$?
    set -e
    [[ $st == 1 ]]
    grep -q "already joined round 0 as node rank 1; give every node its own --node-rank" "$T/dup/err.x"
    kill ${NODE_PID[0]} ${NODE_PID[1]}; wait ${NODE_PID[0]} ${NODE_PID[1]} || true
'

test_expect_success 'a node that never comes: join timeout with a clear message' '
    PORT=$(free_port)
    set +e
    "$ELRUN" --nnodes=2 --node-rank=0 --master-port=$PORT --rdzv-conf=timeout=1 \
        --no-python true 2>"$T/jt.err"; st=$?
    set -e
    [[ $st == 1 ]]
    grep -q "not all 2 nodes joined within 1 s; start the missing nodes" "$T/jt.err"
'

test_expect_success 'node 0 lost: node 1 stops its workers and exits 1' '
    PORT=$(free_port); mkdir "$T/lost"
    node 0 1 "$T/lost" --no-python sleep 60
    node 1 1 "$T/lost" --no-python sh -c "echo \$\$ > $T/lost/w1; exec sleep 60"
    wait_for_file "$T/lost/w1"
    kill -KILL ${NODE_PID[0]}
    set +e; timeout 10 tail --pid=${NODE_PID[1]} -f /dev/null; st=$?; wait ${NODE_PID[1]}; s1=$?; set -e
    [[ $st == 0 && $s1 == 1 ]]
    p1=$(cat $T/lost/w1); [[ -n $p1 ]]
    refute alive "$p1"
    grep -q "lost the connection to the rendezvous store" "$T/lost/err.1"
'

test_done

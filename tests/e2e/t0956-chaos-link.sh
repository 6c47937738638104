#!/usr/bin/env bash
# elrun chaos --faults link-cut: a job of the C example on three simulated
# hosts (network namespaces elh1..elh3 from tests/infra, a store in the hub
# namespace) loses one agent's link for a while: that host's eth0 goes down
# for --cut-for and comes up again; the other two re-form without it and the
# job finishes (the cut agent does not hang).  Another job's host (elh4) keeps
# its link and its agent.  A job whose agents share the tool's own network
# namespace gets no link cut at all (the machine's links are never touched).
. "$(dirname "$0")/lib.sh"
INFRA="$ROOT/tests/infra"
TRAIN="$ROOT/$BUILD/examples/train_fmnist"
DATA=/usr/share/datasets/fashion-mnist
if [[ $(id -u) != 0 ]] || ! command -v ip >/dev/null; then
    test_skip "chaos link-cut on simulated hosts" "needs root and iproute2"
    test_done; exit
fi
if [[ ! -x $TRAIN || ! -f $DATA/train-images-idx3-ubyte.gz ]]; then
    test_skip 'chaos link-cut' "needs $TRAIN and dataset-fashion-mnist"
    test_done; exit
fi
netns_hosts 4
trap '_cleanup; bash "$INFRA/netns-fault.sh" clear >/dev/null 2>&1; bash "$INFRA/netns-down.sh" >/dev/null 2>&1' EXIT

mkdir -p "$T/store"
ip netns exec elhub "$ELRUN" store --listen 10.77.0.254:0 >"$T/store/out" 2>"$T/store/err" &
track_pid $!
wait_for_line "$T/store/out" "^listening on" 10
EP=10.77.0.254:$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$T/store/out" | head -1)
KA="last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=3"
ARGS="--epochs 40 --hidden 64 --ckpt-every 200 --threads 1"

# lc_node I: agent I of job lc on host elhI, started again after any exit
# until an agent of the job succeeded.
declare -A LC_NODE
lc_node() {
    local i=$1
    mkdir -p "$T/lc"
    (
        while [[ ! -f $T/lc/done ]]; do
            st=0
            ELRUN_LOG_LEVEL=info bash "$INFRA/netns-run.sh" "$i" "$ELRUN" --nnodes=2:3 \
                --nproc-per-node=1 --rdzv-backend=c10d --rdzv-endpoint=$EP --rdzv-id=lc \
                --rdzv-conf=$KA --max-restarts=20 --no-python "$TRAIN" $ARGS \
                --ckpt-dir "$T/lc/ck$i" >>"$T/lc/a$i.log" 2>&1 || st=$?
            if ((st == 0)); then touch "$T/lc/done"; fi
        done
    ) &
    LC_NODE[$i]=$!
    track_pid $!
}
job_procs() {
    { grep -lzx "TORCHELASTIC_RUN_ID=$1" /proc/[0-9]*/environ
      grep -lzx -- "--rdzv-id=$1" /proc/[0-9]*/cmdline; } 2>/dev/null | cut -d/ -f3 | sort -u
}
link_state() { ip -n "elh$1" -br link show eth0 | awk '{print $2}'; }

test_expect_success 'link-cut: one agent host of the job loses eth0 for 6 s; the others re-form; the job finishes; another job keeps its link' '
    # The other job: one node on elh4, on the same store.
    ELRUN_LOG_LEVEL=info bash "$INFRA/netns-run.sh" 4 "$ELRUN" --nnodes=1 --nproc-per-node=1 \
        --rdzv-backend=c10d --rdzv-endpoint=$EP --rdzv-id=other --no-python sleep 600 >"$T/other.log" 2>&1 &
    other=$!; track_pid $other
    for i in 1 2 3; do lc_node $i; done
    wait_until "grep -hq \"^epoch 2/40\" \"$T\"/lc/a*.log" 90
    "$ELRUN" chaos --rdzv-id=lc --at 0s --faults link-cut --cut-for 6s --seed 3 >"$T/chaos.out" 2>&1 &
    chaos=$!; track_pid $chaos
    wait_for_line "$T/chaos.out" "link-cut pid [0-9]+ \(agent; eth0 down for 6.0 s\)$" 20
    pid=$(sed -n "s/.*link-cut pid \([0-9]*\) .*/\1/p" "$T/chaos.out")
    h=$(ip netns identify "$pid"); echo "cut: pid $pid on $h"
    [[ $h == elh[123] ]]
    n=${h#elh}
    [[ $(link_state $n) == DOWN ]]
    for i in 1 2 3 4; do ((i == n)) || [[ $(link_state $i) == UP ]]; done
    # The two others re-form without it while it is cut off.
    others=$(for i in 1 2 3; do ((i == n)) || printf "%s " "$T/lc/a$i.log"; done)
    wait_until "grep -hq \"round [0-9]*: 2 nodes\" $others" 30
    wait $chaos
    grep -Eq "^ +[0-9.]+s link-up pid $pid \(eth0 up again, after link-cut\)$" "$T/chaos.out"
    [[ $(link_state $n) == UP ]]
    for i in 1 2 3; do wait ${LC_NODE[$i]}; done
    grep -h "^final: " "$T"/lc/a*.log | contains "(18760 steps)"
    # The cut agent did not hang once its link was back: it is gone.
    refute kill -0 "$pid"
    refute test -n "$(job_procs lc)"
    # The other job: in the elastic rendezvous on the shared store (its
    # one node does not host a store of its own where the endpoint is
    # another host), and never touched.
    grep -q "round 0: 1 nodes (joined: " "$T/other.log"
    kill -0 $other
    [[ $(link_state 4) == UP ]]
    refute grep -q "round [1-9]" "$T/other.log"
    kill -TERM $other; wait $other || true
'

test_expect_success 'link-cut on a job whose agents share this namespace: skipped with a clear line, no link touched' '
    start_store
    "$ELRUN" --nnodes=1:2 --nproc-per-node=1 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$STORE_PORT \
        --rdzv-id=loop --rdzv-conf=last_call_timeout=1 --no-python sleep 600 >"$T/loop.log" 2>&1 &
    loop=$!; track_pid $loop
    before=$(ip -br link show | sort)
    "$ELRUN" chaos --rdzv-id=loop --at 0s --faults link-cut --cut-for 1s >"$T/chaos2.out" 2>&1
    cat "$T/chaos2.out"
    grep -Eq "^ +[0-9.]+s link-cut: no agent of job loop runs in a network namespace of its own .*skipped$" "$T/chaos2.out"
    refute grep -q "link-cut pid" "$T/chaos2.out"
    [[ "$(ip -br link show | sort)" == "$before" ]]
    kill -0 $loop
    kill -TERM $loop; wait $loop || true
'
test_done

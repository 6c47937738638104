#!/usr/bin/env bash
# What a newcomer hits between "it works" and "it just works" (issue #12):
# which Python runs the workers, an endpoint that is not a store, SIGTERM in
# every state of the agent, --standalone --local-addr, torchrun's INFO log
# (LOGLEVEL), and a --help that tells the truth.  Each case checks the lines
# a user reads.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/t01-common.bash"

# A python3 first in PATH that cannot import torch (site-packages off), as a
# pyenv or conda python3 without torch would be.
mkdir -p "$T/nopy"
cat >"$T/nopy/python3" <<'EOF'
#!/bin/sh
exec /usr/bin/python3 -S "$@"
EOF
chmod +x "$T/nopy/python3"
printf 'import torch\n' >"$T/needs_torch.py"
printf '#!/bin/sh\necho shell\n' >"$T/shell.sh"
chmod +x "$T/shell.sh"
printf '#!/usr/bin/env python3\nimport os\nopen(os.environ["OUT"], "w").write("py")\n' >"$T/env_py.py"

test_expect_success 'python: an import error names the interpreter and PYTHON_EXEC' '
    refute env PATH="$T/nopy:$PATH" "$ELRUN" --standalone --nproc-per-node=2 \
        "$T/needs_torch.py"
    env PATH="$T/nopy:$PATH" "$ELRUN" --standalone --nproc-per-node=2 \
        "$T/needs_torch.py" >"$T/imp.out" 2>"$T/imp.err" || true
    cat "$T/imp.err"
    # Two workers write at once: their lines may interleave, so only the
    # message is looked for, not where it starts.
    grep -q "No module named .torch." "$T/imp.err"
    grep -q "of binary: $T/nopy/python3\$" "$T/imp.err"
    grep -q "the interpreter $T/nopy/python3 lacks the module; choose another with PYTHON_EXEC, e.g. PYTHON_EXEC=/usr/bin/python3" "$T/imp.err"
    # The table stays torchrun'"'"'s: the title is the script, as given.
    grep -qx "$T/needs_torch.py FAILED" "$T/imp.err"
'

test_expect_success 'python: with stderr in a log file the module is named' '
    env PATH="$T/nopy:$PATH" "$ELRUN" --standalone -r 2 --log-dir="$T/impl" \
        "$T/needs_torch.py" 2>"$T/imp2.err" || true
    cat "$T/imp2.err"
    grep -q "could not import a module (ModuleNotFoundError: No module named .torch.) with the interpreter $T/nopy/python3; choose the Python that has it with PYTHON_EXEC, e.g. PYTHON_EXEC=/usr/bin/python3" "$T/imp2.err"
'

test_expect_success 'python: a worker that fails later gets no interpreter hint' '
    printf "import sys, time\ntime.sleep(0 if sys.argv[1:] else 3.5)\nraise SystemExit(1)\n" >"$T/late.py"
    PYTHON_EXEC=/usr/bin/python3 "$ELRUN" --standalone "$T/late.py" 2>"$T/late.err" || true
    grep -q "of binary: /usr/bin/python3\$" "$T/late.err"
    refute grep -q PYTHON_EXEC "$T/late.err"
'

test_expect_success 'python: a shell script or an ELF program gets the --no-python hint' '
    st=0; "$ELRUN" --standalone "$T/shell.sh" 2>"$T/sh.err" || st=$?
    cat "$T/sh.err"
    [[ $st == 2 ]]
    grep -qx "elrun: error: .$T/shell.sh. is not a Python script (its first line is .#!/bin/sh.); add --no-python to run it directly" "$T/sh.err"
    refute grep -q SyntaxError "$T/sh.err"
    st=0; "$ELRUN" --standalone /bin/true 2>"$T/elf.err" || st=$?
    [[ $st == 2 ]]
    grep -qx "elrun: error: ./bin/true. is an ELF executable, not a Python script; add --no-python to run it directly" "$T/elf.err"
    # With --no-python both run.
    "$ELRUN" --standalone --no-python "$T/shell.sh" | contains -x shell
    "$ELRUN" --standalone --no-python /bin/true
    # A #! python script still runs under python.
    OUT=$T/envpy.out PYTHON_EXEC=/usr/bin/python3 "$ELRUN" --standalone "$T/env_py.py"
    [[ $(cat "$T/envpy.out") == py ]]
'

test_expect_success 'python: --help says how the interpreter is chosen' '
    "$ELRUN" --help >"$T/help"
    grep -q "The interpreter is \$PYTHON_EXEC, else the first python3 in PATH" "$T/help"
'

test_expect_success 'standalone --local-addr=127.0.0.2: the store is where the workers are told' '
    "$ELRUN" --standalone --local-addr=127.0.0.2 --nproc-per-node=2 --no-python bash -c \
        "echo \$MASTER_ADDR >$T/la.\$RANK; exec 3<>/dev/tcp/\$MASTER_ADDR/\$MASTER_PORT && echo reached >>$T/la.\$RANK"
    [[ $(paste -sd" " "$T/la.0") == "127.0.0.2 reached" ]]
    [[ $(paste -sd" " "$T/la.1") == "127.0.0.2 reached" ]]
'

test_expect_success 'standalone --local-addr that is not this host'"'"'s: refused in one line' '
    st=0; "$ELRUN" --standalone --local-addr=192.0.2.77 --no-python /bin/true 2>"$T/la.err" || st=$?
    cat "$T/la.err"
    [[ $st == 2 && $(wc -l <"$T/la.err") == 1 ]]
    grep -q "^elrun: error: --local-addr=192.0.2.77 is not an address of this host (Cannot assign requested address): the workers are told MASTER_ADDR=192.0.2.77 and would find no store there" "$T/la.err"
'

test_expect_success 'LOGLEVEL=INFO: torchrun'"'"'s launch config, rendezvous result, attempts left, log directory' '
    LOGLEVEL=INFO PYTHON_EXEC=/usr/bin/python3 "$ELRUN" --standalone --nproc-per-node=2 \
        --max-restarts=1 --restart-backoff=0 --log-dir="$T/ll" "$T/late.py" --fast \
        2>"$T/ll.err" || true
    sed -n "/Starting elastic_operator/,/metrics_cfg/p" "$T/ll.err" >"$T/ll.launch"
    cat "$T/ll.launch"
    grep -q "INFO elrun\[[0-9]*\] Starting elastic_operator with launch configs:\$" "$T/ll.launch"
    grep -qx "  entrypoint       : $T/late.py" "$T/ll.launch"
    grep -qx "  interpreter      : /usr/bin/python3" "$T/ll.launch"
    grep -qx "  nproc_per_node   : 2" "$T/ll.launch"
    grep -qx "  max_restarts     : 1" "$T/ll.launch"
    grep -qx "  log_dir          : $T/ll" "$T/ll.launch"
    grep -q "INFO elrun\[[0-9]*\] log directory set to: $T/ll/[0-9a-f-]*_[^/]*\$" "$T/ll.err"
    grep -q "INFO elrun\[[0-9]*\] \[default\] Rendezvous complete for workers. Result:\$" "$T/ll.err"
    grep -qx "  global_ranks=\[0, 1\]" "$T/ll.err"
    grep -qx "  global_world_sizes=\[2, 2\]" "$T/ll.err"
    grep -q "INFO elrun\[[0-9]*\] \[default\] Worker group FAILED. 1/1 attempts left; will restart worker group\$" "$T/ll.err"
    [[ $(grep -c "Worker group FAILED" "$T/ll.err") == 1 ]]
'

test_expect_success 'LOGLEVEL: numbers and WARNING; ELRUN_LOG_LEVEL wins; quiet by default' '
    LOGLEVEL=20 "$ELRUN" --standalone --no-python /bin/true 2>"$T/l20.err"
    grep -q "Starting elastic_operator" "$T/l20.err"
    LOGLEVEL=WARNING "$ELRUN" --standalone --no-python /bin/true 2>"$T/lw.err"
    refute grep -q "INFO" "$T/lw.err"
    LOGLEVEL=INFO ELRUN_LOG_LEVEL=warn "$ELRUN" --standalone --no-python /bin/true 2>"$T/lo.err"
    refute grep -q "INFO" "$T/lo.err"
    "$ELRUN" --standalone --no-python /bin/true 2>"$T/ld.err"
    [[ ! -s $T/ld.err ]]
'

test_expect_success 'the log directory is named by default when it holds the workers'"'"' logs' '
    "$ELRUN" --standalone -r 3 --log-dir="$T/lr" --no-python /bin/true 2>"$T/lr.err"
    cat "$T/lr.err"
    grep -q "WARN elrun\[[0-9]*\] log directory set to: $T/lr/" "$T/lr.err"
    d=$(sed -n "s/.*log directory set to: //p" "$T/lr.err")
    [[ -f $d/attempt_0/0/stdout.log ]]
'

test_expect_success '--help: the backends as they are, the --rdzv-conf keys, the ignored flags' '
    "$ELRUN" --help >"$T/h"
    grep -q "c10d: elastic across nodes (--nnodes=MIN:MAX)" "$T/h"
    grep -q "etcd (or etcd-v2)" "$T/h"
    for k in timeout join_timeout read_timeout last_call_timeout keep_alive_interval \
             keep_alive_max_attempt is_host etcd_prefix protocol cacert cert key username password; do
        grep -q "^    $k=" "$T/h"
    done
    grep -q "^    heartbeat_timeout=S *accepted for compatibility, ignored" "$T/h"
    grep -A1 "^Accepted for compatibility and ignored" "$T/h" |
        contains -- "--logs-specs NAME, --numa-binding MODE$"
'

test_expect_success 'flags accepted but ignored warn once each, when given' '
    "$ELRUN" --standalone --logs-specs=mine --numa-binding=node --no-python /bin/true 2>"$T/ig.err"
    cat "$T/ig.err"
    [[ $(grep -c "logs-specs=mine is accepted for compatibility with torchrun and ignored" "$T/ig.err") == 1 ]]
    [[ $(grep -c "numa-binding=node is accepted for compatibility with torchrun and ignored" "$T/ig.err") == 1 ]]
    PET_EVENT_LOG_HANDLER=console "$ELRUN" --standalone --no-python /bin/true 2>"$T/ig2.err"
    refute grep -q "EVENT_LOG_HANDLER=console is accepted" "$T/ig2.err"
    grep -q "^{\"name\": \"torchelastic.worker.status.SUCCEEDED\"" "$T/ig2.err"
    "$ELRUN" --standalone --event-log-handler=null --no-python /bin/true 2>"$T/ig3.err"
    [[ ! -s $T/ig3.err ]]
'

test_expect_success 'joining a rendezvous says so: where, how many nodes, the time left' '
    p=$(free_port)
    ELRUN_RDZV_REPORT_INTERVAL=1 "$ELRUN" --nnodes=2 --node-rank=0 --master-port=$p \
        --no-python /bin/true 2>"$T/jw0.err" &
    pid=$!
    wait_for_line "$T/jw0.err" "still waiting" 20
    wait_until "[[ \$(grep -c \"still waiting\" $T/jw0.err) -ge 2 ]]" 20
    cat "$T/jw0.err"
    head -1 "$T/jw0.err" | contains "WARN elrun\[[0-9]*\] still waiting for the rendezvous at 127.0.0.1:$p: need 2 nodes, 89[0-9] s of the 900 s join timeout left\$"
    "$ELRUN" --nnodes=2 --node-rank=1 --master-port=$p --no-python /bin/true
    wait $pid
    # At INFO the wait is named as it starts.
    st=0; LOGLEVEL=INFO ELRUN_RDZV_REPORT_INTERVAL=1 timeout -s INT 3 "$ELRUN" --nnodes=2:3 \
        --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$(free_port) --rdzv-conf=join_timeout=100 \
        --no-python /bin/true 2>"$T/jw1.err" || st=$?
    grep -v "^  " "$T/jw1.err"
    [[ $st == 124 ]] && grep -q "stopped by signal 2 (INT)" "$T/jw1.err"
    grep -q "INFO elrun\[[0-9]*\] joining the rendezvous at 127.0.0.1:[0-9]*: need 2..3 nodes, 100 s of the 100 s join timeout left" "$T/jw1.err"
    grep -q "WARN elrun\[[0-9]*\] still waiting for the rendezvous at 127.0.0.1:[0-9]*: 1 of 2..3 nodes ($(hostname)/[0-9a-f]\{4\}), 99 s of the 100 s join timeout left" "$T/jw1.err"
'

# after TEXT FILE: the lines of FILE after the first that contains TEXT.
after() { awk -v p="$1" 'f; index($0, p) { f = 1 }' "$2"; }
# label_of LOG: the node's own name, from its "this node (NAME) is rank" line.
label_of() { sed -n "s/.*; this node (\([^)]*\)) is rank.*/\1/p" "$1" | tail -1; }
test_expect_success 'c10d, two agents on one host: told apart, named while waiting, and the one killed is named' '
    p=$(free_port) H=$(hostname)
    agent2() { # NAME
        ELRUN_RDZV_REPORT_INTERVAL=1 "$ELRUN" --nnodes=2:3 --rdzv-backend=c10d \
            --rdzv-endpoint=127.0.0.1:$p --rdzv-id=two --rdzv-conf=last_call_timeout=1 \
            --max-restarts=1 --no-python sleep 120 2>"$T/two.$1.err" &
        eval "pid_$1=\$!"; track_pid $!
    }
    # a waits alone first: its line names itself, 1 of 2..3.
    agent2 a
    wait_for_line "$T/two.a.err" "still waiting for the rendezvous at 127.0.0.1:$p: 1 of 2..3 nodes \($H/[0-9a-f]{4}\), " 20
    agent2 b
    wait_for_line "$T/two.a.err" "round 0: 2 nodes" 20
    wait_for_line "$T/two.b.err" "round 0: 2 nodes" 20
    la=$(label_of "$T/two.a.err") lb=$(label_of "$T/two.b.err")
    echo "a: $la, b: $lb"
    [[ $la == $H/???? && $lb == $H/???? && $la != "$lb" ]]
    grep -q "still waiting for the rendezvous at 127.0.0.1:$p: 1 of 2..3 nodes ($la), " "$T/two.a.err"
    grep -Eq "round 0: 2 nodes \(joined: ($la, $lb|$lb, $la); left: -\); this node \($la\) is rank 0" "$T/two.a.err"
    grep -Eq "round 0: 2 nodes \(joined: ($la, $lb|$lb, $la); left: -\); this node \($lb\) is rank 1" "$T/two.b.err"
    # b is killed: a names it, and waits for another with itself alone.
    kill -KILL $pid_b
    wait_for_line "$T/two.a.err" "WARN elrun\[[0-9]+\] round 0 \(rank 0 of 2 nodes\): node $lb is gone; re-forming" 20
    wait_until "[[ \$(after \"node $lb is gone\" $T/two.a.err | grep -c \"1 of 2..3 nodes ($la), \") -gt 0 ]]" 20
    agent2 c
    wait_for_line "$T/two.c.err" "round 1: 2 nodes" 20
    lc=$(label_of "$T/two.c.err")
    wait_for_line "$T/two.a.err" "round 1: 2 nodes \(joined: $lc; left: $lb\); this node \($la\) is rank 0" 20
    cat "$T/two.a.err"
    kill -TERM $pid_a $pid_c; wait $pid_a || true; wait $pid_c || true
'

if ! command -v etcd >/dev/null; then
    test_skip 'etcd: the waiting line names the joiners' "needs etcd (Debian etcd-server)"
else
test_expect_success 'c10d --nnodes=1 on a port another store serves: joins it there, as torchrun does; is_host=1 refuses' '
    start_store
    cat >"$T/one.py" <<EOF
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(2) * (dist.get_rank() + 1)
dist.all_reduce(t)
print("rank %d world %d sum %d" % (dist.get_rank(), dist.get_world_size(), t[0]))
EOF
    PYTHON_EXEC=/usr/bin/python3 "$ELRUN" --nnodes=1 --nproc-per-node=2 --rdzv-backend=c10d \
        --rdzv-endpoint=127.0.0.1:$STORE_PORT --rdzv-id=one "$T/one.py" >"$T/one.out" 2>"$T/one.err"
    cat "$T/one.out"
    grep -q "rank 0 world 2 sum 3" "$T/one.out"
    grep -q "rank 1 world 2 sum 3" "$T/one.out"
    refute grep -q "cannot host" "$T/one.err"
    refute "$ELRUN" --nnodes=1 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$STORE_PORT \
        --rdzv-conf=is_host=1 --no-python true 2>"$T/host1.err"
    cat "$T/host1.err"
    grep -q "cannot host the store on 127.0.0.1:$STORE_PORT: Address already in use; pick another port in --rdzv-endpoint or stop what uses it" "$T/host1.err"
'

test_expect_success 'etcd: the waiting line names the joiners, the one killed is named' '
    ep=$(free_port)
    ETCD_BASE=$T/etcd ETCD_PEER_PORT=$(free_port) bash "$ROOT/tests/infra/etcd-start.sh" $ep >"$T/etcd.ep" 2>"$T/etcd.log" ||
        { cat "$T/etcd.log"; exit 1; }
    trap "ETCD_BASE=$T/etcd bash $ROOT/tests/infra/etcd-stop.sh $ep >/dev/null 2>&1" EXIT
    agent3() { # NAME
        ELRUN_RDZV_REPORT_INTERVAL=1 "$ELRUN" --nnodes=2:3 --rdzv-backend=etcd \
            --rdzv-endpoint=127.0.0.1:$ep --rdzv-id=e3 --local-addr=127.0.0.1 \
            --rdzv-conf=last_call_timeout=1 --max-restarts=1 --no-python sleep 120 2>"$T/e3.$1.err" &
        eval "pid_$1=\$!"; track_pid $!
    }
    agent3 a
    wait_for_line "$T/e3.a.err" "still waiting for the rendezvous at 127.0.0.1:$ep: 1 of 2..3 nodes \(127\.0\.0\.1/[0-9a-f]{4}\), " 30
    agent3 b
    wait_for_line "$T/e3.a.err" "round [0-9]+: 2 nodes" 30
    wait_for_line "$T/e3.b.err" "round [0-9]+: 2 nodes" 30
    la=$(label_of "$T/e3.a.err") lb=$(label_of "$T/e3.b.err")
    [[ $la == 127.0.0.1/???? && $lb == 127.0.0.1/???? && $la != "$lb" ]]
    grep -Eq "round [0-9]+: 2 nodes \(joined: ($la, $lb|$lb, $la); left: -\)" "$T/e3.a.err"
    kill -KILL $pid_b
    wait_for_line "$T/e3.a.err" "node $lb is gone" 30
    wait_until "[[ \$(after \"node $lb is gone\" $T/e3.a.err | grep -c \"1 of 2..3 nodes ($la), \") -gt 0 ]]" 30
    cat "$T/e3.a.err"
    kill -TERM $pid_a; wait $pid_a || true
'
fi

test_expect_success 'c10d: a new round for a failure elsewhere is not called free (the job budget paid)' '
    mkdir -p "$T/jb"
    # Round 0: b fails, a runs until then (at most 60 s); round 1 succeeds.
    cat >"$T/jb/w.sh" <<EOF
#!/bin/bash
[[ \$TORCHELASTIC_RESTART_COUNT == 0 ]] || exit 0
if [[ \$NODE == b ]]; then touch $T/jb/failed; exit 5; fi
for i in \$(seq 3000); do [[ -f $T/jb/failed ]] && break; sleep 0.02; done
sleep 60
EOF
    chmod +x "$T/jb/w.sh"
    p=$(free_port)
    for n in a b; do
        NODE=$n "$ELRUN" --nnodes=2:2 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$p --rdzv-id=jb \
            --max-restarts=1 --no-python "$T/jb/w.sh" 2>"$T/jb/$n.err" &
        eval "pid_$n=\$!"
    done
    st_a=0 st_b=0; wait $pid_a || st_a=$?; wait $pid_b || st_b=$?
    cat "$T/jb/a.err" "$T/jb/b.err"
    [[ $st_a == 0 && $st_b == 0 ]]
    grep -q "worker group failed; the job restarts on every node" "$T/jb/b.err"
    grep -q "other nodes are waiting for a new round; restarting the workers (a failure on another node counts against the job'"'"'s --max-restarts, a node joining or leaving does not)" "$T/jb/a.err"
    refute grep -q "not counted as a restart" "$T/jb/a.err"
'

# ---- make demo-elastic, shortened through its knobs ----

if [[ ! -x $ROOT/$BUILD/examples/train_fmnist || ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]]; then
    test_skip 'demo-elastic' "needs $BUILD/examples/train_fmnist and dataset-fashion-mnist"
else
test_expect_success 'demo-elastic: the output streams live, a summary at a glance, the SVG timeline' '
    DEMO_EPOCHS=4 DEMO_GROW_AT=100 DEMO_CKPT_EVERY=50 DEMO_SVG="$T/demo.svg" BUILD="$BUILD" \
        timeout 300 "$ROOT/scripts/demo-elastic.sh" >"$T/demo.out" 2>&1
    sed "s/\x1b\[[0-9;]*m//g" "$T/demo.out" >"$T/demo.txt"
    cat "$T/demo.txt"
    # Live: the training and the rounds show before the demo moves on (at
    # the end they would all come after its last step).
    at() { grep -n -m1 -E "$1" "$T/demo.txt" | cut -d: -f1; }
    (( $(at "^  node-a ! round 0: 1 nodes") < $(at "^demo: node-b joins") ))
    (( $(at "^  node-a . epoch 1/4") < $(at "^demo: node-b is killed") ))
    (( $(at "^  node-a \| epoch [1-4]/4: ") < $(at "^demo: node-b is killed") ))
    (( $(at "^  node-a \| final: ") < $(at "^demo: summary") ))
    # The summary: each change with its time, the recovery, the steps redone.
    sed -n "/^demo: summary/,\$p" "$T/demo.txt" >"$T/summary"
    grep -Eq "^ +[0-9]+\.[0-9] s  world 1: node-a starts the job$" "$T/summary"
    grep -Eq "^ +[0-9]+\.[0-9] s  world 1 -> 2: node-b joined at [0-9]+\.[0-9] s; training again [0-9]+\.[0-9] s later, from step [0-9]+, [0-9]+ steps? redone$" "$T/summary"
    grep -Eq "^ +[0-9]+\.[0-9] s  world 2 -> 1: node-b killed at [0-9]+\.[0-9] s; training again [0-9]+\.[0-9] s later, from step [0-9]+, [0-9]+ steps? redone$" "$T/summary"
    # ... whose steps are the ones the run resumed from, in order.
    [[ $(sed -n "s/.* from step \([0-9]*\),.*/\1/p" "$T/summary" | paste -sd" ") == \
       "$(sed -n "s/^  node-a ! resumed from checkpoint step \([0-9]*\) .*/\1/p" "$T/demo.txt" | paste -sd" ")" ]]
    grep -Eq "^  final test accuracy [0-9.]+% with the changes, [0-9.]+% without \(1 worker throughout\): [+-][0-9]+\.[0-9]{2} points$" "$T/summary"
    a=$(sed -n "s/^  node-a | final: test accuracy \([0-9.]*\)%.*/\1/p" "$T/demo.txt")
    grep -q "^  final test accuracy $a% with the changes" "$T/summary"
    grep -qx "  the timeline of the world size: $T/demo.svg" "$T/summary"
    # The SVG: well-formed, a step line through 1, 2, 1 workers, both changes labelled.
    python3 -c "import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); assert d.documentElement.tagName == \"svg\"" "$T/demo.svg"
    [[ $(grep -c "&#8594;" "$T/demo.svg") == 2 ]]
    pts=$(sed -n "s/.*<polyline points=\"\([^\"]*\)\".*/\1/p" "$T/demo.svg")
    [[ $(echo $pts | tr " " "\n" | cut -d, -f2 | uniq | wc -l) == 3 ]]
'
fi

# ---- an endpoint that is not a store; SIGTERM/SIGINT in every state ----

# not_a_store KIND: a loopback service that is not a store, in the
# background; sets NS_PORT.  http: python's http.server (it waits for a line
# that never comes); banner: greets with an SSH banner, then says nothing.
not_a_store() {
    rm -f "$T/ns.out"
    case $1 in
    http) python3 -u -m http.server 0 --bind 127.0.0.1 >"$T/ns.out" 2>&1 &
          track_pid $!
          wait_for_line "$T/ns.out" "port [0-9]+" 20
          NS_PORT=$(sed -n "s/.* port \([0-9]*\).*/\1/p" "$T/ns.out" | head -1) ;;
    banner) python3 -u "$T/banner.py" >"$T/ns.out" 2>&1 &
          track_pid $!
          wait_for_line "$T/ns.out" "^[0-9]+$" 20
          NS_PORT=$(head -1 "$T/ns.out") ;;
    esac
}
cat >"$T/banner.py" <<'EOF'
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
conns = []
while True:
    c, _ = s.accept(); c.sendall(b"SSH-2.0-OpenSSH_9.2\r\n"); conns.append(c)
EOF
cat >"$T/silent.py" <<'EOF'
import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
time.sleep(600)
EOF

for kind in http banner; do
test_expect_success "an endpoint that is not a store ($kind): a one-line error, at once" '
    not_a_store '$kind'
    s=$(date +%s%N); st=0
    timeout 30 "$ELRUN" --nnodes=2 --node-rank=1 --master-port=$NS_PORT --no-python /bin/true \
        2>"$T/ns.'$kind'.err" || st=$?
    echo "exit $st after $(( ($(date +%s%N) - s) / 1000000 )) ms"
    cat "$T/ns.'$kind'.err"
    [[ $st == 1 ]]
    grep -q "ERROR elrun\[[0-9]*\] rendezvous failed: cannot reach the rendezvous store at 127.0.0.1:$NS_PORT: the peer does not speak the store protocol" "$T/ns.'$kind'.err"
    # The elastic rendezvous too.
    st=0; timeout 30 "$ELRUN" --nnodes=1:2 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$NS_PORT \
        --rdzv-conf=is_host=0 --no-python /bin/true 2>"$T/ns2.'$kind'.err" || st=$?
    cat "$T/ns2.'$kind'.err"
    [[ $st == 1 ]]
    grep -q "the peer does not speak the store protocol" "$T/ns2.'$kind'.err"
'
done

# obeys SIG READY LOG CMD...: run CMD (its stderr to LOG, at LOGLEVEL=INFO)
# until LOG matches READY, send SIG, and require that it exits 1 within 3 s
# (the agent's target is a second; the slack is for a loaded machine) with
# no worker left (the pids the workers wrote to $T/wp.*).
obeys() {
    local sig=$1 ready=$2 log=$3 pid t0 st=0 ms w
    shift 3
    # The log of the same state under the other signal must not be read
    # before this run truncates it (the signal would come before elrun
    # handles signals at all).
    rm -f "$T"/wp.* "$log"
    LOGLEVEL=INFO ELRUN_RDZV_REPORT_INTERVAL=1 "$@" 2>"$log" &
    pid=$!
    wait_for_line "$log" "$ready" 30
    t0=$(date +%s%N)
    kill -"$sig" "$pid"
    wait_until "! alive $pid" 3
    wait "$pid" || st=$?
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    echo "SIG$sig: exit $st after $ms ms"
    [[ $st == 1 ]]
    grep -q "stopped by signal" "$log"
    for w in "$T"/wp.*; do
        [[ -f $w ]] || continue
        refute alive "$(cat "$w")"
    done
}

# Workers that record their pid; stubborn.sh ignores SIGTERM and its local
# rank 1 fails once rank 0 ignores it (else the stop could end at once).
cat >"$T/stubborn.sh" <<EOF
#!/bin/bash
trap "" TERM
echo \$\$ >$T/wp.\$LOCAL_RANK.tmp && mv $T/wp.\$LOCAL_RANK.tmp $T/wp.\$LOCAL_RANK
if [[ \$LOCAL_RANK == 1 ]]; then
    until [[ -f $T/wp.0 ]]; do sleep 0.01; done
    exit 3
fi
while :; do sleep 1; done
EOF
cat >"$T/sleeper.sh" <<EOF
#!/bin/sh
echo \$\$ >$T/wp.\$LOCAL_RANK
exec sleep 120
EOF
chmod +x "$T/stubborn.sh" "$T/sleeper.sh"

for sig in TERM INT; do
test_expect_success "SIG$sig while joining a store that is not up" '
    obeys '$sig' "still waiting for the rendezvous" "$T/j.err" \
        "$ELRUN" --nnodes=2 --node-rank=1 --master-port=$(free_port) --no-python /bin/true
'
test_expect_success "SIG$sig while joining a silent peer that is not a store" '
    python3 -u "$T/silent.py" >"$T/silent.'$sig'.port" &
    track_pid $!
    wait_for_line "$T/silent.'$sig'.port" "^[0-9]+$" 20
    obeys '$sig' "joining the rendezvous" "$T/js.err" \
        "$ELRUN" --nnodes=2 --node-rank=1 --master-port=$(cat "$T/silent.'$sig'.port") --no-python /bin/true
'
test_expect_success "SIG$sig while waiting for the other nodes (static)" '
    obeys '$sig' "still waiting for the rendezvous" "$T/w.err" \
        "$ELRUN" --nnodes=2 --node-rank=0 --master-port=$(free_port) --no-python /bin/true
'
test_expect_success "SIG$sig while waiting for the other nodes (c10d)" '
    obeys '$sig' "still waiting for the rendezvous" "$T/wc.err" \
        "$ELRUN" --nnodes=2:3 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$(free_port) \
        --no-python /bin/true
'
test_expect_success "SIG$sig while the workers run" '
    obeys '$sig' "starting 2 worker" "$T/r.err" \
        "$ELRUN" --standalone --nproc-per-node=2 --no-python "$T/sleeper.sh"
'
test_expect_success "SIG$sig while stopping workers that ignore SIGTERM" '
    obeys '$sig' "stopping 1 worker\(s\) with signal 15" "$T/s.err" \
        "$ELRUN" --standalone --nproc-per-node=2 --stop-timeout=120 --no-python "$T/stubborn.sh"
    grep -q "received signal [0-9]* (.*) while stopping the workers; killing 1 worker(s) now" "$T/s.err"
'
test_expect_success "SIG$sig in the exit barrier" '
    p=$(free_port)
    "$ELRUN" --nnodes=2 --node-rank=1 --master-port=$p --no-python sleep 120 2>"$T/eb1.err" &
    track_pid $!
    obeys '$sig' "succeeded; waiting for the other nodes" "$T/eb.err" \
        "$ELRUN" --nnodes=2 --node-rank=0 --master-port=$p --no-python /bin/true
'
test_expect_success "SIG$sig while waiting to restart" '
    obeys '$sig' "before restarting" "$T/b.err" \
        "$ELRUN" --standalone --max-restarts=3 --restart-backoff=120 --no-python /bin/false
'
done

test_done

#!/usr/bin/env bash
# The job-wide event history, `elrun events` and `elrun status` of a
# rendezvous (docs/EVENTS.md), with real agents on loopback addresses
# (127.0.0.1..3, --local-addr) running shell workers: on an `elrun store`
# (c10d) and on a real etcd.  The job starts with two nodes, grows to
# three, loses one to SIGKILL and restarts after the worker of the round's
# rank 1 is killed: `elrun events` shows that sequence with its causes
# (worker_failure and whose, though rank 0 emits the round; human and
# --json), members named by their labels (two agents of one --local-addr
# told apart by events, status and elrun dashboard),
# -f sees a new event and stops at SIGTERM, the history outlives the agent
# that wrote part of it, <log-dir>/events.jsonl has the same events;
# `elrun status` shows the members and the world, and `--watch` redraws in
# place under tmux as a person sees it.  Bad flags and an endpoint nobody
# serves are one line each.  --event-log-handler console prints torchrun's
# status event JSON.  A long etcd history is read in a few ranges.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/t01-common.bash"
INFRA="$ROOT/tests/infra"
export ETCD_BASE="$T/etcd"
# The job of `elrun submit` left the script's process tree (setsid): end
# its supervisor and agents (their pid files; an elrun by its cmdline).
jobs_cleanup() {
    local f p
    for f in "$T"/home/jobs/local/*/supervisor.pid "$T"/home/jobs/local/*/replicas/*/pid; do
        [[ -f $f ]] || continue
        p=$(cat "$f")
        tr "\0" " " <"/proc/$p/cmdline" 2>/dev/null | contains elrun && kill -KILL "$p" 2>/dev/null
    done
    return 0
}
trap 'jobs_cleanup; bash "$INFRA/etcd-stop.sh" all >/dev/null 2>&1; _cleanup' EXIT

WORKER='while :; do sleep 0.2; done'
CONF=last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=2

# agent N BACKEND ENDPOINT ID: start node N (127.0.0.N) of job ID; its pid
# in $T/aN.pid, its log in $T/aN.err.
agent() {
    local n=$1 be=$2 ep=$3 id=$4
    "$ELRUN" --nnodes=2:3 --nproc-per-node=1 --rdzv-backend="$be" \
        --rdzv-endpoint="$ep" --rdzv-id="$id" --local-addr="127.0.0.$n" \
        --max-restarts=3 --rdzv-conf "$CONF" --log-dir="$T/logs-$id" \
        --no-python /bin/sh -c "$WORKER" >"$T/a$n.out" 2>"$T/a$n.err" &
    echo $! >"$T/a$n.pid"
    track_pid $!
}
# pagent N BACKEND ENDPOINT ID: node N of job ID (2 nodes, 2 workers each)
# running progress_worker.py (20 steps/s on ELRUN_PROGRESS_FD) with
# --metrics-addr; it stops when $T/stop-ID exists.
PY=${PYTHON_EXEC:-/usr/bin/python3}
pagent() {
    local n=$1 be=$2 ep=$3 id=$4
    PYTHON_EXEC=$PY "$ELRUN" --nnodes=2 --nproc-per-node=2 --rdzv-backend="$be" \
        --rdzv-endpoint="$ep" --rdzv-id="$id" --local-addr="127.0.0.$n" \
        --metrics-addr="127.0.0.$n:0" --rdzv-conf "$CONF" \
        "$ROOT/tests/e2e/py/progress_worker.py" "$T/stop-$id" >"$T/p$n.out" 2>"$T/p$n.err" &
    echo $! >"$T/p$n.pid"
    track_pid $!
}
# progress_case BACKEND ENDPOINT ID: the status of a job whose workers report
# progress shows each member's step and rate and the job's, the step growing;
# at the job's end (c10d) each member keeps its last step.
progress_case() {
    local be=$1 ep=$2 id=$3 s1 s2
    local ST=("$ELRUN" status --rdzv-backend="$be" --rdzv-endpoint="$ep" --rdzv-id="$id")
    pagent 1 "$be" "$ep" "$id"
    pagent 2 "$be" "$ep" "$id"
    wait_until "\"\${ST[@]}\" 2>/dev/null | contains -E \"^step rate: [1-9][0-9.]* steps/s \(the slowest of 2/2 nodes\)\"" 40
    "${ST[@]}" >"$T/ps1.txt"
    cat "$T/ps1.txt"
    grep -Eq "^step rate: [0-9.]+ steps/s \(the slowest of 2/2 nodes\), step [0-9]+, last step [0-9.]+ s ago$" "$T/ps1.txt"
    grep -Eq "^  0    127\.0\.0\.[12]$L +2 +running +[0-9:]{8} +[0-9]+ +[0-9.]+$" "$T/ps1.txt"
    grep -Eq "^  1    127\.0\.0\.[12]$L +2 +running +[0-9:]{8} +[0-9]+ +[0-9.]+$" "$T/ps1.txt"
    # 20 steps/s each (the worker's own pace, loosely: the machine is shared)
    rate=$(sed -n "s/^step rate: \([0-9.]*\) steps.*/\1/p" "$T/ps1.txt")
    python3 -c "import sys; r=float(sys.argv[1]); assert 2 <= r <= 25, r" "$rate"
    s1=$(sed -n "s/^step rate: .*, step \([0-9]*\),.*/\1/p" "$T/ps1.txt")
    wait_until "s2=\$(\"\${ST[@]}\" | sed -n \"s/^step rate: .*, step \\([0-9]*\\),.*/\\1/p\"); (( s2 > s1 ))" 20
    touch "$T/stop-$id"
    wait_until "gone \$(cat $T/p1.pid) && gone \$(cat $T/p2.pid)" 30
    # (etcd: the job's keys go at its end)
    [[ $be != c10d ]] && return 0
    "${ST[@]}" >"$T/ps2.txt"
    cat "$T/ps2.txt"
    grep -q "^state:     succeeded" "$T/ps2.txt"
    grep -Eq "^  1    127\.0\.0\.[12]$L +2 +[a-z]+ +[0-9:]{8} +[0-9]+ " "$T/ps2.txt"
}
# A member's label after its name (el_rdzv_label: 4 hex digits of its id),
# as a grep pattern (basic or -E).
L='/[0-9a-f][0-9a-f][0-9a-f][0-9a-f]'
# label_of LOG NAME: the label the agent of LOG gives itself in its log
# ("this node (NAME/3f2a) is rank 0").
label_of() { grep -o "this node ($2$L)" "$1" | head -1 | sed "s/^this node (//; s/)\$//"; }
# rank1_node EVENTS-CMD...: N of the node (127.0.0.N) that is rank 1 of the
# newest round event.
rank1_node() {
    "$@" --json | python3 -c 'import json, sys
r = [e for e in map(json.loads, sys.stdin) if e["kind"] == "round"][-1]
print(r["fields"]["members"][1].rsplit(".", 1)[1])'
}
# events ARGS...: elrun events of the job, into stdout.
# kinds FILE: the events' kinds, one per line, from human lines.
kinds() { awk '{print $6}' "$1"; }
# worker_of N: the pid of node N's worker.
worker_of() { pgrep -P "$(cat "$T/a$1.pid")" | head -1; }
# alive PID / gone PID (a zombie the script has not waited for is gone)
alive() { local st; st=$(ps -o stat= -p "$1"); [[ -n $st && $st != Z* ]]; }
gone() { local st; st=$(ps -o stat= -p "$1"); [[ -z $st || $st == Z* ]]; }
# etcd_port: a free port below the ephemeral range whose peer port (+10000)
# is free too (etcd binds both).
etcd_port() { low_port 10000; }

# ---- the history of an elastic job: c10d on an elrun store ----

start_store
EP=127.0.0.1:$STORE_PORT
EV=("$ELRUN" events --rdzv-endpoint="$EP" --rdzv-id=j1)

test_expect_success 'a job that grows, loses a node (SIGKILL) and restarts: elrun events tells it in order, with causes' '
    agent 1 c10d "$EP" j1
    agent 2 c10d "$EP" j1
    wait_until "\"\${EV[@]}\" 2>/dev/null | contains \"round .*cause: start\"" 30
    agent 3 c10d "$EP" j1
    wait_until "\"\${EV[@]}\" | contains \"joined: 127.0.0.3$L; left: -); cause: node_joined\"" 30
    kill -KILL "$(cat "$T/a2.pid")"
    wait_until "\"\${EV[@]}\" | contains \"left: 127.0.0.2$L); cause: node_died\"" 30
    # the worker of rank 1 of the round fails: the round after it is
    # emitted by rank 0, another node, and must still say worker_failure
    # and whose (the rendezvous recorded it)
    n=$(rank1_node "${EV[@]}")
    echo "$n" >"$T/failed1"
    wait_until "[[ -n \$(worker_of $n) ]]" 20
    w=$(worker_of "$n")
    kill -KILL "$w"
    wait_until "\"\${EV[@]}\" | contains \"cause: worker_failure (127.0.0.$n$L)\$\"" 30
    # and the recovery that ends it (rank 0 again) names the same cause
    wait_until "\"\${EV[@]}\" | contains \"recovered in [0-9.]* s after a worker_failure\$\"" 30
    refute grep -q "cause: restart" <("${EV[@]}")
    "${EV[@]}" >"$T/ev1.txt"
    cat "$T/ev1.txt"
    kinds "$T/ev1.txt" | tr "\n" " " >"$T/kinds"
    cat "$T/kinds"; echo
    # round 0 of 2 nodes; round 1 of 3 (a node joined); round 2 of 2 (one died);
    # the worker killed: a failure, a restart and round 3.
    grep -Eq "^round (recovery )?round (recovery )?round (recovery )?failure restart round" "$T/kinds"
    grep -q "round 0 .* round    2 nodes, world 2 (joined: -; left: -); cause: start" "$T/ev1.txt"
    grep -q "round    3 nodes, world 3 (joined: 127.0.0.3$L; left: -); cause: node_joined" "$T/ev1.txt"
    grep -q "round    2 nodes, world 2 (joined: -; left: 127.0.0.2$L); cause: node_died" "$T/ev1.txt"
    grep -q "127.0.0.$n$L *failure  rank 1 (local 0, pid $w) on .* was killed by SIGKILL" "$T/ev1.txt"
    grep -q "127.0.0.$n$L *restart  restart 1 of 3 (2 left)" "$T/ev1.txt"
    grep -q "round    2 nodes, world 2 (joined: -; left: -); cause: worker_failure (127.0.0.$n$L)$" "$T/ev1.txt"
    # seq numbers run 1, 2, 3 ... without a gap
    awk "{print \$2}" "$T/ev1.txt" | tr -d "#" >"$T/seqs"
    [[ $(cat "$T/seqs" | tr "\n" " ") == "$(seq 1 "$(wc -l <"$T/seqs")" | tr "\n" " ")" ]]
'

test_expect_success '--json: one JSON object per line, the same events, with their fields' '
    "${EV[@]}" --json >"$T/ev1.json"
    python3 - "$T/ev1.json" "$T/ev1.txt" "$(cat "$T/failed1")" <<-"EOF"
	import json, sys
	evs = [json.loads(l) for l in open(sys.argv[1])]
	n = sys.argv[3]
	human = open(sys.argv[2]).read().splitlines()
	assert len(evs) == len(human), (len(evs), len(human))
	assert [e["seq"] for e in evs] == list(range(1, len(evs) + 1))
	died = [e for e in evs if e["kind"] == "round" and e["fields"]["cause"] == "node_died"]
	assert died and died[0]["fields"]["died"] == ["127.0.0.2"], died
	assert died[0]["fields"]["members"] == ["127.0.0.1", "127.0.0.3"], died
	# labels: the names with 4 hex of the member id, in the same order
	d = died[0]["fields"]
	assert [x.split("/")[0] for x in d["member_labels"]] == d["members"], d
	assert [x.split("/")[0] for x in d["died_labels"]] == ["127.0.0.2"], d
	assert d["left_labels"] == d["died_labels"] and d["joined_labels"] == [], d
	f = [e for e in evs if e["kind"] == "failure"][0]
	assert f["node"] == "127.0.0.%s" % n and f["fields"]["signal"] == 9, f
	assert f["fields"]["signal_name"] == "SIGKILL" and f["fields"]["root_cause"] is True, f
	assert f["label"] in d["member_labels"], (f, d)
	# the round after the failure: emitted by the other node (rank 0), its
	# cause the failure, named by the label of the failed agent
	r = [e for e in evs if e["kind"] == "round"][-1]
	assert r["seq"] > f["seq"] and r["fields"]["cause"] == "worker_failure", r
	assert r["fields"]["failed_node"] == f["label"] != r["label"], (r, f)
	assert r["fields"]["member_labels"][1] == f["label"], r
	for e in evs:
	    assert set(e) == {"seq", "time", "time_ms", "kind", "node", "label", "round", "fields"}, e
	    assert e["label"].split("/")[0] == e["node"], e
	print("json ok:", len(evs), "events")
	EOF
'

test_expect_success 'elrun status: state, round, world against MIN:MAX, every member, restarts, the root cause' '
    "$ELRUN" status --rdzv-endpoint="$EP" --rdzv-id=j1 >"$T/st1.txt"
    cat "$T/st1.txt"
    grep -q "^job j1  (c10d at $EP)" "$T/st1.txt"
    grep -q "^state:     running$" "$T/st1.txt"
    grep -q "^round:     3$" "$T/st1.txt"
    grep -q "^world:     2 nodes, 2 workers (MIN:MAX 2:3)$" "$T/st1.txt"
    grep -q "^restarts:  1 used, 2 left (--max-restarts 3)$" "$T/st1.txt"
    grep -q "^last failure: *rank 1 (local 0, pid [0-9]*) on .* was killed by SIGKILL" "$T/st1.txt"
    # shell workers report no progress: no step, no rate
    grep -Eq "^  [01]    127\.0\.0\.1$L +1 +running +[0-9:]{8} +- +-$" "$T/st1.txt"
    grep -Eq "^  [01]    127\.0\.0\.3$L +1 +running +[0-9:]{8} +- +-$" "$T/st1.txt"
    grep -q "^step rate: not reported (the agents publish it with --metrics-addr" "$T/st1.txt"
    refute grep -q "127.0.0.2 .*running" "$T/st1.txt"
    grep -q "^last events:" "$T/st1.txt"
'

test_expect_success 'elrun status --watch redraws in place under tmux, and stops at Ctrl-C' '
    command -v tmux >/dev/null
    export TMUX_TMPDIR=$T
    # bash, not sh: at Ctrl-C sh dies with its child, bash goes on to say
    # how the child ended
    printf "%s\n" "\"$ELRUN\" status --rdzv-endpoint=$EP --rdzv-id=j1 --watch" \
        "echo EXITED \$?" "sleep 30" >"$T/watch.sh"
    tmux new-session -d -s st -x 120 -y 45 "bash $T/watch.sh"
    wait_until "tmux capture-pane -p -t st | contains \"^world:     2 nodes, 2 workers\"" 20
    tmux capture-pane -p -t st >"$T/pane1.txt"
    cat "$T/pane1.txt"
    # one screen at the top: the title on the first line, drawn once
    head -1 "$T/pane1.txt" | contains "^job j1 "
    [[ $(grep -c "^job j1 " "$T/pane1.txt") == 1 ]]
    agent 2 c10d "$EP" j1
    wait_until "tmux capture-pane -p -t st | contains \"^world:     3 nodes, 3 workers\"" 30
    tmux capture-pane -p -t st >"$T/pane2.txt"
    cat "$T/pane2.txt"
    [[ $(grep -c "^job j1 " "$T/pane2.txt") == 1 ]]
    grep -Eq "^  2    127\.0\.0\.2$L +1 +running" "$T/pane2.txt"
    tmux send-keys -t st C-c
    wait_until "tmux capture-pane -p -t st | contains \"EXITED 0\"" 5
    tmux kill-session -t st
'

test_expect_success 'elrun events -f prints a new event as it comes and stops at SIGTERM at once' '
    "${EV[@]}" -f -n 1 >"$T/follow.txt" 2>&1 &
    fp=$!
    track_pid $fp
    wait_until "[[ -s $T/follow.txt ]]" 10
    kill -TERM "$(cat "$T/a1.pid")"
    wait_until "grep -q \"127.0.0.1$L *leave .*signaled\" $T/follow.txt" 20
    cat "$T/follow.txt"
    kill -TERM $fp
    wait_until "gone $fp" 2
    st=0; wait $fp || st=$?
    [[ $st == 0 ]]
'

test_expect_success 'the history outlives the agents that wrote it; <log-dir>/events.jsonl holds the same events' '
    kill -KILL "$(cat "$T/a3.pid")" "$(cat "$T/a2.pid")" 2>/dev/null || true
    wait_until "gone $(cat "$T/a3.pid")" 10
    "${EV[@]}" >"$T/ev2.txt"
    grep -q "127.0.0.$(cat "$T/failed1")$L *failure  rank 1" "$T/ev2.txt"
    grep -q "127.0.0.1$L *leave" "$T/ev2.txt"
    # every event of the store is a line of the file (several agents appended to it)
    python3 - "$T/logs-j1/events.jsonl" <<-EOF
	import json, subprocess, sys
	file = [json.loads(l) for l in open(sys.argv[1])]
	store = [json.loads(l) for l in subprocess.run(["$ELRUN", "events", "--rdzv-endpoint=$EP",
	         "--rdzv-id=j1", "--json"], capture_output=True, text=True, check=True).stdout.splitlines()]
	assert sorted(e["seq"] for e in file) == [e["seq"] for e in store], (len(file), len(store))
	assert {(e["seq"], e["kind"], e["node"]) for e in file} == {(e["seq"], e["kind"], e["node"]) for e in store}
	print("file ok:", len(file))
	EOF
'

test_expect_success 'elrun status: the step and step rate of every member and of the job (c10d), the step growing' '
    progress_case c10d "$EP" j3
'

test_expect_success 'two agents of one host (one --local-addr): events, status and elrun dashboard name each by its label, as its log does' '
    EV5=("$ELRUN" events --rdzv-endpoint="$EP" --rdzv-id=j5)
    ST5=("$ELRUN" status --rdzv-endpoint="$EP" --rdzv-id=j5)
    for k in a b; do
        "$ELRUN" --nnodes=1:3 --nproc-per-node=1 --rdzv-backend=c10d \
            --rdzv-endpoint="$EP" --rdzv-id=j5 --local-addr=127.0.0.5 \
            --rdzv-conf "$CONF" --no-python /bin/sh -c "$WORKER" >"$T/s$k.out" 2>"$T/s$k.err" &
        echo $! >"$T/s$k.pid"
        track_pid $!
    done
    wait_until "\"\${ST5[@]}\" | contains \"^world:     2 nodes\"" 30
    # each logs its round line once its own rendezvous returns: wait for it
    wait_until "[[ -n \$(label_of $T/sa.err 127.0.0.5) && -n \$(label_of $T/sb.err 127.0.0.5) ]]" 20
    la=$(label_of "$T/sa.err" 127.0.0.5)
    lb=$(label_of "$T/sb.err" 127.0.0.5)
    echo "labels: $la $lb"
    [[ -n $la && -n $lb && $la != "$lb" ]]
    "${EV5[@]}" --json >"$T/ev5.json"
    python3 - "$T/ev5.json" "$la" "$lb" <<-"EOF"
	import json, sys
	evs = [json.loads(l) for l in open(sys.argv[1])]
	r = [e for e in evs if e["kind"] == "round" and e["fields"]["nodes"] == 2][-1]
	assert r["fields"]["members"] == ["127.0.0.5", "127.0.0.5"], r
	assert sorted(r["fields"]["member_labels"]) == sorted(sys.argv[2:]), r
	assert r["label"] == r["fields"]["member_labels"][0] and r["node"] == "127.0.0.5", r
	print("labels ok")
	EOF
    "${ST5[@]}" >"$T/st5.txt"
    cat "$T/st5.txt"
    grep -Eq "^  [01]    $la +1 +running +[0-9:]{8} " "$T/st5.txt"
    grep -Eq "^  [01]    $lb +1 +running +[0-9:]{8} " "$T/st5.txt"
    ("$ELRUN" dashboard --rdzv-endpoint="$EP" --rdzv-id=j5 >"$T/sd5.out" 2>"$T/sd5.err" & echo $! >"$T/sd5.pid"; wait) &
    wait_for_file "$T/sd5.pid" 10
    track_pid "$(cat "$T/sd5.pid")"
    wait_for_line "$T/sd5.err" " dashboard of job .* at http://" 20
    u=$(grep -o "http://[^ ]*/" "$T/sd5.err" | head -1)
    api5() { curl -sf "${u}api/job" | python3 -c "import json,sys; j=json.load(sys.stdin); print(json.dumps($1))"; }
    members5() { api5 "sorted(m[\"id\"] for m in j[\"members\"])"; }
    want=$(python3 -c "import json,sys; print(json.dumps(sorted(sys.argv[1:])))" "$la" "$lb")
    wait_until "[[ \$(members5) == \"\$want\" ]]" 20
    # b is SIGKILLed: its label, not a name it shares, is the one gone
    kill -KILL "$(cat "$T/sb.pid")"
    pkill -KILL -P "$(cat "$T/sb.pid")" 2>/dev/null || true
    wait_until "\"\${EV5[@]}\" | contains -F \"(joined: -; left: $lb); cause: node_died\"" 30
    want="[\"$la\"]"
    wait_until "[[ \$(members5) == \"\$want\" ]]" 20
    [[ $(api5 "[(e[\"kind\"], e[\"node\"]) for e in j[\"events\"] if e[\"kind\"] in (\"death\", \"leave\")]") == "[[\"death\", \"$lb\"]]" ]]
    "${ST5[@]}" >"$T/st5b.txt"
    grep -Eq "^  0    $la +1 +running " "$T/st5b.txt"
    refute grep -qF "$lb " <(sed -n "/^  RANK/,/^$/p" "$T/st5b.txt")
    kill -TERM "$(cat "$T/sd5.pid")" "$(cat "$T/sa.pid")"
    wait_until "gone $(cat "$T/sa.pid") && gone $(cat "$T/sd5.pid")" 20
'

test_expect_success 'bad flags and an endpoint nobody serves: one clear line each' '
    st=0; "$ELRUN" events --rdzv-id=j1 2>"$T/b1" || st=$?
    [[ $st == 2 && $(wc -l <"$T/b1") == 1 ]]
    grep -q "which job? give --rdzv-endpoint=HOST:PORT and --rdzv-id=ID" "$T/b1"
    st=0; "$ELRUN" events --rdzv-endpoint="$EP" --rdzv-id=j1 --bogus 2>"$T/b2" || st=$?
    [[ $st == 2 && $(wc -l <"$T/b2") == 1 ]]
    grep -q "unknown argument .--bogus.; usage: elrun events" "$T/b2"
    st=0; "$ELRUN" status --rdzv-endpoint="$EP" --rdzv-id=j1 --rdzv-backend=static 2>"$T/b3" || st=$?
    [[ $st == 2 && $(wc -l <"$T/b3") == 1 ]]
    grep -q "c10d and etcd rendezvous only" "$T/b3"
    p=$(free_port)
    st=0; "$ELRUN" events --rdzv-endpoint=127.0.0.1:$p --rdzv-id=j1 2>"$T/b4" || st=$?
    [[ $st == 1 && $(wc -l <"$T/b4") == 1 ]]
    grep -q "cannot reach the rendezvous store at 127.0.0.1:$p" "$T/b4"
    st=0; "$ELRUN" status --rdzv-endpoint=127.0.0.1:$p --rdzv-id=j1 2>"$T/b5" || st=$?
    [[ $st == 1 && $(wc -l <"$T/b5") == 1 ]]
    grep -q "^elrun status: error: cannot reach the rendezvous store at 127.0.0.1:$p (Connection refused)" "$T/b5"
    cat "$T/b1" "$T/b2" "$T/b3" "$T/b4" "$T/b5"
'

test_expect_success 'an id with no job: status says so, events prints nothing' '
    "$ELRUN" status --rdzv-endpoint="$EP" --rdzv-id=nosuch >"$T/none.txt"
    grep -q "^state:     not started (no rendezvous state under this id)" "$T/none.txt"
    [[ -z $("${EV[@]/j1/nosuch}") ]]
'

test_expect_success '--event-log-handler console: torchrun'"'"'s status event JSON on stderr' '
    "$ELRUN" --standalone --event-log-handler console --no-python /bin/true 2>"$T/te.err"
    "$ELRUN" --standalone --event-log-handler=console --no-python /bin/false 2>"$T/tf.err" || true
    python3 - "$T/te.err" "$T/tf.err" <<-"EOF"
	import json, sys
	for path in sys.argv[1:]:
	    lines = [l for l in open(path) if l.startswith("{\"name\": ")]
	    assert len(lines) == 1, lines
	    e = json.loads(lines[0])
	    # workers that fail still make agent.run() return: SUCCEEDED, as torchrun
	    assert e["name"] == "torchelastic.worker.status.SUCCEEDED", e
	    assert e["source"] == "AGENT" and e["timestamp"] == 0
	    m = e["metadata"]
	    assert list(m) == ["run_id", "global_rank", "group_rank", "worker_id", "role",
	        "hostname", "state", "total_run_time", "rdzv_backend", "raw_error", "metadata",
	        "agent_restarts", "duration_ms"], list(m)
	    assert m["global_rank"] is None and m["worker_id"] is None and m["raw_error"] is None
	    assert m["role"] == "default" and m["state"] == "SUCCEEDED"
	    assert json.loads(m["metadata"]) == {"group_world_size": 1, "entry_point": "/bin/" + ("true" if path.endswith("/te.err") else "false")}
	    # json.dumps separators, as Python prints it
	    assert lines[0].rstrip("\n") == json.dumps(e), lines[0]
	print("torch events ok")
	EOF
    # SIGTERM: FAILED with a SignalException as raw_error
    "$ELRUN" --standalone --event-log-handler=console --no-python /bin/sh -c "$WORKER" 2>"$T/tt.err" &
    p=$!; track_pid $p
    wait_until "pgrep -P $p >/dev/null" 10
    kill -TERM $p
    wait $p || true
    grep "^{\"name\": \"torchelastic.worker.status.FAILED\"" "$T/tt.err" |
        python3 -c "import json,sys; e=json.loads(sys.stdin.read()); assert \"SignalException: Process\" in e[\"metadata\"][\"raw_error\"], e"
'

test_expect_success 'elrun events HANDLE: a job of elrun submit -s local, from its job directory' '
    export ELRUN_HOME=$T/home
    printf "#!/bin/sh\n%s\n" "$WORKER" >"$T/sleeper.sh"; chmod +x "$T/sleeper.sh"
    h=$("$ELRUN" submit -j 2x1 --no-python "$T/sleeper.sh")
    wait_until "\"$ELRUN\" events $h 2>/dev/null | contains \"round    2 nodes, world 2 .*cause: start\"" 60
    "$ELRUN" events "$h" --json | python3 -c "import json,sys; e=[json.loads(l) for l in sys.stdin]; assert e[0][\"kind\"] == \"round\", e"
    "$ELRUN" cancel "$h"
    st=0; "$ELRUN" events local://elrun/nosuch 2>"$T/nosuch" || st=$?
    [[ $st == 2 ]]
    grep -q "no job local://elrun/nosuch: nothing at" "$T/nosuch"
'

# ---- the same on etcd ----
if ! command -v etcd >/dev/null; then
    test_skip "events and status on etcd" "needs etcd-server (make deps)"
else
    EP_ETCD=$(bash "$INFRA/etcd-start.sh" "$(etcd_port)" 2>"$T/etcd.log") || { cat "$T/etcd.log"; exit 1; }
    EP_ETCD=${EP_ETCD#http://}
    EVE=("$ELRUN" events --rdzv-backend=etcd --rdzv-endpoint="$EP_ETCD" --rdzv-id=j2)
    test_expect_success 'on etcd: the rounds, a death, a restart; elrun status; --json parses' '
        agent 1 etcd "$EP_ETCD" j2
        agent 2 etcd "$EP_ETCD" j2
        wait_until "\"\${EVE[@]}\" 2>/dev/null | contains \"cause: start\"" 40
        agent 3 etcd "$EP_ETCD" j2
        wait_until "\"\${EVE[@]}\" | contains \"joined: 127.0.0.3$L; left: -); cause: node_joined\"" 40
        kill -KILL "$(cat "$T/a2.pid")"
        wait_until "\"\${EVE[@]}\" | contains \"left: 127.0.0.2$L); cause: node_died\"" 40
        # the worker of rank 1 fails; rank 0 says so
        n=$(rank1_node "${EVE[@]}")
        wait_until "[[ -n \$(worker_of $n) ]]" 20
        kill -KILL "$(worker_of "$n")"
        wait_until "\"\${EVE[@]}\" | contains \"cause: worker_failure (127.0.0.$n$L)\$\"" 40
        "${EVE[@]}" | tee "$T/ev3.txt"
        refute grep -q "cause: restart" "$T/ev3.txt"
        kinds "$T/ev3.txt" | tr "\n" " " | contains -E "failure restart round"
        refute grep -q " 127\.0\.0\.$n$L *round .*cause: worker_failure" "$T/ev3.txt"
        "${EVE[@]}" --json | python3 -c "import json,sys; k=[json.loads(l)[\"kind\"] for l in sys.stdin]; assert \"failure\" in k and \"restart\" in k, k"
        "$ELRUN" status --rdzv-backend=etcd --rdzv-endpoint="$EP_ETCD" --rdzv-id=j2 | tee "$T/st3.txt"
        grep -q "^state:     running$" "$T/st3.txt"
        grep -q "^world:     2 nodes, 2 workers (MIN:MAX 2:3)$" "$T/st3.txt"
        grep -q "^restarts:  1 used, 2 left" "$T/st3.txt"
        grep -Eq "^  [01]    127\.0\.0\.3$L +1 +running" "$T/st3.txt"
        # -f on etcd: a new event (a node leaves) comes through the watch
        "${EVE[@]}" -f -n 1 >"$T/follow3.txt" 2>&1 &
        fp=$!; track_pid $fp
        wait_until "[[ -s $T/follow3.txt ]]" 10
        kill -TERM "$(cat "$T/a3.pid")"
        wait_until "grep -q \"127.0.0.3$L *leave\" $T/follow3.txt" 20
        kill -TERM $fp
        wait_until "gone $fp" 2
        kill -TERM "$(cat "$T/a1.pid")"
    '
    test_expect_success 'on etcd: the step and step rate in elrun status' '
        progress_case etcd "$EP_ETCD" j4
    '
    # ranges NAME: how many Range requests etcd has served (its /metrics)
    ranges() {
        curl -sf "http://$EP_ETCD/metrics" |
            awk '/^grpc_server_handled_total\{.*grpc_method="Range"/ { n += $2 } END { print n + 0 }'
    }
    test_expect_success 'on etcd: a long history is read in a few range requests, a lost event skipped, -n N by the slot' '
        # 1200 events written as the agents write them, seq 500 counted
        # but lost (its writer died between its two requests)
        python3 "$ROOT/tests/e2e/py/etcd_events.py" "$EP_ETCD" j6 1200 500
        EV6=("$ELRUN" events --rdzv-backend=etcd --rdzv-endpoint="$EP_ETCD" --rdzv-id=j6)
        r0=$(ranges)
        "${EV6[@]}" --json >"$T/ev6.json"
        r1=$(ranges)
        echo "Range requests for 1200 events: $((r1 - r0))"
        (( r1 - r0 <= 20 ))
        python3 - "$T/ev6.json" <<-"EOF"
	import json, sys
	seqs = [json.loads(l)["seq"] for l in open(sys.argv[1])]
	assert seqs == [s for s in range(1, 1201) if s != 500], (len(seqs), seqs[:3], seqs[-3:])
	EOF
        [[ $("${EV6[@]}" -n 3 --json | python3 -c "import json,sys; print([json.loads(l)[\"seq\"] for l in sys.stdin])") == "[1198, 1199, 1200]" ]]
    '
fi

test_done

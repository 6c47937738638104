#!/usr/bin/env bash
# The live dashboard (docs/DASHBOARD.md) in a real headless browser: an
# `elrun store` and an elastic job (c10d, 2:3 nodes, one worker each, a
# Python worker reporting step and loss); it starts with agents A and B,
# grows when C joins, and loses a node when C's agent is SIGKILLed.  The
# page of A (--dashboard-addr, port 0), opened in Debian's chromium driven
# by playwright-core (tests/browser), shows the world sizes 2, 3, 2 on its
# timeline, the join and the death marked and listed with C's id, the two
# members left, the step rate and loss; /api/job agrees with what the page
# shows; the page loads nothing but its own server's files.  The
# screenshot is kept: $BUILD/artifacts/t0920-dashboard/ and
# $BUILD/artifacts/dashboard.png.  `elrun dashboard`, started only after
# the grow and the death, tells the same story from the job's event
# history (on the store, and on a real etcd when there is one).  The flags
# are checked first, without a browser.
. "$(dirname "$0")/lib.sh"
PY=${PYTHON_EXEC:-/usr/bin/python3}
W="$ROOT/tests/e2e/py/progress_worker.py"
DRIVER="$ROOT/tests/browser/dashboard.js"
ART="$ROOT/$BUILD/artifacts/t0920-dashboard"

# url_of WHAT LOG: the "WHAT at http://H:P/..." URL an agent logged.
url_of() { sed -n "s|.* $1 at \(http://[^ ]*\)$|\1|p" "$2" | head -1; }
# api URL EXPR: a Python expression over the /api/job document j.
# exited PID: the process is gone or a zombie (not waited for yet).
exited() { local st; st=$(ps -o stat= -p "$1"); [[ -z $st || $st == Z* ]]; }
api() { curl -sf "$1api/job" | "$PY" -c "import json,sys; j=json.load(sys.stdin); print($2)"; }
# A member's label after its name (4 hex digits of its id), a grep pattern.
L='/[0-9a-f][0-9a-f][0-9a-f][0-9a-f]'
# label_of LOG NAME: the label the agent of LOG gives itself ("this node
# (NAME/3f2a) is rank 0").
label_of() { grep -o "this node ($2$L)" "$1" | head -1 | sed "s/^this node (//; s/)\$//"; }

# ---- the flags ----
test_expect_success 'a bad --dashboard-addr is a usage error (exit 2, one line saying what to give); a port in use fails the start' '
    st=0; "$ELRUN" --standalone --dashboard-addr=nope --no-python true 2>"$T/bad.err" || st=$?
    [[ $st == 2 ]]
    grep -q "dashboard-addr needs HOST:PORT (for example 127.0.0.1:8080, or port 0 for a free one), got .nope." "$T/bad.err"
    [[ $(wc -l <"$T/bad.err") == 1 ]]
    "$PY" -c "import socket,time; s=socket.socket(); s.bind((\"127.0.0.1\",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(30)" >"$T/busy" &
    track_pid $!
    wait_until "[[ -s $T/busy ]]" 10
    st=0; "$ELRUN" --standalone --dashboard-addr="127.0.0.1:$(cat "$T/busy")" --no-python true 2>"$T/busy.err" || st=$?
    [[ $st == 1 ]]
    grep -q "choose another port" "$T/busy.err"
'
test_expect_success 'PET_DASHBOARD_ADDR: the URL is logged at the default level; one server answers /, its assets, /api/job, /metrics and 404s the rest' '
    PET_DASHBOARD_ADDR=127.0.0.1:0 "$ELRUN" --standalone --no-python \
        "$PY" "$W" "$T/one.stop" --loss >"$T/one.out" 2>"$T/one.err" &
    pid=$!; track_pid $pid
    wait_until "[[ -n \$(url_of dashboard $T/one.err) ]]" 20
    u=$(url_of dashboard "$T/one.err")
    [[ $u =~ ^http://127\.0\.0\.1:[0-9]+/$ ]]
    [[ $(url_of metrics "$T/one.err") == "${u}metrics" ]]
    curl -sf "$u" | contains "<title>elrun dashboard</title>"
    curl -sfI "${u}dash.js" | contains -i "^content-type: text/javascript"
    curl -sf "${u}dash.css" >/dev/null
    wait_until "[[ \$(api $u \"j[\\\"workers\\\"][0][\\\"loss\\\"] is not None\" 2>/dev/null) == True ]]" 20
    curl -sf "${u}metrics" | contains "^elrun_worker_step{"
    code=$(curl -s -o "$T/404" -w "%{http_code}" "${u}nope")
    [[ $code == 404 ]]
    grep -q "elrun serves / (the dashboard), /api/job (its JSON) and /metrics" "$T/404"
    touch "$T/one.stop"; wait $pid
'
test_expect_success 'the same address for --metrics-addr and --dashboard-addr is one server; two addresses are two' '
    "$ELRUN" --standalone --metrics-addr=127.0.0.1:0 --dashboard-addr=127.0.0.1:0 \
        --no-python true 2>"$T/same.err"
    d=$(url_of dashboard "$T/same.err")
    [[ -n $d && $(url_of metrics "$T/same.err") == "${d}metrics" ]]
    [[ $(grep -c " metrics at " "$T/same.err") == 1 ]]
    "$ELRUN" --standalone --metrics-addr=127.0.0.1:0 --dashboard-addr=127.0.0.2:0 \
        --no-python true 2>"$T/two.err"
    [[ $(url_of metrics "$T/two.err") =~ ^http://127\.0\.0\.1:[0-9]+/metrics$ ]]
    [[ $(url_of dashboard "$T/two.err") =~ ^http://127\.0\.0\.2:[0-9]+/$ ]]
    "$ELRUN" --standalone --metrics-addr=127.0.0.1:0 --no-python true 2>"$T/m.err"
    refute grep -q "dashboard at" "$T/m.err"
'
test_expect_success 'elrun dashboard: bad flags exit 2 (one line), an endpoint nobody serves exits 1 (one line), --help 0' '
    for bad in "--rdzv-endpoint=127.0.0.1:1" "--rdzv-id=x --rdzv-endpoint=127.0.0.1:1 --nnodes=2:3" \
        "--rdzv-id=x --rdzv-endpoint=127.0.0.1:1 --rdzv-backend=static" \
        "--rdzv-id=x --rdzv-endpoint=127.0.0.1:1 --dashboard-addr=nope" "--rdzv-id=x --rdzv-endpoint=127.0.0.1:1 --dashboard-addr"; do
        st=0; "$ELRUN" dashboard $bad 2>>"$T/sdu.err" || st=$?
        [[ $st == 2 && $(wc -l <"$T/sdu.err") == 1 ]]
        cat "$T/sdu.err" >>"$T/sdu.all"; rm "$T/sdu.err"
    done
    grep -q "which job? give --rdzv-endpoint=HOST:PORT and --rdzv-id=ID" "$T/sdu.all"
    grep -q "unknown argument .--nnodes=2:3." "$T/sdu.all"
    grep -q "rdzv-backend=static: the history and status are kept by the c10d and etcd rendezvous only" "$T/sdu.all"
    grep -q "dashboard-addr needs HOST:PORT (for example 127.0.0.1:8080, or port 0 for a free one), got .nope." "$T/sdu.all"
    grep -q "dashboard-addr needs a value" "$T/sdu.all"
    st=0; "$ELRUN" dashboard --rdzv-id=x --rdzv-endpoint=127.0.0.1:1 >"$T/sdx.out" 2>"$T/sdx.err" || st=$?
    [[ $st == 1 && $(wc -l <"$T/sdx.err") == 1 ]]
    grep -q "elrun dashboard: error: .*127.0.0.1:1" "$T/sdx.err"
    refute grep -q "dashboard of job" "$T/sdx.err"
    "$ELRUN" dashboard --help | contains "^usage: elrun dashboard --rdzv-endpoint=HOST:PORT --rdzv-id=ID"
'

# sdash NAME ARGS...: `elrun dashboard ARGS` in the background (its pid in
# $T/NAME.pid, its exit code in $T/NAME.rc once it ends, its log in
# $T/NAME.err); NAME_URL its page's URL.
sdash() {
    local n=$1; shift
    ("$ELRUN" dashboard "$@" >"$T/$n.out" 2>"$T/$n.err" &
        echo $! >"$T/$n.pid"; st=0; wait $! || st=$?; echo $st >"$T/$n.rc") &
    track_pid $!
    wait_for_file "$T/$n.pid" 10
    track_pid "$(cat "$T/$n.pid")"
    wait_for_line "$T/$n.err" ' dashboard of job .* at http://' 20
    printf -v "${n}_URL" '%s' "$(sed -n "s|.* dashboard of job [^ ]* at \(http://[^ ]*\)$|\1|p" "$T/$n.err")"
}

# ---- elrun dashboard of a job on etcd, started after a grow and a death ----
if ! command -v etcd >/dev/null; then
    test_skip "elrun dashboard on etcd" "needs etcd-server (make deps)"
else
    export ETCD_BASE="$T/etcd"
    trap 'bash "$ROOT/tests/infra/etcd-stop.sh" all >/dev/null 2>&1; _cleanup' EXIT
    # A free client port below the ephemeral range, its peer port (+10000) free too.
    EPORT=$(low_port 10000)
    EP_ETCD=$(bash "$ROOT/tests/infra/etcd-start.sh" "$EPORT" 2>"$T/etcd.log") || { cat "$T/etcd.log"; exit 1; }
    EP_ETCD=${EP_ETCD#http://}
    EV=("$ELRUN" events --rdzv-backend=etcd --rdzv-endpoint="$EP_ETCD" --rdzv-id=dash2)
    eagent() { # N: node 127.0.0.N of job dash2 on etcd; its pid in $T/eN.pid
        PYTHON_EXEC=$PY "$ELRUN" --nnodes=2:3 --nproc-per-node=1 --local-addr="127.0.0.$1" \
            --rdzv-backend=etcd --rdzv-endpoint="$EP_ETCD" --rdzv-id=dash2 \
            --rdzv-conf=last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=2 \
            --max-restarts=2 "$W" "$T/estop" >"$T/e$1.out" 2>"$T/e$1.err" &
        echo $! >"$T/e$1.pid"
        track_pid $!
    }
    eagent 1
    eagent 2
    wait_until "\"\${EV[@]}\" 2>/dev/null | contains \"cause: start\"" 40
    eagent 3
    wait_until "\"\${EV[@]}\" | contains \"cause: node_joined\"" 40
    # the round event comes from rank 0; node 3 logs its own round line (its
    # label, read below) once its rendezvous returns: not killed before that
    wait_until "[[ -n \$(label_of $T/e3.err 127.0.0.3) ]]" 20
    kill -KILL "$(cat "$T/e3.pid")"
    pkill -KILL -P "$(cat "$T/e3.pid")" 2>/dev/null || true
    wait_until "\"\${EV[@]}\" | contains \"left: 127.0.0.3$L); cause: node_died\"" 40
    # and a worker SIGKILLed: a failure, a restart, a round of the same 2
    wait_until "[[ -n \$(pgrep -P $(cat "$T/e1.pid")) ]]" 20
    kill -KILL "$(pgrep -P "$(cat "$T/e1.pid")")"
    wait_until "\"\${EV[@]}\" | contains \"cause: worker_failure (127.0.0.1$L)\$\"" 40
    sdash esd --rdzv-backend=etcd --rdzv-endpoint="$EP_ETCD" --rdzv-id=dash2
    test_expect_success 'on etcd: elrun dashboard, started after the grow, the death and a worker failure, shows world sizes 2, 3, 2, 2, the join and the death of 127.0.0.3, the failure and the restart, MIN:MAX and the budget; the end; SIGTERM exits 0' '
        wait_until "[[ \$(api $esd_URL \"[p[\\\"nodes\\\"] for p in j[\\\"timeline\\\"]]\") == \"[2, 3, 2, 2]\" ]]" 20
        e() { curl -sf "${esd_URL}api/job" | "$PY" -c "import json,sys; j=json.load(sys.stdin); print(json.dumps($1))"; }
        # members named by their labels, as each agent logs its own
        l1=$(label_of "$T/e1.err" 127.0.0.1); l2=$(label_of "$T/e2.err" 127.0.0.2); l3=$(label_of "$T/e3.err" 127.0.0.3)
        echo "labels: $l1 $l2 $l3"
        [[ -n $l1 && -n $l2 && -n $l3 ]]
        is "$(e "[(x[\"kind\"], x[\"node\"]) for x in j[\"events\"] if x[\"kind\"] in (\"join\", \"leave\", \"death\")]")" "[[\"join\", \"$l3\"], [\"death\", \"$l3\"]]"
        is "$(e "sorted(m[\"id\"] for m in j[\"members\"])")" "[\"$l1\", \"$l2\"]"
        is "$(e "[j[\"job\"][k] for k in (\"min_nodes\", \"max_nodes\", \"max_restarts\")]")" "[2, 3, 2]"
        is "$(e "[j[\"restarts\"], j[\"restarts_left\"]]")" "[1, 1]"
        is "$(e "[(x[\"signal\"], x[\"round\"]) for x in j[\"events\"] if x[\"kind\"] == \"failure\"]")" "[[9, 2]]"
        e "[x[\"text\"] for x in j[\"events\"] if x[\"kind\"] == \"failure\"]" | contains -F "on $l1 failed (SIGKILL)"
        is "$(e "[x[\"kind\"] for x in j[\"events\"] if x[\"kind\"] in (\"failure\", \"restart\", \"round\")][-3:]")" "[\"failure\", \"restart\", \"round\"]"
        touch "$T/estop"
        wait_until "[[ \$(api $esd_URL \"j[\\\"state\\\"]\") == succeeded ]]" 30
        kill -TERM "$(cat "$T/esd.pid")"
        wait_for_file "$T/esd.rc" 3
        [[ $(cat "$T/esd.rc") == 0 ]]
    '
fi

# ---- a job that grows and loses a node, seen in chromium ----
browser_ok() { command -v chromium >/dev/null && [[ -d $ROOT/tests/browser/node_modules/playwright-core ]]; }
browser_ok || "$ROOT/scripts/deps.sh" >&2 || true
if ! browser_ok; then
    test_skip "the dashboard in a headless browser" \
        "chromium or tests/browser's playwright-core could not be installed (make deps as root)"
    test_done; exit
fi

start_store
KA="last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=2"
declare -A AGENT_PID
# Each agent its own loopback address (--local-addr: its name in the
# rendezvous, the name the job's events give it): a 127.0.0.1, b .2, c .3.
declare -A ADDR=([a]=127.0.0.1 [b]=127.0.0.2 [c]=127.0.0.3)
agent() { # NAME [FLAGS...]
    local n=$1; shift
    PYTHON_EXEC=$PY "$ELRUN" --nnodes=2:3 --nproc-per-node=1 --local-addr="${ADDR[$n]}" \
        --rdzv-backend=c10d --rdzv-endpoint="127.0.0.1:$STORE_PORT" \
        --rdzv-id=dash1 --rdzv-conf="is_host=false,$KA" --max-restarts=3 \
        --restart-backoff=0 "$@" "$W" "$T/stop" --loss >"$T/$n.out" 2>"$T/$n.err" &
    AGENT_PID[$n]=$!
    track_pid $!
}
agent a --dashboard-addr=127.0.0.1:0
agent b
wait_for_line "$T/a.err" ' dashboard at http://' 20
U=$(url_of dashboard "$T/a.err")

test_expect_success 'two agents: the dashboard of A says round 0, 2 nodes, 2 workers, both members' '
    wait_until "[[ \$(api $U \"j[\\\"nodes\\\"], j[\\\"state\\\"]\" 2>/dev/null) == \"2 healthy\" ]]" 60
    [[ $(api "$U" "len(j[\"members\"])") == 2 ]]
    [[ $(api "$U" "j[\"world\"]") == 2 ]]
'
agent c
test_expect_success 'C joins: a round of 3 nodes' '
    wait_until "[[ \$(api $U \"j[\\\"nodes\\\"], j[\\\"state\\\"]\" 2>/dev/null) == \"3 healthy\" ]]" 60
    api "$U" "[m[\"id\"] for m in j[\"members\"]]" | contains "#${AGENT_PID[c]}#"
'
# C's id ("host#pid#nonce") as A's dashboard lists it.
C_ID=$(api "$U" "[m[\"id\"] for m in j[\"members\"] if \"#${AGENT_PID[c]}#\" in m[\"id\"]][0]")
# and its label, the name the texts give it ("host/3f2a")
C_LABEL=$(api "$U" "[m[\"label\"] for m in j[\"members\"] if m[\"id\"] == \"$C_ID\"][0]")
kill -KILL "${AGENT_PID[c]}"
pkill -KILL -P "${AGENT_PID[c]}" 2>/dev/null || true

test_expect_success 'C SIGKILLed: A runs a round of 2 nodes again' '
    wait_until "[[ \$(api $U \"j[\\\"nodes\\\"], j[\\\"state\\\"]\" 2>/dev/null) == \"2 healthy\" ]]" 60
    wait_until "[[ \$(api $U \"sum(e[\\\"kind\\\"] == \\\"death\\\" for e in j[\\\"events\\\"])\") == 1 ]]" 20
'

# `elrun dashboard` only now, after the grow and the death: the job's
# history tells it what came before.
SD_T0=$("$PY" -c "import time; print(int(time.time() * 1000))")
sdash sd --rdzv-endpoint="127.0.0.1:$STORE_PORT" --rdzv-id=dash1

mkdir -p "$ART"
rm -f "$ART"/*
# The page is read once the new round's workers report their step rate.
WAIT="document.getElementById('world-nodes').textContent === '2' && document.querySelectorAll('#events li[data-kind=death]').length === 1 && document.querySelectorAll('#workers tbody tr').length === 1 && document.getElementById('step-rate').textContent !== '\u2013'"
# p EXPR: a Python expression over the page as read (s) and /api/job
# fetched right after (j), printed as JSON ("2", "[2, 3, 2]", "true").
p() { "$PY" -c "import json; s=json.load(open(\"$ART/page.json\")); j=json.load(open(\"$ART/api.json\")); print(json.dumps($1))"; }
test_expect_success 'the page in chromium: world sizes 2, 3, 2 on the timeline, the join and the death marked and listed, 2 members, step rate and loss' '
    node "$DRIVER" "$U" "$ART/page.json" "$ART/dashboard.png" "$WAIT" "$ART/timeline.svg"
    curl -sf "${U}api/job" >"$ART/api.json"
    [[ $(p "[s[\"conn\"], s[\"nodes\"], s[\"workers\"], s[\"state\"]]") == "[\"live\", \"2\", \"2\", \"healthy\"]" ]]
    [[ $(p "s[\"points\"]") == "[2, 3, 2]" ]]
    [[ $(p "sorted(set(s[\"marks\"]) & {\"join\", \"death\"})") == "[\"death\", \"join\"]" ]]
    [[ $(p "[e[\"kind\"] for e in s[\"events\"]].count(\"death\")") == 1 ]]
    [[ $C_LABEL == "${C_ID%%#*}/${C_ID: -4}" ]]
    p "[e[\"text\"] for e in s[\"events\"] if e[\"kind\"] == \"death\"]" | contains -F "node $C_LABEL died"
    p "[e[\"text\"] for e in s[\"events\"] if e[\"kind\"] == \"join\"]" | contains -F "node $C_LABEL joined"
    [[ $(p "len(s[\"members\"])") == 2 ]]
    refute grep -qF "$C_ID" <(p "s[\"members\"]")
    p "s[\"members\"]" | contains -F "#${AGENT_PID[a]}#"
    p "s[\"members\"]" | contains -F "#${AGENT_PID[b]}#"
    [[ $(p "float(s[\"step_rate\"]) > 1") == true ]]
    [[ $(p "0 < float(s[\"loss\"]) < 2") == true ]]
    [[ $(p "1 < s[\"loss_points\"] <= len(j[\"loss\"])") == true ]]
    [[ $(p "s[\"page_errors\"]") == "[]" ]]
    [[ $(p "all(r.startswith(\"$U\") for r in s[\"requests\"])") == true ]]
    [[ -s $ART/dashboard.png ]]
    cp "$ART/dashboard.png" "$ROOT/$BUILD/artifacts/dashboard.png"
'
test_expect_success 'the timeline exported as a standalone SVG file: the world line, 3 round points, the join and death marks, styles inlined' '
    x() { "$PY" -c "import json, xml.etree.ElementTree as E; r=E.parse(\"$ART/timeline.svg\").getroot(); N=\"{http://www.w3.org/2000/svg}\"; print(json.dumps($1))"; }
    [[ $(x "r.tag") == "\"{http://www.w3.org/2000/svg}svg\"" ]]
    [[ $(x "[c.get(\"data-nodes\") for c in r.iter(N + \"circle\") if c.get(\"class\") == \"point\"]") == "[\"2\", \"3\", \"2\"]" ]]
    [[ $(x "sorted(g.get(\"data-kind\") for g in r.iter(N + \"g\") if g.get(\"data-kind\") in (\"join\", \"death\"))") == "[\"death\", \"join\"]" ]]
    x "[p.get(\"style\") for p in r.iter(N + \"path\") if p.get(\"data-series\") == \"world\"][0]" | contains "stroke:rgb(31, 111, 235)"
    cp "$ART/timeline.svg" "$ROOT/$BUILD/artifacts/timeline.svg"
'
test_expect_success '/api/job agrees with the page: sizes, timeline, events, members' '
    [[ $(p "[p[\"nodes\"] for p in j[\"timeline\"]] == s[\"points\"]") == true ]]
    [[ $(p "[p[\"world\"] for p in j[\"timeline\"]]") == "[2, 3, 2]" ]]
    [[ $(p "[m[\"id\"] for m in j[\"members\"]] == s[\"members\"]") == true ]]
    [[ $(p "[j[\"nodes\"], j[\"world\"], j[\"job\"][\"min_nodes\"], j[\"job\"][\"max_nodes\"]]") == "[2, 2, 2, 3]" ]]
    [[ $(p "[e[\"node\"] for e in j[\"events\"] if e[\"kind\"] in (\"join\", \"death\")]") == "[\"$C_ID\", \"$C_ID\"]" ]]
    [[ $(p "[e[\"kind\"] for e in j[\"events\"]] == [e[\"kind\"] for e in reversed(s[\"events\"])]") == true ]]
    [[ $(p "all(e[\"text\"] in x[\"text\"] for e, x in zip(j[\"events\"], reversed(s[\"events\"])))") == true ]]
    [[ $(p "[e[\"kind\"] for e in j[\"events\"]].count(\"recovery\") >= 2") == true ]]
'
# The story `elrun dashboard` must tell of job dash1 (EXPR over its /api/job
# j and A's a, in $ART/NAME-api.json and $ART/api.json).
q() { "$PY" -c "import json; j=json.load(open(\"$ART/$1-api.json\")); a=json.load(open(\"$ART/api.json\")); print(json.dumps($2))"; }
test_expect_success 'elrun dashboard, started after the grow and the death, tells the whole story from the history: world sizes 2, 3, 2 from before it started, the join and the death of C, the same members, MIN:MAX and the budget; its page in chromium too' '
    wait_until "[[ \$(api $sd_URL \"[p[\\\"nodes\\\"] for p in j[\\\"timeline\\\"]]\") == \"[2, 3, 2]\" ]]" 20
    curl -sf "${sd_URL}api/job" >"$ART/sd-api.json"
    [[ $(q sd "[p[\"t_ms\"] < $SD_T0 for p in j[\"timeline\"]]") == "[true, true, true]" ]]
    [[ $(q sd "[e[\"node\"] for e in j[\"events\"] if e[\"kind\"] in (\"join\", \"death\")]") == "[\"$C_LABEL\", \"$C_LABEL\"]" ]]
    [[ $(q sd "[e[\"kind\"] for e in j[\"events\"] if e[\"kind\"] in (\"join\", \"leave\", \"death\")]") == "[\"join\", \"death\"]" ]]
    [[ $(q sd "sorted(m[\"id\"] for m in j[\"members\"]) == sorted(m[\"label\"] for m in a[\"members\"])") == true ]]
    [[ $(q sd "[m[\"workers\"] for m in j[\"members\"]]") == "[1, 1]" ]]
    [[ $(q sd "[j[\"state\"], j[\"round\"], j[\"nodes\"], j[\"world\"]]") == "[\"running\", 2, 2, 2]" ]]
    [[ $(q sd "[j[\"job\"][k] for k in (\"min_nodes\", \"max_nodes\", \"max_restarts\", \"nproc_per_node\")]") == "[2, 3, 3, null]" ]]
    [[ $(q sd "[j[\"restarts\"], j[\"restarts_left\"]]") == "[0, 3]" ]]
    [[ $(q sd "[e[\"text\"] for e in j[\"events\"] if e[\"kind\"] == \"round\"]") == "[\"round 0: 2 nodes, 2 workers (start)\", \"round 1: 3 nodes, 3 workers (node_joined)\", \"round 2: 2 nodes, 2 workers (node_died)\"]" ]]
    [[ $(q sd "[e[\"kind\"] for e in j[\"events\"]].count(\"recovery\") >= 2") == true ]]
    node "$DRIVER" "$sd_URL" "$ART/sd-page.json" "$ART/dashboard-job.png" \
        "document.querySelectorAll(\"#events li[data-kind=death]\").length === 1"
    [[ $("$PY" -c "import json; s=json.load(open(\"$ART/sd-page.json\")); print(s[\"points\"], s[\"nodes\"], s[\"page_errors\"])") == "[2, 3, 2] 2 []" ]]
'
touch "$T/stop"
# Waited for here, not in a case (a case is a subshell): at most 30 s each.
declare -A ST
for n in a b; do
    until exited "${AGENT_PID[$n]}" || ((SECONDS > ${DEADLINE:=$((SECONDS + 30))})); do sleep 0.05; done
    exited "${AGENT_PID[$n]}" || kill -TERM "${AGENT_PID[$n]}"
    ST[$n]=0; wait "${AGENT_PID[$n]}" || ST[$n]=$?
done
test_expect_success 'the job ends: A and B exit 0 once their workers are done' '
    [[ ${ST[a]} == 0 && ${ST[b]} == 0 ]]
'
test_expect_success 'elrun dashboard: the job shown ended (succeeded); SIGTERM ends it at once with 0' '
    wait_until "[[ \$(api $sd_URL \"j[\\\"state\\\"]\") == succeeded ]]" 20
    grep -q "the job ended: succeeded" "$T/sd.err"
    kill -TERM "$(cat "$T/sd.pid")"
    wait_for_file "$T/sd.rc" 3
    [[ $(cat "$T/sd.rc") == 0 ]]
'
test_done

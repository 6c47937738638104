#!/usr/bin/env bash
# Metrics as a real Prometheus sees them: an `elrun store` and two agents of
# one elastic job (c10d on that store) serve /metrics (--metrics-addr with
# port 0); Prometheus (Debian's, on 127.0.0.1 with an ephemeral port, its
# own config and data under $T, a 1 s scrape interval, the alerting rules
# of deploy/prometheus loaded) scrapes them, and its HTTP API answers: the
# job's size and round, the workers' progress (reported by a Python script
# with no elrun package), the store's connections and ops; after a worker
# is killed with SIGKILL, one restart, the exit by signal, a detection
# sample and a recovery sample; the restart-budget alert pending; and when
# an agent dies, its target down and the other agent stuck in the
# rendezvous.
. "$(dirname "$0")/lib.sh"
PY=${PYTHON_EXEC:-/usr/bin/python3}
W="$ROOT/tests/e2e/py/progress_worker.py"

if ! command -v prometheus >/dev/null; then
    test_skip "metrics scraped by Prometheus" "needs Debian's prometheus (make deps)"
    test_done; exit
fi

# metrics_port LOG: the port of the "metrics at http://H:P/metrics" line.
metrics_port() { sed -n 's|.*metrics at http://.*:\([0-9]*\)/metrics$|\1|p' "$1" | head -1; }

# promq EXPR: the value of the one-element vector `EXPR` (wrap it in sum()
# or count()), or "none" when the vector is empty.
promq() {
    local out
    out=$(curl -sfG "http://127.0.0.1:$PROM_PORT/api/v1/query" \
          --data-urlencode "query=$1") || { echo error; return; }
    if [[ $out == *'"result":[]'* ]]; then echo none; return; fi
    sed -n 's/.*"value":\[[^,]*,"\([^"]*\)"\].*/\1/p' <<<"$out"
}
# exited PID: the process is gone or a zombie (the script has not waited).
exited() { local st; st=$(ps -o stat= -p "$1"); [[ -z $st || $st == Z* ]]; }
# promq_is EXPR VALUE: promq EXPR prints VALUE (else it says what it got).
promq_is() {
    local got; got=$(promq "$1")
    [[ $got == "$2" ]] || { echo "promq: $1 = $got, expected $2" >&2; return 1; }
}

# ---- the flags, without Prometheus ----
test_expect_success 'PET_METRICS_ADDR serves /metrics and the URL is logged at the default level; workers get ELRUN_PROGRESS_FD' '
    PET_METRICS_ADDR=127.0.0.1:0 "$ELRUN" --standalone --no-python \
        sh -c "echo fd=\$ELRUN_PROGRESS_FD" >"$T/env.on" 2>"$T/env.on.err"
    grep -qE "metrics at http://127\.0\.0\.1:[0-9]+/metrics$" "$T/env.on.err"
    grep -qE "^fd=[0-9]+$" "$T/env.on"
'
test_expect_success 'without --metrics-addr: no progress fd, an inherited ELRUN_PROGRESS_FD is not passed on' '
    ELRUN_PROGRESS_FD=7 "$ELRUN" --standalone --no-python \
        sh -c "echo fd=\${ELRUN_PROGRESS_FD-unset}" >"$T/env.off" 2>"$T/env.off.err"
    grep -qx "fd=unset" "$T/env.off"
    refute grep -q "metrics at" "$T/env.off.err"
'
test_expect_success 'a bad --metrics-addr is a usage error (exit 2, one line), a port in use fails the start' '
    st=0; "$ELRUN" --standalone --metrics-addr=nope --no-python true 2>"$T/bad.err" || st=$?
    [[ $st == 2 ]]
    grep -q "metrics-addr needs HOST:PORT" "$T/bad.err"
    st=0; "$ELRUN" store --listen 127.0.0.1:0 --metrics-addr=nope 2>"$T/sbad.err" || st=$?
    [[ $st == 2 ]]
    grep -q "metrics-addr needs HOST:PORT" "$T/sbad.err"
    "$PY" -c "import socket,time,sys; s=socket.socket(); s.bind((\"127.0.0.1\",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(30)" >"$T/busy" &
    wait_until "[[ -s $T/busy ]]" 10
    st=0; "$ELRUN" --standalone --metrics-addr="127.0.0.1:$(cat "$T/busy")" --no-python true 2>"$T/busy.err" || st=$?
    kill %1
    [[ $st == 1 ]]
    grep -q "choose another port" "$T/busy.err"
'

# A worker that writes good and bad progress lines, then waits for
# $T/lines.stop (at most 60 s).
printf "%s\n" "#!/bin/bash" \
    "long=\$(printf %0300d 0)" \
    "printf \"hello\\nstep x\\nstep 7 samples 3\\nstep 9 samples \$long\\nstep -4\\n\" >&\$ELRUN_PROGRESS_FD" \
    "for i in \$(seq 1200); do [[ -e \$1 ]] && break; sleep 0.05; done" >"$T/lines.sh"
chmod +x "$T/lines.sh"
"$ELRUN" --standalone --metrics-addr=127.0.0.1:0 --no-python "$T/lines.sh" "$T/lines.stop" \
    >"$T/lines.out" 2>"$T/lines.err" &
track_pid $!
test_expect_success 'progress lines: garbage and lines over 255 bytes are ignored, the last good one counts' '
    wait_until "[[ -n \$(metrics_port $T/lines.err) ]]" 20
    url="http://127.0.0.1:$(metrics_port "$T/lines.err")/metrics"
    wait_until "curl -sf $url | contains -E \"^elrun_worker_step[{].*[}] 7\\\$\"" 20
    curl -sf "$url" >"$T/lines.metrics"
    touch "$T/lines.stop"
    grep -qE "^elrun_worker_samples[{].*[}] 3$" "$T/lines.metrics"
    [[ $(grep -c "^elrun_worker_step[{]" "$T/lines.metrics") == 1 ]]
    grep -qE "^# TYPE elrun_worker_step gauge$" "$T/lines.metrics"
'

# ---- a job scraped by Prometheus ----
start_store --metrics-addr 127.0.0.1:0
wait_for_line "$T/store.err" 'metrics at http://' 20
STORE_M=$(metrics_port "$T/store.err")

declare -A AGENT_PID AGENT_M
for i in 1 2; do
    PYTHON_EXEC=$PY "$ELRUN" --nnodes=2:2 --nproc-per-node=2 \
        --rdzv-backend=c10d --rdzv-endpoint="127.0.0.1:$STORE_PORT" \
        --rdzv-id=m1 --rdzv-conf=is_host=false --max-restarts=2 \
        --restart-backoff=0 --metrics-addr=127.0.0.1:0 \
        "$W" "$T/stop" >"$T/agent.$i.out" 2>"$T/agent.$i.err" &
    AGENT_PID[$i]=$!
    track_pid $!
done
for i in 1 2; do
    wait_for_line "$T/agent.$i.err" 'metrics at http://' 20
    AGENT_M[$i]=$(metrics_port "$T/agent.$i.err")
done

mkdir -p "$T/prom"
cat >"$T/prom/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $ROOT/deploy/prometheus/elrun-rules.yml
scrape_configs:
  - job_name: elrun
    static_configs:
      - targets: ['127.0.0.1:${AGENT_M[1]}', '127.0.0.1:${AGENT_M[2]}']
  - job_name: elrun_store
    static_configs:
      - targets: ['127.0.0.1:$STORE_M']
EOF
prometheus --config.file="$T/prom/prometheus.yml" \
    --storage.tsdb.path="$T/prom/data" --web.listen-address=127.0.0.1:0 \
    >"$T/prom/log" 2>&1 &
PROM_PID=$!
track_pid $PROM_PID
wait_for_line "$T/prom/log" 'Server is ready to receive web requests' 60
PROM_PORT=$(ss -Hltnp 2>/dev/null | sed -n "s/.*127\.0\.0\.1:\([0-9]*\) .*pid=$PROM_PID,.*/\1/p" | head -1)

test_expect_success 'Prometheus scrapes both agents and the store' '
    [[ -n $PROM_PORT ]]
    wait_until "promq_is \"sum(up{job=\\\"elrun\\\"})\" 2" 30
    wait_until "promq_is \"sum(up{job=\\\"elrun_store\\\"})\" 1" 30
'

test_expect_success 'the job as Prometheus sees it: round 0, 2 nodes, 4 workers running, labels run_id/node/role' '
    wait_until "promq_is \"sum(elrun_workers{state=\\\"running\\\",run_id=\\\"m1\\\",role=\\\"default\\\"})\" 4" 30
    promq_is "max(elrun_round{run_id=\"m1\"})" 0
    promq_is "min(elrun_job_nodes{run_id=\"m1\"})" 2
    promq_is "min(elrun_job_workers{run_id=\"m1\"})" 4
    promq_is "count(elrun_node_rank{run_id=\"m1\"})" 2
    promq_is "sum(elrun_node_rank{run_id=\"m1\"})" 1
    promq_is "count(count by (node) (elrun_round))" 1
    promq_is "min(elrun_rendezvous_duration_seconds_count)" 1
    promq_is "sum(elrun_worker_group_state{state=\"healthy\"})" 2
    promq_is "min(elrun_restarts_remaining)" 2
    promq_is "sum(elrun_restarts_total)" 0
'

test_expect_success 'progress from a plain PyTorch-less Python script: step, step rate and time since the last step per rank' '
    wait_until "promq_is \"count(elrun_worker_step > 5)\" 4" 30
    wait_until "promq_is \"count(elrun_worker_steps_per_second > 1)\" 4" 30
    promq_is "count(elrun_worker_seconds_since_progress < 5)" 4
    promq_is "count(count by (rank) (elrun_worker_step))" 4
    promq_is "count(elrun_worker_samples >= 32)" 4
'

test_expect_success 'the store: connections, keys, value bytes, ops by type' '
    wait_until "promq_is \"count(elrun_store_connections >= 2)\" 1" 30
    promq_is "count(elrun_store_data_bytes > 0)" 1
    promq_is "count(elrun_store_keys > 0)" 1
    promq_is "count(elrun_store_ops_total{op=\"ADD\"} > 0)" 1
    promq_is "count(elrun_store_requests_total > 10)" 1
'

# A worker of agent 2 killed with SIGKILL: agent 2 charges a restart, agent
# 1 re-forms for the membership change, both run round 1.
for c in $(ps -o pid= --ppid "${AGENT_PID[2]}"); do
    victim=$c; break
done
kill -KILL "$victim"

test_expect_success 'after a worker is SIGKILLed: 1 restart, the exit by signal, detection and recovery samples, round 1 running' '
    wait_until "promq_is \"sum(elrun_restarts_total{run_id=\\\"m1\\\"})\" 1" 30
    wait_until "promq_is \"sum(elrun_workers{state=\\\"running\\\"})\" 4" 30
    wait_until "promq_is \"min(elrun_round)\" 1" 30
    promq_is "sum(elrun_worker_exits_total{signal=\"SIGKILL\",failed=\"1\"})" 1
    promq_is "sum(elrun_failure_detection_seconds_count)" 1
    promq_is "count(elrun_failure_detection_seconds_sum > 0 < 1)" 1
    promq_is "sum(elrun_recovery_seconds_count{cause=\"worker_failure\"})" 1
    promq_is "sum(elrun_recovery_seconds_count{cause=\"membership\"})" 1
    promq_is "sum(elrun_recovery_seconds_bucket{cause=\"worker_failure\",le=\"+Inf\"})" 1
    promq_is "min(elrun_restarts_remaining{run_id=\"m1\"})" 1
    promq_is "sum(elrun_membership_changes_total)" 1
'

test_expect_success 'the restart-budget alert of deploy/prometheus is pending' '
    wait_until "promq_is \"count(ALERTS{alertname=\\\"ElrunRestartBudgetNearlySpent\\\",run_id=\\\"m1\\\"})\" 1" 30
'

# Agent 2 dies (SIGKILL): its target goes down; agent 1, short of MIN=2,
# waits in the rendezvous.
kill -KILL "${AGENT_PID[2]}"
test_expect_success 'an agent killed: its target down (ElrunAgentDown pending), the other agent in the rendezvous' '
    wait_until "promq_is \"sum(up{job=\\\"elrun\\\"})\" 1" 30
    wait_until "promq_is \"sum(elrun_worker_group_state{state=\\\"rendezvous\\\"})\" 1" 30
    wait_until "promq_is \"count(ALERTS{alertname=\\\"ElrunAgentDown\\\",alertstate=\\\"pending\\\"})\" 1" 30
'

kill -TERM "${AGENT_PID[1]}"
test_expect_success 'the remaining agent obeys SIGTERM with metrics on' '
    wait_until "exited ${AGENT_PID[1]}" 30
    refute curl -sf "http://127.0.0.1:${AGENT_M[1]}/metrics" -o /dev/null
    refute grep -qE "Sanitizer|runtime error" "$T/agent.1.err" "$T/agent.2.err" "$T/store.err"
'
test_done

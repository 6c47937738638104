#!/usr/bin/env bash
# A hung agent (SIGSTOP: a frozen host) is found by its peers through the
# keep-alive window, as docs/AGENT.md says: its store connection falls
# silent, the store closes it after keep_alive_interval x
# keep_alive_max_attempt and appends "dead <id>", and the two others are
# woken at once and re-form without it (they are all the round expects: no
# last call).  Not before the window less one interval (the last heartbeat
# may have come up to one interval before the stop; 0.5 s of slack for a
# loaded machine): a silent node cannot be told from a slow one sooner.
# The times measured are printed (the figures in docs/AGENT.md); no upper
# bound is asserted.
. "$(dirname "$0")/lib.sh"
start_store

# ha_agent I KA NAME: agent I of job "hungNAME" (sleep as its worker).
declare -A HA_PID
ha_agent() {
    ELRUN_LOG_LEVEL=info "$ELRUN" --nnodes=2:3 --nproc-per-node=1 \
        --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$STORE_PORT \
        --rdzv-id="hung$3" --rdzv-conf="$2" --max-restarts=0 \
        --no-python sleep 300 >"$T/a$1.$2.log" 2>&1 &
    HA_PID[$1]=$!
    track_pid $!
}
# ms_of LINE: the epoch ms of a log line's ISO timestamp.
ms_of() { date -d "$(cut -d" " -f1 <<<"$1")" +%s%3N; }

# hung_case INTERVAL ATTEMPTS: stop agent 3, measure, continue, clean up.
hung_case() {
    local ka="last_call_timeout=1,keep_alive_interval=$1,keep_alive_max_attempt=$2"
    local win=$(($1 * $2 * 1000)) i
    trap 'kill -CONT ${HA_PID[3]} 2>/dev/null; for p in "${HA_PID[@]}"; do kill -KILL $p 2>/dev/null; done' EXIT
    for i in 1 2 3; do ha_agent $i "$ka" $1x$2; done
    for i in 1 2 3; do wait_for_line "$T/a$i.$ka.log" "round 0: node .* starting 1 worker" 30; done
    local t0; t0=$(date +%s%3N)
    kill -STOP ${HA_PID[3]}
    wait_for_line "$T/a1.$ka.log" "other nodes are waiting for a new round" $((win / 1000 + 30))
    wait_for_line "$T/a1.$ka.log" "round [0-9]*: node .* of 2," 30
    local seen formed
    seen=$(ms_of "$(grep -m1 "other nodes are waiting for a new round" "$T/a1.$ka.log")")
    formed=$(ms_of "$(grep -m1 "round [0-9]*: node .* of 2," "$T/a1.$ka.log")")
    echo "keep-alive ${1} s x $2 (window $((win / 1000)) s): the stop seen after $((seen - t0)) ms, the two re-formed after $((formed - t0)) ms" | tee -a "$T/figures"
    # 0.5 s of slack: a starved agent's last heartbeat may come late.
    (( seen - t0 >= win - $1 * 1000 - 500 ))
    grep -q "round [0-9]*: node .* of 2," "$T/a2.$ka.log"
}

test_expect_success 'a SIGSTOPped agent (keep-alive 1 s x 3): the others see it after the window and re-form without it' '
    hung_case 1 3
'

test_expect_success 'the same with keep-alive 2 s x 2: the window, not a fixed delay, is what it costs' '
    hung_case 2 2
'
cat "$T/figures" 2>/dev/null
test_done

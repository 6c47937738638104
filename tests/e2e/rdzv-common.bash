# rdzv-common.bash -- helpers for the rendezvous e2e scripts (t0200 on the
# elrun store, t0700 on etcd), sourced after lib.sh.  Their agents run
# tests/e2e/bin/rdzv_worker.sh, which writes $T/JOB/w.<round>.<rank>; each
# script's agent() starts agent I and sets AGENT_PID[I].

# latest JOB: the newest round any worker of JOB wrote a file for.
latest() { ls "$T/$1" | sed -n 's/^w\.\([0-9]*\)\.[0-9]*$/\1/p' | sort -n | tail -1; }

# workers JOB N [AFTER] [TIMEOUT]: wait until the newest round (> AFTER) has N
# workers started; sets ROUND to it (empty if none did).
workers() {
    local job=$1 n=$2 after=${3:--1} deadline=$((SECONDS + ${4:-30})) r
    ROUND=""
    while :; do
        r=$(latest "$job")
        if [[ -n $r ]] && ((r > after)) &&
            [[ $(ls "$T/$job" | grep -c "^w\.$r\.[0-9]*$") -eq $n ]]; then
            ROUND=$r; return 0
        fi
        ((SECONDS < deadline)) || { echo "$job: newest round ${r:-none} has $(ls "$T/$job" | grep -c "^w\.${r:-x}\.") workers, not $n"; tail -n 20 "$T/$job"/agent.*.log; return 1; }
        sleep 0.05
    done
}

# ranks JOB ROUND: the sorted ranks of ROUND's workers, one line.
ranks() { cat "$T/$1"/w."$2".* | sed 's/.*rank=\([0-9]*\).*/\1/' | sort -n | tr '\n' ' '; }

# wait_exit I [TIMEOUT]: wait (up to TIMEOUT s, default 30) for agent I to
# end; sets RC to its exit status, or to 124 if it still ran, and then kills
# it, so that it cannot disturb the next cases (a bare `wait` would hang the
# script instead).
wait_exit() {
    local pid=${AGENT_PID[$1]}
    if timeout "${2:-30}" tail --pid="$pid" -f /dev/null; then
        wait "$pid"; RC=$?
    else
        RC=124
        kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    fi
}

# finish JOB I...: tell the workers to end, then each agent I must exit 0
# within 60 s.
finish() {
    local job=$1 i rc=0; shift
    touch "$T/$job/finish"
    for i in "$@"; do
        wait_exit "$i" 60
        ((RC == 0)) || { echo "agent $i exited $RC"; tail -n 20 "$T/$job/agent.$i.log"; rc=1; }
    done
    return $rc
}

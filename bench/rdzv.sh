#!/usr/bin/env bash
# Elastic rendezvous figures (issue 4), real elrun agents on this machine:
#   1. rendezvous of N agents (MIN=MAX=N, last_call_timeout=0, one worker
#      each): from the start of the last agent to every worker running;
#   2. recovery: SIGKILL one of N agents (MIN=2, MAX=N) and time until every
#      surviving node runs the next round's workers;
#   3. scale-up: a new node starts; time until the grown job's workers run
#      (last_call_timeout=1 s, so the goal is under 1.2 s);
#   4. the rendezvous alone, built-in store (c10d) and etcd side by side:
#      N bare agents (bench/rdzv_agent.c: el_rdzv_next in the agent's loop,
#      no workers), from the start of the last one to every agent returning
#      from el_rdzv_next;
#   5. death -> re-formed, c10d and etcd: SIGKILL one of N bare agents and
#      time until every survivor returned from el_rdzv_next with the new
#      round (c10d: the store sees the connection close; etcd: the dead
#      agent's ring neighbour finds its store refusing and revokes its lease,
#      TTL ETCD_TTL_MS otherwise).
# For 4 and 5 the script starts one etcd member on 127.0.0.1 (free ports,
# data dir under the temporary directory, --heartbeat-interval=50
# --election-timeout=500 so that a 1 s lease TTL is allowed); without etcd
# installed the etcd rows are skipped with a note.
# Prints medians over REPS runs.  Traffic stays on 127.0.0.1; every process
# started is killed on exit.  About 4 minutes with the defaults and
# TORCHRUN_N=0 (6 with REPS=5), plus about 1 minute per torchrun run.
#   bench/rdzv.sh                 # N = 16 256 1024, recovery at 4 and 64
#   SIZES="16 256" REPS=3 bench/rdzv.sh
#   TORCHRUN_N=16 bench/rdzv.sh   # also torchrun 1.13 (c10d) with 16 agents
#                                 # side by side (0 to skip; ~1 min a run)
#   LAUNCHER_ROWS=0 bench/rdzv.sh # only 4 and 5 (c10d against etcd)
#   BACKENDS=c10d bench/rdzv.sh   # 4 and 5 without etcd
#   BEFORE=/work/base/build bench/rdzv.sh
#                                 # the same runs with a second build first
#                                 # (its elrun, bench/rdzv_agent and
#                                 # bench/rdzv_worker), then this one, and
#                                 # their medians side by side
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=${BIN:-$PWD/$BUILD}            # where elrun and bench/ are

# BEFORE=DIR: run everything below twice in this run, DIR's build first,
# then print each row's median before and after.
if [[ -n ${BEFORE:-} && -z ${RDZV_BENCH_CHILD:-} ]]; then
    before_out=$(mktemp /tmp/elrun-rdzv-before.XXXXXX)
    after_out=$(mktemp /tmp/elrun-rdzv-after.XXXXXX)
    echo "== before: $BEFORE"
    RDZV_BENCH_CHILD=1 BIN=$(cd "$BEFORE" && pwd) "$0" "$@" | tee "$before_out"
    echo; echo "== after: $BIN"
    RDZV_BENCH_CHILD=1 "$0" "$@" | tee "$after_out"
    # Rows are "%12s %12s ..." under a section line "<digit>. ...".
    rows() { awk '/^[0-9]\. / {sec=substr($0,1,1)} /^ *[0-9]/ && length($0) >= 25 && sec != "" && substr($0,14,12) ~ /[0-9]/ {lab=substr($0,1,12); gsub(/^ +/,"",lab); med=substr($0,14,12); gsub(/ /,"",med); print sec "|" lab "|" med}' "$1"; }
    echo; echo "== before/after medians (ms): section, row, before, after"
    printf "%4s %14s %12s %12s\n" sec row before after
    join -t'|' -a1 -a2 -e n/a -o 0,1.2,2.2 <(rows "$before_out" | awk -F'|' '{print $1":"$2"|"$3}' | sort) \
        <(rows "$after_out" | awk -F'|' '{print $1":"$2"|"$3}' | sort) |
        awk -F'|' '{split($1,k,":"); printf "%4s %14s %12s %12s\n", k[1], k[2], $2, $3}' | sort -n -k1,1 -s
    rm -f "$before_out" "$after_out"
    exit 0
fi
ELRUN=$BIN/elrun
SIZES=${SIZES:-16 256 1024}
KILL_SIZES=${KILL_SIZES:-4 64}
REPS=${REPS:-3}
LAUNCHER_ROWS=${LAUNCHER_ROWS:-1}
BACKENDS=${BACKENDS:-c10d etcd}
ETCD_TTL_MS=${ETCD_TTL_MS:-1000}   # section 5: lease TTL of the etcd agents
                                   # (etcd rounds it up to whole seconds)
W=$(mktemp -d /tmp/elrun-rdzv-bench.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]:-}"; do kill -KILL "$p" 2>/dev/null; done
    pkill -KILL -f "$W/" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The worker records "round rank ns-timestamp" and exits or stays until
# DIR/finish (bench/rdzv_worker.c).
WORKER=$BIN/bench/rdzv_worker
AGENT=$BIN/bench/rdzv_agent
[[ -x $ELRUN && -x $WORKER && -x $AGENT ]] || { echo "build first: make BUILD=$BUILD (no $ELRUN, $WORKER or $AGENT)" >&2; exit 2; }

TORCHRUN_N=${TORCHRUN_N:-16}
TORCHRUN=$PWD/bench/agent_torchrun311
/usr/bin/python3 -c 'import torch' 2>/dev/null || TORCHRUN_N=0

free_port() { /usr/bin/python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
# row LABEL [NOTE]: one table line from the figures in res[] (ms); the
# median is left in ROW_MEDIAN.  row N "median ms" ... prints the header.
row() {
    if [[ $# -gt 2 ]]; then
        printf "%12s %12s %12s %12s%s\n" "$@"; return
    fi
    local v; v=$(printf '%s\n' "${res[@]}" | sed '/^$/d' | sort -n)
    ROW_MEDIAN=$(median <<<"$v")
    printf "%12s %12s %12s %12s%s\n" "$1" "$ROW_MEDIAN" \
        "$(head -1 <<<"$v")" "$(tail -1 <<<"$v")" "${2:+   $2}"
}
HEADER=(N "median ms" "min ms" "max ms" "")
median() { sort -n | awk 'NF {a[++n]=$1} END {if (n==0) print "n/a"; else if (n%2) print a[(n+1)/2]; else print (a[n/2]+a[n/2+1])/2}'; }

# start_agents DIR N NNODES CONF MODE: N agents; prints the ns timestamp
# taken just before the last one was started.
start_agents() {
    local dir=$1 n=$2 nnodes=$3 conf=$4 mode=$5 port=$6 i t=0
    local launcher=("$ELRUN") flags=(--nnodes="$nnodes" --nproc-per-node=1
        --rdzv-backend=c10d --rdzv-endpoint="127.0.0.1:$port" --rdzv-id=bench
        --rdzv-conf="$conf" --max-restarts=100 --no-python)
    if [[ ${LAUNCHER:-elrun} == torchrun ]]; then
        launcher=("$TORCHRUN")
        flags=(--nnodes="$nnodes" --nproc_per_node=1 --rdzv_backend=c10d
            --rdzv_endpoint="127.0.0.1:$port" --rdzv_id=bench
            --rdzv_conf="$conf" --max_restarts=100 --monitor_interval=0.1
            --no_python)
    fi
    for ((i = 0; i < n; i++)); do
        t=$(date +%s%N)
        "${launcher[@]}" "${flags[@]}" "$WORKER" "$dir" "$mode" \
            >"$dir/agent.$i.log" 2>&1 &
        pids+=($!)
        echo $! >>"$dir/pids"
    done
    echo "$t"
}

# wait_starts DIR AFTER COUNT TIMEOUT_S: until the newest round after AFTER
# has COUNT workers started; prints "round latest-start-ns".
wait_starts() {
    local dir=$1 after=$2 count=$3 deadline=$((SECONDS + $4)) r got
    while :; do
        r=$(awk '{print $1}' "$dir/starts" 2>/dev/null | sort -n | tail -1)
        if [[ -n $r ]] && ((r > after)); then
            got=$(awk -v r="$r" '$1 == r' "$dir/starts" | wc -l)
            ((got >= count)) && break
        fi
        ((SECONDS < deadline)) || { echo "timeout"; return 1; }
        sleep 0.01
    done
    echo "$r $(awk -v r="$r" '$1 == r {print $3}' "$dir/starts" | sort -n | tail -1)"
}

# stop_all DIR: SIGTERM every agent of DIR and wait until all are gone (they
# were started in a command substitution, so they are not this shell's
# children and `wait` cannot reap them); SIGKILL after 30 s.
stop_all() {
    local dir=$1 p left deadline=$((SECONDS + 30))
    touch "$dir/finish"
    [[ -f $dir/pids ]] || return 0
    while read -r p; do kill -TERM "$p" 2>/dev/null; done <"$dir/pids"
    while :; do
        left=0
        while read -r p; do kill -0 "$p" 2>/dev/null && left=1 && break; done <"$dir/pids"
        ((left)) || break
        if ((SECONDS >= deadline)); then
            while read -r p; do kill -KILL "$p" 2>/dev/null; done <"$dir/pids"
            deadline=$((SECONDS + 30))
        fi
        sleep 0.05
    done
}

# start_bare DIR N BACKEND ENDPOINT MIN MAX MODE [KEY=VALUE ...]: N bare
# agents (bench/rdzv_agent.c); prints the ns timestamp taken just before the
# last one was started.  On c10d the first one hosts the store.
start_bare() {
    local dir=$1 n=$2 be=$3 ep=$4 min=$5 max=$6 mode=$7 i t=0 host
    shift 7
    for ((i = 0; i < n; i++)); do
        host=()
        [[ $be == c10d ]] && host=("is_host=$((i ? -1 : 1))")
        t=$(date +%s%N)
        "$AGENT" "$dir" "$mode" "$be" "$ep" "$min" "$max" "$@" "${host[@]}" \
            >"$dir/agent.$i.log" 2>&1 &
        pids+=($!)
        echo $! >>"$dir/pids"
    done
    echo "$t"
}

# etcd_start: one member on 127.0.0.1 with free ports and a data dir under
# $W; sets ETCD_EP (host:port) and ETCD_PID, or ETCD_NOTE and returns 1.
ETCD_EP='' ETCD_PID='' ETCD_NOTE=''
etcd_start() {
    if ! command -v etcd >/dev/null; then
        ETCD_NOTE="etcd rows skipped: etcd is not installed (apt-get install etcd-server)"
        return 1
    fi
    local cp pp i
    cp=$(free_port); pp=$(free_port)
    while [[ $pp == "$cp" ]]; do pp=$(free_port); done
    mkdir -p "$W/etcd"
    etcd --name bench --data-dir "$W/etcd/data" \
        --listen-client-urls "http://127.0.0.1:$cp" \
        --advertise-client-urls "http://127.0.0.1:$cp" \
        --listen-peer-urls "http://127.0.0.1:$pp" \
        --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
        --initial-cluster "bench=http://127.0.0.1:$pp" \
        --initial-cluster-state new --initial-cluster-token "bench-$cp" \
        --heartbeat-interval=50 --election-timeout=500 \
        --logger zap --log-outputs stderr >"$W/etcd/log" 2>&1 &
    ETCD_PID=$!
    pids+=($!)
    disown "$ETCD_PID"   # no "Killed" line when cleanup() ends it
    for ((i = 0; i < 200; i++)); do
        if curl -fsS -m 1 "http://127.0.0.1:$cp/health" 2>/dev/null | grep -q '"health":"true"'; then
            ETCD_EP=127.0.0.1:$cp
            return 0
        fi
        kill -0 "$ETCD_PID" 2>/dev/null || break
        sleep 0.1
    done
    ETCD_NOTE="etcd rows skipped: etcd did not start ($(tail -1 "$W/etcd/log" 2>/dev/null))"
    kill -KILL "$ETCD_PID" 2>/dev/null
    return 1
}

# fd_peak PID OUT: in the background, the most fds PID held, into OUT
# (sampled every 0.2 s); prints the sampler's pid.
fd_peak() {
    (   max=0
        while kill -0 "$1" 2>/dev/null; do
            n=$(ls /proc/"$1"/fd 2>/dev/null | wc -l)
            ((n > max)) && { max=$n; echo "$max" >"$2"; }
            sleep 0.2
        done ) >/dev/null 2>&1 &
    pids+=($!)
    echo $!
}

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); elrun $(git rev-parse --short HEAD 2>/dev/null), binaries in $BIN"
if ((LAUNCHER_ROWS)); then
    echo
    echo "1. rendezvous of N agents (last_call_timeout=0): last agent started -> all workers running"
    row "${HEADER[@]}"
    for n in $SIZES; do
        res=()
        for ((r = 0; r < REPS; r++)); do
            d="$W/r$n.$r"; mkdir -p "$d"
            port=$(free_port)
            t_last=$(start_agents "$d" "$n" "$n:$n" "last_call_timeout=0,join_timeout=300" go "$port")
            out=$(wait_starts "$d" -1 "$n" 300) || { echo "  N=$n: $out"; stop_all "$d"; continue; }
            t_all=${out#* }
            res+=($(( (t_all - t_last) / 1000000 )))
            stop_all "$d"; rm -rf "$d"
        done
        row "$n"
    done

    if ((TORCHRUN_N > 0)); then
        res=()
        for ((r = 0; r < REPS; r++)); do
            d="$W/t$TORCHRUN_N.$r"; mkdir -p "$d"
            port=$(free_port)
            t_last=$(LAUNCHER=torchrun start_agents "$d" "$TORCHRUN_N" "$TORCHRUN_N:$TORCHRUN_N" "last_call_timeout=1,join_timeout=300" go "$port")
            out=$(wait_starts "$d" -1 "$TORCHRUN_N" 300) || { echo "  torchrun N=$TORCHRUN_N: $out"; stop_all "$d"; continue; }
            t_all=${out#* }
            res+=($(( (t_all - t_last) / 1000000 )))
            stop_all "$d"; rm -rf "$d"
        done
        row "$TORCHRUN_N" "torchrun 1.13 (--monitor_interval=0.1; its last_call_timeout must be >= 1)"
    fi

    echo
    echo "2. recovery: SIGKILL of one agent -> every survivor runs the next round (keep-alive window 15 s)"
    row "${HEADER[@]}"
    for n in $KILL_SIZES; do
        res=()
        for ((r = 0; r < REPS; r++)); do
            d="$W/k$n.$r"; mkdir -p "$d"
            port=$(free_port)
            : "$(start_agents "$d" "$n" "2:$n" "last_call_timeout=0,join_timeout=300" stay "$port")"
            out=$(wait_starts "$d" -1 "$n" 300) || { echo "  N=$n: $out"; stop_all "$d"; continue; }
            victim=$(sed -n "$n p" "$d/pids")   # the last one: not the store host
            t0=$(date +%s%N)
            kill -KILL "$victim"
            out=$(wait_starts "$d" "${out%% *}" $((n - 1)) 60) || { echo "  N=$n: $out"; stop_all "$d"; continue; }
            t_all=${out#* }
            res+=($(( (t_all - t0) / 1000000 )))
            stop_all "$d"; rm -rf "$d"
        done
        row "$n"
    done

    echo
    echo "3. scale-up: a new node starts -> the grown job runs (last_call_timeout=1 s; goal < 1200 ms)"
    res=()
    for ((r = 0; r < REPS; r++)); do
        d="$W/u.$r"; mkdir -p "$d"
        port=$(free_port)
        : "$(start_agents "$d" 3 "2:8" "last_call_timeout=1,join_timeout=300" stay "$port")"
        out=$(wait_starts "$d" -1 3 60) || { stop_all "$d"; continue; }
        t0=$(start_agents "$d" 1 "2:8" "last_call_timeout=1,join_timeout=300" stay "$port")
        out=$(wait_starts "$d" "${out%% *}" 4 60) || { stop_all "$d"; continue; }
        t_all=${out#* }
        res+=($(( (t_all - t0) / 1000000 )))
        stop_all "$d"; rm -rf "$d"
    done
    row "3->4"
fi

# 4 and 5: the rendezvous alone, c10d (the built-in store, hosted by the
# first agent) and etcd side by side.
have_etcd=0
if [[ " $BACKENDS " == *" etcd "* ]] && etcd_start; then
    have_etcd=1
    ETCD_LIMIT=$(awk '/Max open files/ {print $4}' /proc/"$ETCD_PID"/limits)
fi
# wait_bare DIR COUNT TIMEOUT_S: as wait_starts for round 0, but gives up
# as soon as every agent either returned or logged a failure of next()
# (the others then wait in the exit barrier); prints "round latest-ns", or
# "timeout" / "K agents failed" and returns 1.
wait_bare() {
    local dir=$1 count=$2 deadline=$((SECONDS + $3)) got failed next=0
    while :; do
        got=$(awk 'END {print NR}' "$dir/starts" 2>/dev/null)
        ((${got:-0} >= count)) && break
        if ((SECONDS >= next)); then
            failed=$(grep -l -E '\] (open|next): ' "$dir"/agent.*.log 2>/dev/null | wc -l)
            ((${got:-0} + failed >= count && failed > 0)) && { echo "$failed agents failed"; return 1; }
            next=$((SECONDS + 1))
        fi
        ((SECONDS < deadline)) || { echo "timeout"; return 1; }
        sleep 0.01
    done
    echo "0 $(awk '{print $3}' "$dir/starts" | sort -n | tail -1)"
}
# failed_note: "; F of REPS runs failed" when fails > 0.
failed_note() { ((fails == 0)) || printf '; %d of %d runs failed' "$fails" "$REPS"; }
# why DIR: the most common error lines of DIR's agents.
why() {
    grep -h -E '(open|next|num_nodes_waiting|exit barrier): ' "$1"/agent.*.log 2>/dev/null |
        sed 's/^[0-9.]* \[[0-9]*\] //' | sort | uniq -c | sort -rn | head -3 | sed 's/^/      /'
}
# ratio: "etcd/c10d Nx, ", the median of res[] over the c10d median of the
# same N (c10d_med).
ratio() {
    local m; m=$(printf '%s\n' "${res[@]}" | median)
    [[ -n ${c10d_med:-} && $c10d_med != n/a && $m != n/a ]] || return 0
    awk -v a="$m" -v b="$c10d_med" 'BEGIN {if (b > 0) printf "etcd/c10d %.1fx, ", a / b; else printf "etcd/c10d inf, "}'
}

echo
echo "4. the rendezvous alone (bench/rdzv_agent: no workers; last_call_timeout=0, MIN=MAX=N): last agent started -> every agent returned from el_rdzv_next"
[[ -n $ETCD_NOTE ]] && echo "   $ETCD_NOTE"
((have_etcd)) && echo "   $(etcd --version | head -1) at $ETCD_EP: one member, data under $W, heartbeat 50 ms, election 500 ms, fd limit $ETCD_LIMIT"
row "N backend" "median ms" "min ms" "max ms" ""
for n in $SIZES; do
    c10d_med=
    for be in $BACKENDS; do
        [[ $be == etcd ]] && ((!have_etcd)) && continue
        res=(); peak=0; fails=0
        for ((r = 0; r < REPS; r++)); do
            d="$W/b$n.$be.$r"; mkdir -p "$d"
            if [[ $be == etcd ]]; then
                ep=$ETCD_EP
                sampler=$(fd_peak "$ETCD_PID" "$d/fdpeak")
            else
                ep=127.0.0.1:$(free_port)
            fi
            t_last=$(start_bare "$d" "$n" "$be" "$ep" "$n" "$n" go \
                run_id="b$n.$r" last_call=0 join=300000)
            if out=$(wait_bare "$d" "$n" 300); then
                t_all=${out#* }
                res+=($(( (t_all - t_last) / 1000000 )))
            else
                echo "  N=$n $be run $((r + 1)): $out, $(awk 'END {print NR}' "$d/starts" 2>/dev/null) of $n returned"; why "$d"
                fails=$((fails + 1))
            fi
            if [[ $be == etcd ]]; then
                kill "$sampler" 2>/dev/null
                p=$(cat "$d/fdpeak" 2>/dev/null || echo 0)
                ((p > peak)) && peak=$p
            fi
            stop_all "$d"; rm -rf "$d"
        done
        if [[ $be == etcd ]]; then
            row "$n $be" "$(ratio)etcd fds up to $peak (sampled every 0.2 s)$(failed_note)"
        else
            row "$n $be" "$(failed_note | cut -c3-)"; c10d_med=$ROW_MEDIAN
        fi
    done
done

echo
echo "5. death -> re-formed (bench/rdzv_agent, MIN=2, MAX=N): SIGKILL of one agent -> every survivor returned from el_rdzv_next with the new round"
[[ -n $ETCD_NOTE ]] && echo "   $ETCD_NOTE"
row "N backend" "median ms" "min ms" "max ms" ""
ka_ms=$(( (ETCD_TTL_MS + 1) / 2 ))
ttl_s=$(( (ka_ms * 2 + 999) / 1000 ))   # what the backend asks etcd for
for n in $KILL_SIZES; do
    c10d_med=
    for be in $BACKENDS; do
        [[ $be == etcd ]] && ((!have_etcd)) && continue
        res=(); fails=0
        if [[ $be == etcd ]]; then
            conf=("keep_alive=$ka_ms" keep_alive_n=2)   # the lease TTL
        else
            conf=()   # default keep-alive: a death is seen by the closed connection
        fi
        for ((r = 0; r < REPS; r++)); do
            d="$W/k$n.$be.$r"; mkdir -p "$d"
            if [[ $be == etcd ]]; then ep=$ETCD_EP; else ep=127.0.0.1:$(free_port); fi
            : "$(start_bare "$d" "$n" "$be" "$ep" 2 "$n" stay run_id="k$n.$r" \
                last_call=0 join=300000 "${conf[@]}")"
            if ! out=$(wait_starts "$d" -1 "$n" 300); then
                echo "  N=$n $be run $((r + 1)): forming: $out"; why "$d"
                fails=$((fails + 1)); stop_all "$d"; continue
            fi
            round=${out%% *}
            # The highest rank of that round, neither rank 0 (etcd: it
            # serves the workers' store) nor the c10d store host.
            host_pid=$(head -1 "$d/pids")
            victim=$(awk -v r="$round" -v h="$host_pid" \
                '$1 == r && $2 != 0 && $4 != h {print $2, $4}' "$d/starts" | sort -n | tail -1)
            victim=${victim#* }
            t0=$(date +%s%N)
            kill -KILL "$victim"
            if out=$(wait_starts "$d" "$round" $((n - 1)) 60); then
                t_all=${out#* }
                res+=($(( (t_all - t0) / 1000000 )))
            else
                echo "  N=$n $be run $((r + 1)): re-forming: $out"; why "$d"
                fails=$((fails + 1))
            fi
            stop_all "$d"; rm -rf "$d"
        done
        if [[ $be == etcd ]]; then
            row "$n $be" "$(ratio)the ring revokes its lease (TTL $ttl_s s otherwise)$(failed_note)"
        else
            row "$n $be" "connection close seen by the store$(failed_note)"; c10d_med=$ROW_MEDIAN
        fi
    done
done

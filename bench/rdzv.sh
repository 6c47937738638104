#!/usr/bin/env bash
# Elastic rendezvous figures (issue 4), real elrun agents on this machine:
#   1. rendezvous of N agents (MIN=MAX=N, last_call_timeout=0, one worker
#      each): from the start of the last agent to every worker running;
#   2. recovery: SIGKILL one of N agents (MIN=2, MAX=N) and time until every
#      surviving node runs the next round's workers;
#   3. scale-up: a new node starts; time until the grown job's workers run
#      (last_call_timeout=1 s, so the goal is under 1.2 s).
# Prints medians over REPS runs.  Traffic stays on 127.0.0.1; every process
# started is killed on exit.  About 2-4 minutes with the defaults.
#   bench/rdzv.sh                 # N = 16 256 1024, recovery at 4 and 64
#   SIZES="16 256" REPS=3 bench/rdzv.sh
#   TORCHRUN_N=16 bench/rdzv.sh   # also torchrun 1.13 (c10d) with 16 agents
#                                 # side by side (0 to skip; ~1 min a run)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ELRUN=$PWD/$BUILD/elrun
SIZES=${SIZES:-16 256 1024}
KILL_SIZES=${KILL_SIZES:-4 64}
REPS=${REPS:-3}
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
WORKER=$PWD/$BUILD/bench/rdzv_worker
[[ -x $ELRUN && -x $WORKER ]] || { echo "build first: make BUILD=$BUILD" >&2; exit 2; }

TORCHRUN_N=${TORCHRUN_N:-16}
TORCHRUN=$PWD/bench/agent_torchrun311
/usr/bin/python3 -c 'import torch' 2>/dev/null || TORCHRUN_N=0

free_port() { /usr/bin/python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
# row LABEL [NOTE]: one table line from the figures in res[] (ms).
row() {
    local v; v=$(printf '%s\n' "${res[@]}" | sort -n)
    printf "%8s %12s %12s %12s%s\n" "$1" "$(median <<<"$v")" \
        "$(head -1 <<<"$v")" "$(tail -1 <<<"$v")" "${2:+   $2}"
}
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) print "n/a"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

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

stop_all() {
    local dir=$1
    touch "$dir/finish"
    while read -r p; do kill -TERM "$p" 2>/dev/null; done <"$dir/pids"
    while read -r p; do wait "$p" 2>/dev/null; done <"$dir/pids"
}

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); elrun $(git rev-parse --short HEAD 2>/dev/null)"
echo
echo "1. rendezvous of N agents (last_call_timeout=0): last agent started -> all workers running"
printf "%8s %12s %12s %12s\n" N "median ms" "min ms" "max ms"
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
printf "%8s %12s %12s %12s\n" N "median ms" "min ms" "max ms"
for n in $KILL_SIZES; do
    res=()
    for ((r = 0; r < REPS; r++)); do
        d="$W/k$n.$r"; mkdir -p "$d"
        port=$(free_port)
        start_agents "$d" "$n" "2:$n" "last_call_timeout=0,join_timeout=300" stay "$port" >/dev/null
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
    start_agents "$d" 3 "2:8" "last_call_timeout=1,join_timeout=300" stay "$port" >/dev/null
    out=$(wait_starts "$d" -1 3 60) || { stop_all "$d"; continue; }
    t0=$(start_agents "$d" 1 "2:8" "last_call_timeout=1,join_timeout=300" stay "$port")
    out=$(wait_starts "$d" "${out%% *}" 4 60) || { stop_all "$d"; continue; }
    t_all=${out#* }
    res+=($(( (t_all - t0) / 1000000 )))
    stop_all "$d"; rm -rf "$d"
done
row "3->4"

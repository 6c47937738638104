#!/usr/bin/env bash
# The etcd rendezvous (--rdzv-backend=etcd, src/rendezvous/state_etcd.c) across
# simulated hosts: network namespaces elh1..elh7 from tests/infra, each agent
# a real elrun process on its own host (elh1..elh4, --local-addr 10.77.0.I),
# against a real etcd 3.4 (Debian's etcd-server) started here: one member in
# the hub namespace (10.77.0.254), a 3-member cluster on elh5..elh7
# (10.77.0.5-7, 50 ms heartbeat / 500 ms election), and a TLS member in the
# hub.  No agent hosts a store for the rendezvous; the rank-0 agent of each
# round serves the workers' store.
#
#  1. a job forms on 3 hosts (one lease of TTL 2 s each, every key under
#     <etcd_prefix>/<run_id>/), shrinks when an agent is SIGKILLed (its lease
#     expires), grows when a host arrives (stable ranks, newcomer last),
#     shrinks when a host is cut off (that agent loses its lease, says so,
#     stops its workers, exits non-zero), finishes; its keys are gone;
#  2. the workers' store: MASTER_ADDR is the rank-0 agent's host and the
#     workers of a round meet there (PyTorch's TCPStore client); kill that
#     agent and the next round has another rank 0, store and MASTER_ADDR;
#  5. nothing listening / a silent host: the agent exits non-zero with one
#     line naming the members tried (within the join timeout);
#  3. the etcd leader (which the agents talk to) is killed mid-run: same
#     round, same worker processes, the job finishes (--rdzv-backend=etcd-v2);
#  4. TLS with a client certificate, without --local-addr (host names); a
#     wrong CA and a missing client certificate are one line naming TLS.
# Keep-alive is 1 s x 2 (lease TTL 2 s) throughout.  Timings are printed as
# "# ..." lines and only bounded generously.
#   T0700_CASES="3 4"   run only these cases, in this order (default 1 2 5 3 4)
#   T0700_KEEP=DIR      keep the agents' logs and the workers' files in DIR
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rdzv-common.bash"
INFRA="$ROOT/tests/infra"
W="$ROOT/tests/e2e/bin/rdzv_worker.sh"
WS="$ROOT/tests/e2e/bin/rdzv_store_worker.sh"

if [[ $(id -u) != 0 ]] || ! command -v ip >/dev/null; then
    test_skip "etcd rendezvous on simulated hosts" "needs root and iproute2"
    test_done; exit
fi
for c in etcd etcdctl openssl; do
    command -v $c >/dev/null || {
        test_skip "etcd rendezvous on simulated hosts" "needs $c (etcd-server, etcd-client, openssl)"
        test_done; exit
    }
done
netns_hosts 7
# Told at the end if someone removed or re-made them meanwhile.
HUB_ID=$(stat -Lc %i /run/netns/elhub)
hosts_intact() { [[ $(stat -Lc %i /run/netns/elhub 2>/dev/null) == "$HUB_ID" && -e /run/netns/elh7 ]]; }
export ETCD_BASE="$T/etcd" ETCDCTL_API=3
CPORT=""                       # the cluster's base port, once started
# T0700_KEEP=DIR: copy the logs and workers' files there at the end.
trap '[[ -n ${T0700_KEEP:-} ]] && { mkdir -p "$T0700_KEEP"; cp -a "$T"/. "$T0700_KEEP"/; }
      bash "$INFRA/etcd-stop.sh" all >/dev/null 2>&1
      [[ -n $CPORT ]] && ETCD_CLUSTER_BASE_PORT=$CPORT bash "$INFRA/etcd-cluster-stop.sh" >/dev/null 2>&1
      _cleanup
      bash "$INFRA/netns-fault.sh" clear >/dev/null 2>&1
      bash "$INFRA/netns-down.sh" >/dev/null 2>&1' EXIT

# Ports below the kernel's ephemeral range, so that no outgoing connection
# (etcd members dial each other) takes one before etcd binds it.
LOW=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
port_free() { [[ -z $(ip netns exec "$1" ss -Htan "sport = :$2") ]]; }

# free_port NS: a port free in namespace NS, with its etcd peer port
# (+10000); free_base below checks several namespaces, which low_port does not.
free_port() { LOW_PORT_NS=$1 low_port 10000; }

# free_base NS...: BASE such that BASE+1..3 and BASE+101..103 are free in
# every NS (the ports of etcd-cluster-start.sh).
free_base() {
    local b i j ns ok
    for i in $(seq 100); do
        b=$((12000 + RANDOM % (LOW - 200 - 12000))); ok=1
        for ns in "$@"; do for j in 1 2 3 101 102 103; do
            port_free "$ns" $((b + j)) || ok=0
        done; done
        ((ok)) && { echo "$b"; return 0; }
    done
    return 1
}

# ctl NS ENDPOINTS ARGS...: etcdctl run from namespace NS (CTL_TLS:
# extra flags such as --cacert).
ctl() {
    local ns=$1 eps=$2; shift 2
    # shellcheck disable=SC2086
    ip netns exec "$ns" etcdctl --endpoints "$eps" --dial-timeout 2s --command-timeout 5s \
        ${CTL_TLS:-} "$@"
}

# nkeys NS ENDPOINTS PATTERN: how many keys of the whole keyspace contain
# PATTERN (fixed string); -1 if etcdctl failed.
nkeys() {
    local out try
    for try in 1 2 3; do
        out=$(ctl "$1" "$2" get "" --prefix --keys-only 2>>"$T/etcdctl.err") &&
            { grep -cF -- "$3" <<<"$out" || true; return 0; }
    done
    echo "etcdctl get on $2 failed 3 times:" >&2; tail -n 3 "$T/etcdctl.err" >&2
    echo -1; return 1
}

# agent I JOB NNODES ENDPOINTS CONF [ELRUN ARGS...]: start elrun on host I
# for job JOB with the etcd backend at ENDPOINTS; its workers ($WORKER,
# default rdzv_worker.sh) write into $T/JOB.  --local-addr 10.77.0.I unless
# LADDR=0; --rdzv-backend=$BACKEND (default etcd).  Sets AGENT_PID[I].
declare -A AGENT_PID
agent() {
    local i=$1 job=$2 nnodes=$3 eps=$4 conf=$5 la=(); shift 5
    [[ ${LADDR:-1} == 1 ]] && la=(--local-addr="10.77.0.$i")
    mkdir -p "$T/$job"
    ELRUN_LOG_LEVEL=info bash "$INFRA/netns-run.sh" "$i" "$ELRUN" --nnodes="$nnodes" \
        --nproc-per-node=2 --rdzv-backend="${BACKEND:-etcd}" --rdzv-id="$job" --rdzv-endpoint="$eps" \
        --rdzv-conf="$conf" "${la[@]}" "$@" --no-python "${WORKER:-$W}" "$T/$job" \
        >"$T/$job/agent.$i.log" 2>&1 &
    AGENT_PID[$i]=$!
    track_pid $!
}

# hosts JOB ROUND: the sorted host names of ROUND's workers, one line.
hosts() { grep -ho "host=elh[0-9]*" "$T/$1/w.$2".* | sed 's/host=//' | sort -u | tr '\n' ' '; }
# group_host JOB ROUND G: the index I of the host (elhI) running node rank G.
group_host() { grep -h "group=$3 " "$T/$1/w.$2".* | head -1 | sed 's/^host=elh\([0-9]*\) .*/\1/'; }
# masters JOB ROUND: the distinct MASTER_ADDR:MASTER_PORT of ROUND's workers.
masters() { grep -ho "master=[^ ]*" "$T/$1/w.$2".* | sed 's/master=//' | sort -u | tr '\n' ' '; }
# name I: a regex for host I's node name in log lines (--local-addr or hostname).
name() { echo "(10\\.77\\.0\\.$1|elh$1)/[0-9a-f]{4}"; } # host/short id
# worker_pids JOB: the sorted pids of JOB's worker processes, one line (the
# agents' command lines name the script too, not as their first word).
worker_pids() { pgrep -f "^(/bin/)?sh [^ ]*/rdzv_worker\.sh $T/$1\$" | sort -n | tr '\n' ' '; }
# alive PID: the process exists and is not a zombie.
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) && [[ -n $st && $st != Z* ]]; }

ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

KA="keep_alive_interval=1,keep_alive_max_attempt=2"   # lease TTL 2 s

# kill_agent I: SIGKILL agent I and reap it (quietly: no job-control notice).
kill_agent() { kill -KILL "${AGENT_PID[$1]}"; wait "${AGENT_PID[$1]}" 2>/dev/null || true; }

# One etcd member in the hub namespace (cases 1, 2), started on first use.
E1="" EP1="" P1=""
etcd_hub() {
    [[ -n $E1 ]] && return 0
    P1=$(free_port elhub)
    EP1=$(ETCD_NETNS=elhub ETCD_HOST=10.77.0.254 bash "$INFRA/etcd-start.sh" "$P1" 2>"$T/etcd1.log") ||
        { cat "$T/etcd1.log"; exit 1; }
    E1=10.77.0.254:$P1         # what the agents are given: no scheme
    test_expect_success 'infra: every host reaches etcd at 10.77.0.254' '
        for i in 1 2 3 4; do ctl elh$i "$EP1" endpoint health; done
    '
}

# ---------------------------------------------------------------------------
# 1. Form, shrink on SIGKILL (lease expiry), grow, shrink on a cut link.
case1() {
    etcd_hub
    J=t0700-grow
    local c="etcd_prefix=/t0700,last_call_timeout=1,$KA"
    agent 1 $J 2:4 "$E1" "$c"
    agent 2 $J 2:4 "$E1" "$c"
    agent 3 $J 2:4 "$E1" "$c"
    workers $J 6; r_g0=$?; RG0=$ROUND
    nk_run=$(nkeys elhub "$EP1" "/t0700/$J/")
    # -1 if etcdctl failed (a count of 0 must not come from an empty answer)
    nk_out=$(ctl elhub "$EP1" get "" --prefix --keys-only) &&
        nk_out=$(grep -v "^/t0700/$J/" <<<"$nk_out" | grep -c . || true) || nk_out=-1
    ttls=$(for l in $(ctl elhub "$EP1" lease list | sed -n 's/^\([0-9a-f]\{6,\}\)$/\1/p'); do
               ctl elhub "$EP1" lease timetolive "$l"; done)
    test_expect_success '3 hosts form one job over etcd: WORLD_SIZE 6, ranks 0-5, a 2 s lease each' '
        [[ $r_g0 -eq 0 ]]
        [[ "$(ranks $J $RG0)" == "0 1 2 3 4 5 " ]]
        refute grep -v "world=6 " "$T"/$J/w.$RG0.*
        [[ "$(hosts $J $RG0)" == "elh1 elh2 elh3 " ]]
        grep -qE "round $RG0: 3 nodes \(joined: .*\); this node \($(name 1)\) is rank [0-2]$" "$T/$J/agent.1.log"
        echo "$nk_run keys under /t0700/$J/, $nk_out elsewhere"
        (( nk_run > 0 && nk_out == 0 ))   # every key under <etcd_prefix>/<run_id>/
        echo "$ttls"
        [[ $(grep -c "granted with TTL(2s)" <<<"$ttls") -ge 3 ]]   # 1 s x 2
        [[ -z $(grep "granted with" <<<"$ttls" | grep -v "TTL(2s)") ]]
    '

    local t0; t0=$(date +%s%N)
    kill_agent 3
    workers $J 4 $RG0 30; r_g1=$?; RG1=$ROUND
    t_kill=$(ms_since $t0)
    test_expect_success 'an agent is SIGKILLed: its ring neighbour revokes its lease, the job re-forms with 2 hosts' '
        [[ $r_g1 -eq 0 ]]
        [[ "$(ranks $J $RG1)" == "0 1 2 3 " ]]
        [[ "$(hosts $J $RG1)" == "elh1 elh2 " ]]
        echo "re-formed in $t_kill ms"
        (( t_kill < 20000 ))   # generous for a noisy machine
        cat "$T/$J"/agent.[12].log | grep -E "node $(name 3) is gone \(its agent refuses connections\); revoking its lease"
        grep -E "node $(name 3) is gone; re-forming" "$T/$J/agent.1.log"
        grep -qE "round $RG1: 2 nodes \(joined: -; left: $(name 3)\)" "$T/$J/agent.2.log"
    '
    echo "# SIGKILLed agent: the job re-formed after $t_kill ms (lease TTL 2 s, revoked by the ring)"

    t0=$(date +%s%N)
    agent 4 $J 2:4 "$E1" "$c"
    workers $J 6 $RG1 30; r_g2=$?; RG2=$ROUND
    t_grow=$(ms_since $t0)
    test_expect_success 'a new host joins mid-run: the job grows back to 6 workers, newcomer last' '
        [[ $r_g2 -eq 0 ]]
        [[ "$(ranks $J $RG2)" == "0 1 2 3 4 5 " ]]
        [[ "$(hosts $J $RG2)" == "elh1 elh2 elh4 " ]]
        # stable ranks: the old hosts keep their node ranks, the new one goes last
        for h in 1 2; do
            g=$(grep -h "host=elh$h " "$T"/$J/w.$RG1.* | grep -o "group=[0-9]" | head -1)
            grep -q "host=elh$h .*$g " "$T"/$J/w.$RG2.* || { echo "elh$h moved"; false; }
        done
        grep -q "host=elh4 .*group=2 " "$T"/$J/w.$RG2.*
        grep -qE "round $RG2: 3 nodes \(joined: $(name 4); left: -\)" "$T/$J/agent.1.log"
        echo "grew in $t_grow ms"
    '
    echo "# new host: the job grew after $t_grow ms"

    t0=$(date +%s%N)
    bash "$INFRA/netns-fault.sh" cut 2 >/dev/null 2>&1
    workers $J 4 $RG2 30; r_g3=$?; RG3=$ROUND
    t_cut=$(ms_since $t0)
    wait_exit 2 30; r_cut=$RC
    left2=$(ip netns pids elh2)
    bash "$INFRA/netns-fault.sh" uncut 2 >/dev/null 2>&1
    test_expect_success 'a host is cut off: the others re-form; it loses its lease, says so, exits non-zero' '
        [[ $r_g3 -eq 0 ]]
        [[ "$(ranks $J $RG3)" == "0 1 2 3 " ]]
        [[ "$(hosts $J $RG3)" == "elh1 elh4 " ]]
        echo "re-formed in $t_cut ms"
        (( t_cut < 20000 ))
        cat "$T/$J/agent.2.log"
        [[ $r_cut -ne 0 && $r_cut -ne 124 ]]
        grep " ERROR " "$T/$J/agent.2.log" | grep -i "lease"
        [[ -z $left2 ]]          # nothing left running on elh2: its workers were stopped
    '
    echo "# cut-off host: the job re-formed after $t_cut ms"

    finish $J 1 4; r_fin=$?
    nk_end=$(nkeys elhub "$EP1" "/t0700/")
    test_expect_success 'the job finishes: agents exit 0 and <etcd_prefix>/<run_id>/ is gone from etcd' '
        [[ $r_fin -eq 0 ]]
        echo "keys left under /t0700/: $nk_end"
        (( nk_end == 0 ))
    '
}

# ---------------------------------------------------------------------------
# 2. The workers' store lives with the rank-0 agent.
case2() {
    etcd_hub
    J=t0700-store
    local i
    for i in 1 2 3; do WORKER=$WS agent $i $J 2:3 "$E1" "last_call_timeout=1,$KA"; done
    workers $J 6 -1 60; r_s0=$?; RS0=$ROUND
    h0=$(group_host $J "$RS0" 0)
    nk_run=$(nkeys elhub "$EP1" "/elrun/$J/")
    M0=$(masters $J "$RS0")
    test_expect_success 'workers: MASTER_ADDR is the rank-0 agent'"'"'s host, and they meet in its store' '
        [[ $r_s0 -eq 0 && -n $h0 ]]
        [[ "$(ranks $J $RS0)" == "0 1 2 3 4 5 " ]]
        echo "round $RS0: rank 0 on elh$h0, master $M0"
        [[ $M0 =~ ^10\.77\.0\.$h0:[0-9]+\ $ ]]           # one store, on that host
        grep -qE "round $RS0: 3 nodes .*this node \($(name $h0)\) is rank 0$" "$T/$J/agent.$h0.log"
        cat "$T"/$J/s.$RS0.*
        for f in "$T"/$J/s.$RS0.*; do grep -qx "store=ok hosts=elh1,elh2,elh3" "$f"; done
        (( nk_run > 0 ))      # the default etcd_prefix is /elrun
    '
    kill_agent "$h0"
    workers $J 4 "$RS0" 60; r_s1=$?; RS1=$ROUND
    h1=$(group_host $J "$RS1" 0)
    test_expect_success 'the rank-0 agent is killed: the next round has a new rank 0 and MASTER_ADDR' '
        [[ $r_s1 -eq 0 && -n $h1 ]]
        [[ "$(ranks $J $RS1)" == "0 1 2 3 " ]]
        m=$(masters $J $RS1); echo "round $RS1: rank 0 on elh$h1, master $m (was $M0)"
        [[ $h1 != "$h0" ]]
        [[ $m =~ ^10\.77\.0\.$h1:[0-9]+\ $ ]]
        refute grep -q "host=elh$h0 " "$T"/$J/w.$RS1.*
        grep -qE "node $(name $h0) is gone; re-forming" "$T/$J/agent.$h1.log"
        cat "$T"/$J/s.$RS1.*
        for f in "$T"/$J/s.$RS1.*; do grep -q "^store=ok hosts=" "$f"; done
        [[ $(sort -u "$T"/$J/s.$RS1.* | wc -l) -eq 1 ]]
        refute grep -q "elh$h0" "$T"/$J/s.$RS1.*
    '
    local rest=()
    for i in 1 2 3; do [[ $i == "$h0" ]] || rest+=("$i"); done
    finish $J "${rest[@]}"; r_fin=$?
    nk_end=$(nkeys elhub "$EP1" "/$J/")
    test_expect_success 'the job finishes: agents exit 0, its keys are gone' '
        [[ $r_fin -eq 0 ]]
        echo "keys left: $nk_end"
        (( nk_end == 0 ))
    '
}

# ---------------------------------------------------------------------------
# 5. Nothing to talk to: three refused ports (host 1); a silent host (host
# 2: the link of elh6 is cut, nothing runs there).  join_timeout 5 s.
case5() {
    local d1 d2 d3 t0
    d1=$(free_port elhub); d2=$(free_port elhub); d3=$(free_port elhub)
    bash "$INFRA/netns-fault.sh" cut 6 >/dev/null 2>&1
    t0=$(date +%s%N)
    agent 1 t0700-refused 2:2 "10.77.0.254:$d1,10.77.0.254:$d2,10.77.0.254:$d3" "join_timeout=5,$KA"
    agent 2 t0700-silent 2:2 "10.77.0.6:$d1" "join_timeout=5,$KA"
    wait_exit 1 60; r_d1=$RC; t_d1=$(ms_since $t0)
    wait_exit 2 60; r_d2=$RC; t_d2=$(ms_since $t0)
    bash "$INFRA/netns-fault.sh" uncut 6 >/dev/null 2>&1
    L1="$T/t0700-refused/agent.1.log" L2="$T/t0700-silent/agent.2.log" D1=$d1 D2=$d2 D3=$d3
    test_expect_success 'etcd unreachable (refused): exits non-zero, one ERROR line saying so' '
        cat "$L1"
        [[ $r_d1 -ne 0 && $r_d1 -ne 124 ]]
        [[ $(grep -c " ERROR " "$L1") -eq 1 ]]
        grep " ERROR " "$L1" | grep "etcd unreachable" | contains "10.77.0.254:$D1"
    '
    test_expect_success 'etcd unreachable (a silent host): exits non-zero, one ERROR line naming it' '
        cat "$L2"
        [[ $r_d2 -ne 0 && $r_d2 -ne 124 ]]
        [[ $(grep -c " ERROR " "$L2") -eq 1 ]]
        grep " ERROR " "$L2" | grep "etcd unreachable" | contains "10.77.0.6:$D1"
    '
    test_expect_success 'etcd unreachable: the line names every member tried (3)' '
        grep " ERROR " "$L1"
        for d in $D1 $D2 $D3; do grep " ERROR " "$L1" | contains "10.77.0.254:$d "; done
    '
    test_expect_success 'etcd unreachable: the agents give up within the join timeout (5 s)' '
        echo "refused: $t_d1 ms, silent: $t_d2 ms"
        (( t_d1 < 5000 + 5000 && t_d2 < 5000 + 5000 ))   # plus slack for a noisy machine
    '
    echo "# etcd unreachable: gave up after $t_d1 ms (refused), $t_d2 ms (silent host); join_timeout 5 s"
}

# ---------------------------------------------------------------------------
# 3. A 3-member cluster on elh5..elh7; the leader dies mid-run.
# leader EPS: the endpoint (of EPS) that says it is the leader.
leader() { ctl elh1 "$1" endpoint status 2>/dev/null | awk -F', ' '$5 == "true" {print $1}'; }
case3() {
    local e t0 deadline
    CPORT=$(free_base elh5 elh6 elh7)
    CEPS=$(ETCD_CLUSTER_BASE_PORT=$CPORT ETCD_CLUSTER_NETNS="elh5 elh6 elh7" \
        ETCD_ARGS="--heartbeat-interval 50 --election-timeout 500" \
        bash "$INFRA/etcd-cluster-start.sh" 2>"$T/cluster.log") || { cat "$T/cluster.log"; exit 1; }
    CEPS=${CEPS//http:\/\//}       # 10.77.0.5:B+1,10.77.0.6:B+2,10.77.0.7:B+3
    LEP=$(leader "$CEPS")
    # The agents list the leader first, so that they talk to it.
    local order=$LEP
    for e in ${CEPS//,/ }; do [[ $e == "$LEP" ]] || order+=",$e"; done
    J=t0700-failover
    for i in 1 2 3; do BACKEND=etcd-v2 agent $i $J 3:3 "$order" "$KA"; done   # the alias
    workers $J 6; r_f0=$?; RF0=$ROUND
    pids0=$(worker_pids $J)
    nlines0=$(cat "$T"/$J/agent.*.log | grep -c "round " || true)
    LI=${LEP#10.77.0.}; LI=$(( ${LI%%:*} - 4 ))    # member I is on 10.77.0.(4+I)
    t0=$(date +%s%N)
    ETCD_CLUSTER_BASE_PORT=$CPORT bash "$INFRA/etcd-cluster-member.sh" kill "$LI" >/dev/null 2>&1
    SURV=""
    for e in ${CEPS//,/ }; do [[ $e == "$LEP" ]] || SURV+="${SURV:+,}$e"; done
    deadline=$((SECONDS + 30))
    until [[ -n $(leader "$SURV") ]] || ((SECONDS > deadline)); do sleep 0.05; done
    t_elect=$(ms_since $t0)
    # Nothing may happen now.  Watch for 6 s after the election, longer than
    # a TTL plus the keeper's grace (2 + 3 s): a lease the failover broke is
    # given up by then.
    sleep 6
    pids1=$(worker_pids $J)
    nlines1=$(cat "$T"/$J/agent.*.log | grep -c "round " || true)
    alive3=0
    for i in 1 2 3; do alive "${AGENT_PID[$i]}" && alive3=$((alive3 + 1)); done
    NL=$(leader "$SURV")
    test_expect_success 'etcd leader killed mid-run: same round, same worker processes' '
        [[ $r_f0 -eq 0 ]]
        [[ "$(ranks $J $RF0)" == "0 1 2 3 4 5 " ]]
        echo "old leader $LEP (member $LI), new leader ${NL:-none} after $t_elect ms"
        [[ -n $NL && $NL != "$LEP" ]]
        grep -h -E "round|ERROR|WARN|lease" "$T"/$J/agent.*.log
        [[ $alive3 -eq 3 ]]
        [[ $(latest $J) == "$RF0" ]]
        echo "worker pids before: $pids0; after: $pids1"
        [[ -n $pids0 && $pids0 == "$pids1" && $(wc -w <<<"$pids0") -eq 6 ]]
        [[ $nlines0 == "$nlines1" ]]
        refute grep -E "re-forming|ERROR" "$T"/$J/agent.*.log
    '
    echo "# etcd leader killed: a new leader after $t_elect ms"
    finish $J 1 2 3; r_fin=$?
    nk_end=$(nkeys elh1 "$SURV" "/$J/")
    test_expect_success 'the job finishes on the 2 surviving members: agents exit 0, its keys are gone' '
        [[ $r_fin -eq 0 ]]
        echo "keys left: $nk_end"
        (( nk_end == 0 ))
    '
    ETCD_CLUSTER_BASE_PORT=$CPORT bash "$INFRA/etcd-cluster-stop.sh" >/dev/null 2>&1
    CPORT=""
}

# ---------------------------------------------------------------------------
# 4. TLS: a CA, a server certificate for 10.77.0.254, a client certificate.
case4() {
    test_pki "$T/pki" 10.77.0.254 elhub || exit 1
    PK="$T/pki"
    local p2 tls_ep e2 tlsc certs
    p2=$(free_port elhub)
    tls_ep=$(ETCD_NETNS=elhub ETCD_HOST=10.77.0.254 ETCD_SCHEME=https \
        ETCD_ARGS="--cert-file $PK/server.pem --key-file $PK/server.key --trusted-ca-file $PK/ca.pem --client-cert-auth" \
        ETCD_HEALTH_CURL_ARGS="--cacert $PK/ca.pem --cert $PK/client.pem --key $PK/client.key" \
        bash "$INFRA/etcd-start.sh" "$p2" 2>"$T/etcd-tls.log") || { cat "$T/etcd-tls.log"; exit 1; }
    e2=10.77.0.254:$p2 E2=$e2
    tlsc="protocol=https,cacert=$PK/ca.pem,cert=$PK/client.pem,key=$PK/client.key"
    certs="--cacert $PK/ca.pem --cert $PK/client.pem --key $PK/client.key"
    # Without --local-addr: node names (and MASTER_ADDR) are the host names.
    J=t0700-tls
    LADDR=0 agent 1 $J 2:2 "$e2" "$tlsc,$KA"
    LADDR=0 agent 2 $J 2:2 "$e2" "$tlsc,$KA"
    workers $J 4; r_t0=$?; RT0=$ROUND
    nk_run=$(CTL_TLS=$certs nkeys elhub "$tls_ep" "/$J/")
    finish $J 1 2; r_fin=$?
    nk_end=$(CTL_TLS=$certs nkeys elhub "$tls_ep" "/$J/")
    test_expect_success 'TLS: a 2-host job over https with a client certificate runs and finishes' '
        [[ $r_t0 -eq 0 && $r_fin -eq 0 ]]
        [[ "$(ranks $J $RT0)" == "0 1 2 3 " ]]
        [[ "$(hosts $J $RT0)" == "elh1 elh2 " ]]
        [[ "$(masters $J $RT0)" =~ ^elh[12]:[0-9]+\ $ ]]
        echo "keys while running: $nk_run; after: $nk_end"
        (( nk_run > 0 && nk_end == 0 ))
    '

    agent 1 t0700-badca 2:2 "$e2" "protocol=https,cacert=$PK/other.pem,cert=$PK/client.pem,key=$PK/client.key,join_timeout=5,$KA"
    agent 2 t0700-nocert 2:2 "$e2" "protocol=https,cacert=$PK/ca.pem,join_timeout=5,$KA"
    wait_exit 1 60; r_bad=$RC
    wait_exit 2 60; r_nc=$RC
    test_expect_success 'TLS: a server certificate from another CA is one clear line naming TLS' '
        cat "$T/t0700-badca/agent.1.log"
        [[ $r_bad -ne 0 && $r_bad -ne 124 ]]
        [[ $(grep -c " ERROR " "$T/t0700-badca/agent.1.log") -eq 1 ]]
        grep " ERROR " "$T/t0700-badca/agent.1.log" | grep "TLS" | contains "10.77.0.254:${E2#*:}"
    '
    test_expect_success 'TLS: no client certificate under --client-cert-auth is a clear TLS error' '
        cat "$T/t0700-nocert/agent.2.log"
        [[ $r_nc -ne 0 && $r_nc -ne 124 ]]
        [[ $(grep -c " ERROR " "$T/t0700-nocert/agent.2.log") -eq 1 ]]
        grep " ERROR " "$T/t0700-nocert/agent.2.log" | contains "TLS"
    '
    bash "$INFRA/etcd-stop.sh" "$p2" >/dev/null 2>&1
}

# T0700_CASES: which cases to run, in this order (default all), e.g. "3 4".
for c in ${T0700_CASES:-1 2 5 3 4}; do
    case $c in 1 | 2 | 3 | 4 | 5) "case$c" ;; *) echo "T0700_CASES: no case $c" >&2; exit 2 ;; esac
done
hosts_intact || echo "# WARNING: the simulated hosts were removed or re-made by someone else during this run: failures above may be theirs"
test_done

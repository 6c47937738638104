#!/usr/bin/env bash
# The etcd v3 client (include/elrun/etcd.h) against a real etcd (Debian's
# etcd-server 3.4), started by this script with tests/infra/etcd-*.sh on
# free 127.0.0.1 ports, its data under $T: every operation on one member, CAS
# and ADD races between two clients, lease expiry and keep-alive, watch
# latency, clear errors for an unreachable member, failover in a 3-member
# cluster (the leader or the member the client talks to killed or frozen
# mid-run), auth (users, permissions, token renewal), and TLS with a CA and
# certificates made here with openssl.
# The figures (watch latency, longest pause during a failover) are printed
# as "# ..." lines.
. "$(dirname "$0")/lib.sh"
set -o pipefail                # "$CHECK" ... | tee: the check's status counts
INFRA="$ROOT/tests/infra"
CHECK="$ROOT/$BUILD/tests/helpers/etcd_check"

if ! command -v etcd >/dev/null || ! command -v openssl >/dev/null; then
    test_skip "etcd client" "needs etcd (etcd-server) and openssl"
    test_done; exit
fi
if [[ ! -x $CHECK ]]; then
    test_skip "etcd client" "$CHECK not built"
    test_done; exit
fi

export ETCD_BASE="$T/etcd"    # every data dir lives in $T
CPORT=""                       # cluster base port, once started
trap 'bash "$INFRA/etcd-stop.sh" all >/dev/null 2>&1
      [[ -n $CPORT ]] && ETCD_CLUSTER_BASE_PORT=$CPORT bash "$INFRA/etcd-cluster-stop.sh" >/dev/null 2>&1
      _cleanup' EXIT

# Ports below the kernel's ephemeral range (lib.sh's low_port), so that no
# outgoing connection (etcd's members dial each other) takes one before etcd
# binds it.
# free_port: a free port whose peer port (+10000) is free too.
free_port() { low_port 10000; }
# free_base: BASE such that BASE+1..3 and BASE+101..103 are free.
free_base() { low_port 1 2 3 101 102 103; }

# summary FILE PATTERN: show the measured line(s) as TAP comments.
summary() { grep -h "$2" "$1" 2>/dev/null | sed 's/^/# /'; }

# ---- one member ----
P1=$(free_port)
EP=$(bash "$INFRA/etcd-start.sh" "$P1" 2>"$T/etcd1.log") || { cat "$T/etcd1.log"; exit 1; }

test_expect_success 'every operation against one member' '
    "$CHECK" basic "$EP" | tee "$T/basic.out"
    grep -q "basic: all operations ok" "$T/basic.out"
'

test_expect_success 'two clients race create-if-absent, swaps and ADD' '
    "$CHECK" race "$EP" 200 | tee "$T/race.out"
'
summary "$T/race.out" '^race:'

test_expect_success 'lease expiry deletes its key; the keeper keeps one; loss is reported' '
    "$CHECK" lease "$EP" 2 | tee "$T/lease.out"
'
summary "$T/lease.out" '^lease:'

test_expect_success 'a watch sees puts and deletes as they happen' '
    "$CHECK" watch "$EP" 300 | tee "$T/watch.out"
'
summary "$T/watch.out" '^watch:'

test_expect_success 'figures: op latencies; 64 joiners through one ADD counter vs a key each' '
    "$CHECK" bench "$EP" 64 | tee "$T/bench.out"
'
summary "$T/bench.out" '^bench:'

test_expect_success 'an unreachable member list fails fast, naming every member' '
    D1=$(free_port); D2=$(free_port)
    ETCD_OP_MS=1000 "$CHECK" error "127.0.0.1:$D1,http://127.0.0.1:$D2" | tee "$T/unreach.out"
    grep -q "rc=-113" "$T/unreach.out"
    grep -q "etcd unreachable, members tried: http://127.0.0.1:$D1 (cannot connect" "$T/unreach.out"
    grep -q "http://127.0.0.1:$D2 (cannot connect" "$T/unreach.out"
'

test_expect_success 'a dead first member is skipped' '
    D1=$(free_port)
    "$CHECK" basic "127.0.0.1:$D1,$EP" | tee "$T/skip.out"
    grep -q "basic: all operations ok" "$T/skip.out"
'

bash "$INFRA/etcd-stop.sh" "$P1" >/dev/null 2>&1

# ---- auth: a user whose role may write /elrun-test/ only ----
# Tokens live 1 s (--auth-token-ttl), so the long lease case renews them.
auth_cases() {
    PA=$(free_port)
    EPA=$(ETCD_ARGS="--auth-token-ttl 1" bash "$INFRA/etcd-start.sh" "$PA" 2>"$T/etcd-auth.log") ||
        { cat "$T/etcd-auth.log"; exit 1; }
    ctl() { etcdctl --endpoints "$EPA" "$@"; }
    { ctl user add root --new-user-password=rootpw --interactive=false &&
      ctl user grant-role root root &&
      ctl role add elrun && ctl role grant-permission elrun --prefix=true readwrite /elrun-test/ &&
      ctl user add elrun --new-user-password=pw --interactive=false &&
      ctl user grant-role elrun elrun && ctl auth enable; } >"$T/auth-setup.log" 2>&1 ||
        { cat "$T/auth-setup.log"; exit 1; }

    test_expect_success 'auth: a user works within its permissions; expired tokens are renewed' '
        ETCD_USER=elrun ETCD_PASSWORD=pw "$CHECK" basic "$EPA" | tail -1 | contains "all operations ok"
        ETCD_USER=elrun ETCD_PASSWORD=pw "$CHECK" lease "$EPA" 2
    '

    test_expect_success 'auth: outside its permissions, permission denied naming the key' '
        ETCD_USER=elrun ETCD_PASSWORD=pw "$CHECK" error "$EPA" /other/key | tee "$T/perm.out"
        grep -q "rc=-13 .*put /other/key: .*permission denied" "$T/perm.out"
        ETCD_CHECK_WATCH=1 ETCD_USER=elrun ETCD_PASSWORD=pw "$CHECK" error "$EPA" /other/ | tee "$T/permw.out"
        grep -q "rc=-13 .*etcd watch /other/: canceled by etcd: .*permission denied" "$T/permw.out"
    '

    test_expect_success 'auth: a wrong password and no user are clear errors' '
        ETCD_USER=elrun ETCD_PASSWORD=wrong "$CHECK" error "$EPA" | tee "$T/badpw.out"
        grep -q "rc=-13 .*user elrun cannot log in: .*authentication failed" "$T/badpw.out"
        "$CHECK" error "$EPA" | tee "$T/nouser.out"
        grep -q "rc=-13 .*etcd has auth enabled, give a user and password" "$T/nouser.out"
    '
    bash "$INFRA/etcd-stop.sh" "$PA" >/dev/null 2>&1
}
if command -v etcdctl >/dev/null; then
    auth_cases
else
    test_skip "auth cases" "needs etcdctl (etcd-client) to set up users"
fi

# ---- a 3-member cluster ----
CPORT=$(free_base)
export ETCD_CLUSTER_BASE_PORT=$CPORT
EPS=$(bash "$INFRA/etcd-cluster-start.sh" 2>"$T/cluster.log") || { cat "$T/cluster.log"; exit 1; }
M="$INFRA/etcd-cluster-member.sh"

# failover ACTION WHO: run ops for 6 s with the target member listed first
# (so the client talks to it), and ACTION it (kill|pause) once ops run.
# WHO: leader, or follower.
failover() {
    local act=$1 who=$2 L tgt order i out="$T/fo-$1-$2.out"
    L=$(bash "$M" leader 2>/dev/null)
    if [[ $who == leader ]]; then tgt=$L; else tgt=$((L % 3 + 1)); fi
    order="http://127.0.0.1:$((CPORT + tgt))"
    for i in 1 2 3; do [[ $i == "$tgt" ]] || order+=",http://127.0.0.1:$((CPORT + i))"; done
    rm -f "$T/fo.ready"
    "$CHECK" failover "$order" 6000 "$T/fo.ready" >"$out" 2>&1 &
    local pid=$!
    wait_for_file "$T/fo.ready" 20
    grep -q "127.0.0.1:$((CPORT + tgt))" "$T/fo.ready"
    bash "$M" "$act" "$tgt" 2>/dev/null
    local rc=0
    wait "$pid" || rc=$?
    cat "$out"
    [[ $act == pause ]] && bash "$M" resume "$tgt" 2>/dev/null
    bash "$M" start "$tgt" >/dev/null 2>&1     # back to 3 healthy members
    return $rc
}

test_expect_success 'kill the leader the client talks to: ops and the watch go on elsewhere' '
    failover kill leader
'
summary "$T/fo-kill-leader.out" '^failover: [0-9l]'

test_expect_success 'kill a follower the client talks to' '
    failover kill follower
'
summary "$T/fo-kill-follower.out" '^failover: [0-9l]'

test_expect_success 'freeze (SIGSTOP) the member the client talks to: timeouts move it' '
    failover pause follower
'
summary "$T/fo-pause-follower.out" '^failover: [0-9l]'

test_expect_success 'every operation against the cluster' '
    "$CHECK" basic "$EPS" | tail -1 | contains "all operations ok"
'
ETCD_CLUSTER_BASE_PORT=$CPORT bash "$INFRA/etcd-cluster-stop.sh" >/dev/null 2>&1
CPORT=""

# ---- TLS ----
test_pki "$T/pki" 127.0.0.1 localhost || exit 1
PK="$T/pki"
P2=$(free_port)
TLS_EP=$(ETCD_SCHEME=https \
    ETCD_ARGS="--cert-file $PK/server.pem --key-file $PK/server.key --trusted-ca-file $PK/ca.pem --client-cert-auth" \
    ETCD_HEALTH_CURL_ARGS="--cacert $PK/ca.pem --cert $PK/client.pem --key $PK/client.key" \
    bash "$INFRA/etcd-start.sh" "$P2" 2>"$T/etcd-tls.log") || { cat "$T/etcd-tls.log"; exit 1; }

test_expect_success 'TLS: every operation over https with a client certificate' '
    ETCD_CACERT=$PK/ca.pem ETCD_CERT=$PK/client.pem ETCD_KEY=$PK/client.key \
        "$CHECK" basic "$TLS_EP" | tee "$T/tls.out"
    grep -q "basic: all operations ok" "$T/tls.out"
'

test_expect_success 'TLS: bare host:port with protocol=https' '
    ETCD_PROTOCOL=https ETCD_CACERT=$PK/ca.pem ETCD_CERT=$PK/client.pem ETCD_KEY=$PK/client.key \
        "$CHECK" basic "127.0.0.1:$P2" | tail -1 | contains "all operations ok"
'

test_expect_success 'TLS: a server certificate from another CA is a clear TLS failure' '
    ETCD_CACERT=$PK/other.pem ETCD_CERT=$PK/client.pem ETCD_KEY=$PK/client.key \
        "$CHECK" error "$TLS_EP" | tee "$T/badca.out"
    grep -q "rc=-5011" "$T/badca.out"
    grep -q "TLS failure with every member: $TLS_EP (TLS failure: SSL certificate problem" "$T/badca.out"
'

test_expect_success 'TLS: no client certificate is a clear TLS failure' '
    ETCD_CACERT=$PK/ca.pem "$CHECK" error "$TLS_EP" | tee "$T/nocert.out"
    grep -q "rc=-5011" "$T/nocert.out"
    grep -q "TLS failure" "$T/nocert.out"
'

test_expect_success 'TLS: plain http to a TLS member fails, saying so' '
    ETCD_OP_MS=1000 "$CHECK" error "http://127.0.0.1:$P2" | tee "$T/plain.out"
    grep -q "rc=" "$T/plain.out"
    grep -q "127.0.0.1:$P2" "$T/plain.out"
'

bash "$INFRA/etcd-stop.sh" "$P2" >/dev/null 2>&1

test_expect_success 'TLS: a server certificate without client auth under --client-cert-auth is explained' '
    P3=$(free_port)
    EP3=$(ETCD_SCHEME=https \
        ETCD_ARGS="--cert-file $PK/serveronly.pem --key-file $PK/server.key --trusted-ca-file $PK/ca.pem --client-cert-auth" \
        ETCD_HEALTH_CURL_ARGS="--cacert $PK/ca.pem --cert $PK/client.pem --key $PK/client.key" \
        bash "$INFRA/etcd-start.sh" "$P3" 2>"$T/etcd-tls3.log")
    ETCD_OP_MS=1000 ETCD_CACERT=$PK/ca.pem ETCD_CERT=$PK/client.pem ETCD_KEY=$PK/client.key \
        "$CHECK" error "$EP3" | tee "$T/gw.out"
    bash "$INFRA/etcd-stop.sh" "$P3" >/dev/null 2>&1
    grep -q "the server certificate must also allow client auth" "$T/gw.out"
'

test_done

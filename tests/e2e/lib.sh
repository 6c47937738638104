# lib.sh -- helpers for the end-to-end test scripts (sourced).
#
#   . "$(dirname "$0")/lib.sh"
#   test_expect_success 'a store serves a set' '
#       ...commands; a non-zero status fails the case...
#   '
#   test_done
#
# Each script gets a private temporary directory $T (removed at exit) and a
# cleanup that kills every process the script started (its process group and
# any pid listed with track_pid).  Readiness is waited for with wait_for_file /
# wait_for_line, never with a fixed sleep.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-build}
ELRUN="$ROOT/$BUILD/elrun"
T=$(mktemp -d "${TMPDIR:-/tmp}/elrun-test.XXXXXX")
_pass=0 _fail=0 _n=0 _pids=()

# Also written to a file: a case runs in a subshell, whose _pids the
# script's cleanup never sees (a server started in a case outlived it).
track_pid() { _pids+=("$@"); printf '%s\n' "$@" >>"$T/.tracked_pids"; }

# _descendants PID: every live descendant of PID (children first listed last).
_descendants() {
    local c
    for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        _descendants "$c"; echo "$c"
    done
}

_cleanup() {
    local p
    # Disowned, the jobs killed below are not reported ("line 39: N Killed").
    disown -a 2>/dev/null
    for p in "${_pids[@]:-}" $(cat "$T/.tracked_pids" 2>/dev/null); do
        [[ -n $p ]] && kill -KILL "$p" 2>/dev/null
    done
    # Every descendant of this script that is still alive.
    local d; for d in $(_descendants $$); do kill -KILL "$d" 2>/dev/null; done
    rm -rf "$T"
}
trap _cleanup EXIT
trap 'exit 130' INT TERM

# test_expect_success NAME SCRIPT: run SCRIPT in a subshell with -e and
# pipefail; any failing command (or stage of a pipeline) fails the case.  (Not inside an `if`: bash ignores -e in a
# condition, and only the last command would count.)
test_expect_success() {
    local name=$1 script=$2 st
    _n=$((_n + 1))
    local log="$T/case.$_n.log"
    # _case_fd: the case log, where refute and wait_until report even when
    # the command at fault has its stderr redirected.
    ( set -eo pipefail; _in_case=1; exec {_case_fd}>&2; [[ -n ${TEST_TRACE:-} ]] && set -x; eval "$script" ) \
        >"$log" 2>&1
    st=$?
    if ((st == 0)); then
        echo "ok $_n - $name"; _pass=$((_pass + 1))
    else
        echo "not ok $_n - $name"; _fail=$((_fail + 1))
        sed 's/^/    /' "$log" | tail -40
        _show_on_failure
    fi
}

# on_failure_show FILE...: if the case fails, print the end of each FILE
# (a glob, expanded then) after its log: what a CI log needs to explain a
# failure the case's own assertions cannot, such as a job's batch log.
on_failure_show() { printf '%s\n' "$@" >>"$T/case.$_n.show"; }
_show_on_failure() {
    local pat f
    [[ -f $T/case.$_n.show ]] || return 0
    while read -r pat; do
        for f in $pat; do
            [[ -f $f ]] || continue
            echo "    --- the end of $f:"
            tail -n 25 "$f" | sed 's/^/    | /'
        done
    done <"$T/case.$_n.show"
}

test_skip() { echo "ok $((_n + 1)) - $1 # SKIP $2"; _n=$((_n + 1)); }

test_done() {
    echo "$_pass passed, $_fail failed"
    ((_fail == 0))
}

# Inside a case, a failed refute or wait_until ends the case; outside
# (a script's own setup, whose result a later case checks), it returns 1.
_in_case=
_fail_here() {
    [[ -n $_in_case ]] && exit 1
    return 1
}

# refute CMD [ARG...]: assert that CMD fails.  Use it instead of `! CMD`,
# which set -e ignores anywhere but on a case's last line.  CMD's output and
# redirections are its own (`refute "$ELRUN" --bogus 2>"$T/err"` fills
# $T/err).  Only a plain "no" counts as failing: the case fails when CMD
# succeeds, cannot run (126, 127) or dies from a signal (> 128); for grep
# and pgrep, on anything but 1 (no match; 2 is an error such as a missing
# file); for timeout, on 124 (it timed out).
refute() {
    local st=0 why=""
    "$@" || st=$?
    if ((st == 0)); then
        why="this succeeded but must fail"
    elif ((st == 126 || st == 127 || st > 128)); then
        why="this must fail, but could not run or was killed (status $st)"
    elif [[ ${1##*/} == grep || ${1##*/} == pgrep ]] && ((st != 1)); then
        why="this must find nothing, but failed with status $st (an error, not \"no match\")"
    elif [[ ${1##*/} == timeout ]] && ((st == 124)); then
        why="this must fail, but timed out"
    fi
    [[ -z $why ]] && return 0
    echo "refute: $why: $*" >&"${_case_fd:-2}"
    _fail_here || return 1
}

# CMD | contains GREP-ARGS...: grep -q on all of stdin.  `CMD | grep -q X`
# exits at the first match, so CMD, if it writes more after that, dies of
# SIGPIPE, and pipefail fails the case although X was there.  contains reads
# everything first (so CMD ends normally), then greps.
contains() {
    local in
    in=$(cat; echo .)
    grep -q "$@" <<<"${in%.}"
}

# is ACTUAL EXPECTED: equal, else says both (a bare [[ ]] fails silently).
is() { [[ $1 == "$2" ]] || { printf 'got:      %s\nexpected: %s\n' "$1" "$2" >&"${_case_fd:-2}"; return 1; }; }

# low_port [OFFSET...]: a TCP port that no socket uses, nor PORT+OFFSET for
# each OFFSET (10000: etcd's peer port; 1 2 3: a run), below the kernel's
# ephemeral range: a port bind(0) hands out may become any outgoing
# connection's source port before a server binds it.  In the network
# namespace $LOW_PORT_NS when set.
low_port() {
    local low span p i o ok
    low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    span=$((low - 22000))
    ((span > 100)) || { echo "low_port: the ephemeral range starts at $low" >&2; return 1; }
    for i in $(seq 100); do
        p=$((12000 + RANDOM % span)) ok=1
        for o in 0 "$@"; do
            [[ -z $(${LOW_PORT_NS:+ip netns exec "$LOW_PORT_NS"} ss -Htan "sport = :$((p + o))") ]] || { ok=; break; }
        done
        [[ -n $ok ]] && { echo "$p"; return 0; }
    done
    echo "low_port: no free port below $low" >&2
    return 1
}

# wait_until COND [TIMEOUT_S]: evaluate the shell condition COND (a string)
# every 20 ms until it is true.  After TIMEOUT_S (default 20) seconds it says
# which condition never held and ends the case as failed, so a readiness loop
# can never give up silently.
wait_until() {
    local cond=$1 deadline=$((SECONDS + ${2:-20}))
    until eval "$cond"; do
        if ((SECONDS >= deadline)); then
            echo "wait_until: timed out after ${2:-20} s waiting until: $cond" >&"${_case_fd:-2}"
            _fail_here || return 1
        fi
        sleep 0.02
    done
}

# wait_for_file PATH [TIMEOUT_S]: until PATH exists and is non-empty.
wait_for_file() {
    local f=$1 deadline=$((SECONDS + ${2:-20}))
    until [[ -s $f ]]; do
        ((SECONDS < deadline)) || { echo "timed out waiting for $f" >&2; return 1; }
        inotifywait -qq -t 1 -e create,modify,close_write "$(dirname "$f")" 2>/dev/null || sleep 0.01
    done
}

# wait_for_line FILE REGEX [TIMEOUT_S]: until a line of FILE matches REGEX.
wait_for_line() {
    local f=$1 re=$2 deadline=$((SECONDS + ${3:-20}))
    until [[ -f $f ]] && grep -qE "$re" "$f"; do
        ((SECONDS < deadline)) || { echo "timed out waiting for /$re/ in $f" >&2; cat "$f" >&2 2>/dev/null; return 1; }
        sleep 0.01
    done
}

# start_store VAR_PORT: start `elrun store` on a free port in the background;
# sets STORE_PORT and STORE_PID.
start_store() {
    # Not the last store's line: the redirection below truncates the file
    # only once the background child runs.
    rm -f "$T/store.out"
    "$ELRUN" store --listen 127.0.0.1:0 "$@" >"$T/store.out" 2>"$T/store.err" &
    STORE_PID=$!
    track_pid "$STORE_PID"
    wait_for_line "$T/store.out" '^listening on ' 20
    STORE_PORT=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$T/store.out" | head -1)
    [[ -n $STORE_PORT ]]
}

# netns_hosts N: bring up N simulated hosts elh1..elhN (tests/infra/netns-up.sh)
# for this script alone.  They are one set for the whole machine and
# netns-down.sh ends every process inside them, so rather than tear them down
# under another user: hold /run/lock/elrun-netns.lock (fd 9) until the script
# exits, and wait (up to 10 min) until no process is left inside them (someone's
# experiment that does not take the lock).  The caller's EXIT trap should run
# netns-down.sh.
netns_hosts() {
    local ns until=$((SECONDS + 600))
    exec 9>/run/lock/elrun-netns.lock
    flock -w 600 9 || { echo "Bail out! /run/lock/elrun-netns.lock held for 10 min"; exit 1; }
    while :; do
        local busy=0
        for ns in $(cat /run/elastic-netns/created 2>/dev/null); do
            [[ -n $(ip netns pids "$ns" 2>/dev/null) ]] && busy=1
        done
        ((busy)) || break
        ((SECONDS < until)) || { echo "Bail out! processes still run inside the simulated hosts"; exit 1; }
        sleep 0.5
    done
    bash "$ROOT/tests/infra/netns-down.sh" >/dev/null 2>&1
    bash "$ROOT/tests/infra/netns-up.sh" "$1" >/dev/null 2>"$T/netns.log" || { cat "$T/netns.log"; exit 1; }
}

# test_pki DIR IP DNS: a throw-away PKI for TLS tests, made with openssl in
# DIR: ca.pem/ca.key; server.pem/.key for IP and DNS, allowed for server and
# client auth (etcd 3.4's gateway dials its own gRPC server with the server
# certificate, so under --client-cert-auth it must allow client auth too);
# serveronly.pem (the same key, server auth only); client.pem/.key (CN
# elrun); other.pem, a CA that signed nothing.  openssl's chatter goes to
# DIR/log, shown if it fails.
test_pki() (
    mkdir -p "$1" && cd "$1" || exit 1
    {
        openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=elrun test CA" \
            -keyout ca.key -out ca.pem &&
        openssl req -newkey rsa:2048 -nodes -subj "/CN=$2" -keyout server.key -out server.csr &&
        printf "subjectAltName=IP:%s,DNS:%s\nextendedKeyUsage=serverAuth,clientAuth\n" "$2" "$3" >server.ext &&
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
            -extfile server.ext -out server.pem &&
        printf "subjectAltName=IP:%s,DNS:%s\nextendedKeyUsage=serverAuth\n" "$2" "$3" >serveronly.ext &&
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
            -extfile serveronly.ext -out serveronly.pem &&
        openssl req -newkey rsa:2048 -nodes -subj "/CN=elrun" -keyout client.key -out client.csr &&
        printf "extendedKeyUsage=clientAuth\n" >client.ext &&
        openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
            -extfile client.ext -out client.pem &&
        openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=other CA" \
            -keyout other.key -out other.pem
    } >log 2>&1 || { cat log; exit 1; }
)

# t01-common.bash -- helpers for the agent's e2e scripts (t01NN-*.sh),
# sourced after lib.sh.

# free_port: a TCP port of 127.0.0.1 that no socket uses right now, below
# the kernel's ephemeral range: a port the kernel handed out (bind to 0)
# can be taken as the source port of any outgoing connection before an
# agent binds it, and then no agent can host the store there (seen once:
# both agents of a c10d job waited 60 s for a store nobody served).
free_port() {
    local low p i
    low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    for i in $(seq 100); do
        p=$((10000 + RANDOM % (low - 10000)))
        [[ -z $(ss -Htan "sport = :$p") ]] && { echo "$p"; return 0; }
    done
    echo "free_port: no free port below $low" >&2
    return 1
}

# envval FILE NAME: the value of NAME in an env dump.
envval() { sed -n "s/^$2=//p" "$1" | head -1; }

# torch_python: a python3 that imports torch (Debian's python3-torch), or
# nothing.
torch_python() {
    local p
    for p in "${PYTHON_EXEC:-}" /usr/bin/python3 python3; do
        [[ -n $p ]] && "$p" -c 'import torch' 2>/dev/null && { command -v "$p"; return; }
    done
}

# tree_pids PID: PID and every live descendant.
tree_pids() {
    local c
    echo "$1"
    for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do tree_pids "$c"; done
}

# alive PID: the process exists and is not a zombie.
alive() {
    local st
    st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    [[ -n $st && $st != Z* ]]
}

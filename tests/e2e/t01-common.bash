# t01-common.bash -- helpers for the agent's e2e scripts (t01NN-*.sh),
# sourced after lib.sh.

# free_port: lib.sh's low_port (below the ephemeral range: once, both
# agents of a c10d job waited 60 s for a store nobody could host on a port
# bind(0) had handed out).
free_port() { low_port; }

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

#!/usr/bin/env bash
# Real PyTorch (Debian's python3-torch 1.13) under elrun: a gloo DDP job in
# which rank 1 dies on the first attempt resumes from its checkpoint and
# succeeds; a worker decorated with @record that raises gives the same
# failure table as torchrun itself (run side by side through the
# bench/agent_torchrun311 shim), and so does a worker killed by a signal.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/t01-common.bash"

PY=$(torch_python)
if [[ -z $PY ]]; then
    test_skip 'PyTorch DDP under elrun' 'no python3 with torch (apt-get install python3-torch)'
    test_done; exit
fi
export PYTHON_EXEC=$PY
TORCHRUN="$ROOT/bench/agent_torchrun311"

test_expect_success 'DDP (gloo): rank 1 dies on attempt 0, the job resumes from its checkpoint' '
    mkdir "$T/ddp"
    "$ELRUN" --standalone --nproc-per-node=2 --max-restarts=2 \
        "$ROOT/tests/e2e/py/agent_ddp_resume.py" "$T/ddp" 20 5 >"$T/ddp/out" 2>"$T/ddp/err"
    cat "$T/ddp/result"
    grep -q "^resumed_from=[1-9][0-9]* final=20 attempt=1 world=2 loss=" "$T/ddp/result"
    grep -q "killed by signal 9 (KILL)" "$T/ddp/err"
    grep -q "restarting (1 of 2 restarts used)" "$T/ddp/err"
'

# box FILE: the failure table of a launcher'"'"'s stderr, with the run'"'"'s own
# values (time, pid, log path) replaced.
box() {
    sed -n "/^=====/,\$p" "$1" | sed -E \
        -e "s/^(  time      : ).*/\1TIME/" \
        -e "s/\(pid: [0-9]+\)/(pid: PID)/" -e "s/by PID [0-9]+/by PID PID/" \
        -e "s#^(  error_file: ).*/(attempt_[0-9]+/[0-9]+/error.json)#\1LOGDIR/\2#"
}

test_expect_success '@record worker raises: elrun prints torchrun'"'"'s table' '
    mkdir "$T/rec"; cp "$ROOT/tests/e2e/py/agent_raiser.py" "$T/rec/raiser.py"; cd "$T/rec"
    set +e
    "$ELRUN" --standalone --nproc-per-node=2 --log-dir "$T/rec/el" raiser.py 2>el.err; s1=$?
    "$TORCHRUN" --standalone --nproc_per_node=2 --monitor_interval=0.1 --log_dir "$T/rec/tr" \
        raiser.py 2>tr.err; s2=$?
    set -e
    [[ $s1 == 1 && $s2 == 1 ]]
    box el.err >el.box; box tr.err >tr.box
    cat el.box
    [[ $(wc -l <el.box) -gt 12 ]]
    diff tr.box el.box
    grep -q "RuntimeError: boom from rank 1" el.box
'

cat >"$T/failer.sh" <<'EOF'
#!/bin/bash
[[ $RANK == 1 ]] && kill -KILL $$
exec sleep 60
EOF
chmod +x "$T/failer.sh"

test_expect_success 'a worker killed by SIGKILL: the same table as torchrun'"'"'s' '
    mkdir "$T/sig"; cd "$T/sig"
    set +e
    "$ELRUN" --standalone --nproc-per-node=2 --no-python "$T/failer.sh" 2>el.err; s1=$?
    "$TORCHRUN" --standalone --nproc_per_node=2 --monitor_interval=0.1 --no_python \
        "$T/failer.sh" 2>tr.err; s2=$?
    set -e
    [[ $s1 == 1 && $s2 == 1 ]]
    box el.err >el.box; box tr.err >tr.box
    cat el.box
    diff tr.box el.box
    grep -q "Signal 9 (SIGKILL) received by PID" el.box
'

test_expect_success 'a restarted round never sees the previous attempt'"'"'s keys' '
    mkdir "$T/keys"
    cat >"$T/keys/k.py" <<EOF
import os, torch.distributed as dist
dist.init_process_group("gloo")
store = dist.distributed_c10d._get_default_store()
a = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
if a == 0:
    store.set("leftover", "attempt0")
    dist.barrier()
    if dist.get_rank() == 1:
        os._exit(3)
    import time; time.sleep(60)
# Attempt 1: its keys live under /worker/attempt_1/, and the agent deleted
# the keys of attempt 0 before starting it.
store.set("mine", "attempt1")
from datetime import timedelta
raw = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                    timeout=timedelta(seconds=1))
def has(k):
    try:
        raw.get(k)
        return 1
    except Exception:
        return 0
open("$T/keys/r%d" % dist.get_rank(), "w").write("%d %d" % (
    has("/worker/attempt_0/default_pg/leftover"), has("/worker/attempt_1/default_pg/mine")))
dist.barrier()
EOF
    "$ELRUN" --standalone --nproc-per-node=2 --max-restarts=1 "$T/keys/k.py" 2>"$T/keys/err"
    [[ $(cat $T/keys/r0) == "0 1" && $(cat $T/keys/r1) == "0 1" ]]
'

test_done

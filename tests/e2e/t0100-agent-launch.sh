#!/usr/bin/env bash
# The launcher starts workers with torchrun's exact environment, accepts
# torchrun's command lines (PET_* variables, TorchX's dist.ddp line), and
# rejects bad ones with a one-line message and exit status 2.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/t01-common.bash"

# A worker that dumps its environment and argv to $1/env.<round>.<rank>.
cat >"$T/envdump.sh" <<'EOF'
#!/bin/sh
d=$1; shift
env > "$d/env.$TORCHELASTIC_RESTART_COUNT.$RANK"
echo "argv=$*" >> "$d/env.$TORCHELASTIC_RESTART_COUNT.$RANK"
EOF
chmod +x "$T/envdump.sh"

# A python worker that records its argv and whether it runs unbuffered.
cat >"$T/s.py" <<EOF
import os, sys
open("$T/py/out." + os.environ["LOCAL_RANK"], "w").write(" ".join(sys.argv) + " u=%d" % sys.stdout.write_through)
EOF


test_expect_success 'success: exit 0, every worker ran, quietly' '
    "$ELRUN" --standalone --nproc-per-node=2 --no-python sh -c "touch $T/ran.\$RANK" >"$T/o" 2>"$T/e"
    [[ -f $T/ran.0 && -f $T/ran.1 ]]
    refute grep -v OMP_NUM_THREADS "$T/e"
'

test_expect_success 'nproc 3: every rank gets torchrun'"'"'s environment' '
    mkdir "$T/e3"
    env -u OMP_NUM_THREADS "$ELRUN" --standalone --nproc-per-node=3 --max-restarts=2 \
        --no-python "$T/envdump.sh" "$T/e3" "a" "\${local_rank}" "x\$local_rank" 2>"$T/err"
    for r in 0 1 2; do
        f=$T/e3/env.0.$r
        [[ $(envval $f RANK) == $r && $(envval $f LOCAL_RANK) == $r ]]
        [[ $(envval $f ROLE_RANK) == $r ]]
        [[ $(envval $f WORLD_SIZE) == 3 && $(envval $f LOCAL_WORLD_SIZE) == 3 ]]
        [[ $(envval $f ROLE_WORLD_SIZE) == 3 ]]
        [[ $(envval $f GROUP_RANK) == 0 && $(envval $f GROUP_WORLD_SIZE) == 1 ]]
        [[ $(envval $f ROLE_NAME) == default ]]
        [[ $(envval $f MASTER_ADDR) == 127.0.0.1 ]]
        [[ $(envval $f MASTER_PORT) =~ ^[0-9]+$ ]]
        [[ $(envval $f TORCHELASTIC_RESTART_COUNT) == 0 ]]
        [[ $(envval $f TORCHELASTIC_MAX_RESTARTS) == 2 ]]
        [[ $(envval $f TORCHELASTIC_RUN_ID) =~ ^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$ ]]
        [[ $(envval $f TORCHELASTIC_USE_AGENT_STORE) == True ]]
        [[ $(envval $f TORCHELASTIC_ERROR_FILE) == */attempt_0/$r/error.json ]]
        [[ $(envval $f NCCL_ASYNC_ERROR_HANDLING) == 1 ]]
        [[ $(envval $f TORCH_NCCL_ASYNC_ERROR_HANDLING) == 1 ]]
        [[ $(envval $f OMP_NUM_THREADS) == 1 ]]
        [[ $(envval $f argv) == "a $r x$r" ]]
    done
    # Every rank sees the same store and run id.
    [[ $(cat $T/e3/env.0.* | grep -c "^MASTER_PORT=$(envval $T/e3/env.0.0 MASTER_PORT)$") == 3 ]]
    grep -q "OMP_NUM_THREADS=1" "$T/err"
'

test_expect_success 'nproc 1: no OMP_NUM_THREADS added; inherited values kept' '
    mkdir "$T/e1"
    env -u OMP_NUM_THREADS NCCL_ASYNC_ERROR_HANDLING=0 "$ELRUN" --nproc-per-node=1 \
        --master-port=0 --rdzv-id=job7 --role=trainer --no-python "$T/envdump.sh" "$T/e1"
    f=$T/e1/env.0.0
    [[ $(envval $f RANK) == 0 && $(envval $f WORLD_SIZE) == 1 ]]
    [[ $(envval $f ROLE_NAME) == trainer && $(envval $f TORCHELASTIC_RUN_ID) == job7 ]]
    [[ $(envval $f NCCL_ASYNC_ERROR_HANDLING) == 0 ]]
    refute grep -q "^OMP_NUM_THREADS=" $f
    [[ $(envval $f TORCHELASTIC_ERROR_FILE) == */job7_*/attempt_0/0/error.json ]]
'

test_expect_success 'the workers'"'"' MASTER_ADDR:MASTER_PORT is the agent'"'"'s store' '
    "$ELRUN" --standalone --nproc-per-node=1 --no-python bash -c \
        "exec 3<>/dev/tcp/\$MASTER_ADDR/\$MASTER_PORT && echo reached >$T/reach"
    grep -q reached "$T/reach"
'

test_expect_success 'PET_* variables stand in for flags; flags win' '
    mkdir "$T/pet"
    PET_NPROC_PER_NODE=2 PET_STANDALONE=1 PET_NO_PYTHON=1 PET_MAX_RESTARTS=3 PET_ROLE=pet \
        "$ELRUN" "$T/envdump.sh" "$T/pet"
    [[ $(envval $T/pet/env.0.1 LOCAL_WORLD_SIZE) == 2 ]]
    [[ $(envval $T/pet/env.0.1 TORCHELASTIC_MAX_RESTARTS) == 3 ]]
    [[ $(envval $T/pet/env.0.1 ROLE_NAME) == pet ]]
    rm -f "$T"/pet/*
    PET_NPROC_PER_NODE=2 PET_STANDALONE=1 PET_NO_PYTHON=1 \
        "$ELRUN" --nproc_per_node=1 "$T/envdump.sh" "$T/pet"
    [[ -f $T/pet/env.0.0 && ! -f $T/pet/env.0.1 ]]
    set +e; PET_NPROC_PER_NODE=many "$ELRUN" --no-python true 2>"$T/pete"; st=$?; set -e
    [[ $st == 2 ]]
    grep -q "PET_NPROC_PER_NODE=many" "$T/pete"
'

test_expect_success 'TorchX dist.ddp command line (one node) is accepted as is' '
    mkdir "$T/tx"
    cat >"$T/tx/train.py" <<EOF
import os, sys
open(os.path.join("$T/tx", "r" + os.environ["RANK"]), "w").write(" ".join(sys.argv[1:]) + " " + os.environ["ROLE_NAME"] + "|" + os.environ["WORLD_SIZE"])
print("hello from", os.environ["RANK"])
EOF
    # torchx/components/dist.py: ddp(-j 1x2) as run by bash -c, app id app-1
    bash -c "\"$ELRUN\" --rdzv_backend c10d --rdzv_endpoint \${TORCHX_RANK0_HOST:=localhost}:0 --rdzv_id app-1 --nnodes 1 --nproc_per_node 2 --tee 3 --role \"\" \"$T/tx/train.py\" --epochs 1" >"$T/tx/out" 2>&1
    [[ $(cat $T/tx/r0) == "--epochs 1 |2" && $(cat $T/tx/r1) == "--epochs 1 |2" ]]
    grep -q "^\[0\]:hello from 0" "$T/tx/out"
    grep -q "^\[1\]:hello from 1" "$T/tx/out"
'

test_expect_success 'python scripts run as python3 -u SCRIPT, -m as python3 -u -m' '
    mkdir -p "$T/py/pkg"
    cp "$T/s.py" "$T/py/s.py"
    cp "$T/py/s.py" "$T/py/pkg/mod.py"; touch "$T/py/pkg/__init__.py"
    env -u PYTHONUNBUFFERED "$ELRUN" --standalone "$T/py/s.py" one
    [[ $(cat $T/py/out.0) == "$T/py/s.py one u=1" ]]
    rm "$T/py/out.0"
    (cd "$T/py" && env -u PYTHONUNBUFFERED "$ELRUN" --standalone -m pkg.mod two)
    [[ $(cat $T/py/out.0) == "$T/py/pkg/mod.py two u=1" ]]
    rm "$T/py/out.0"
    PYTHON_EXEC=python3 "$ELRUN" --standalone --run-path "$T/py/s.py" three
    grep -q "s.py.*three" "$T/py/out.0"
'

test_expect_success 'usage errors: one line, what and how, exit 2' '
    for args in "--bogus x" "--nproc-per-node=0 x" "--nnodes=3:1 x" \
                "--no-python -m x" "--nproc-per-node=2" "--rdzv-backend=zk x" \
                "--standalone --nnodes=2 x" "--nnodes=2 --node-rank=5 x" \
                "--rdzv-backend=etcd x" "--tee=7 x"; do
        set +e; "$ELRUN" $args >"$T/u.out" 2>"$T/u.err"; st=$?; set -e
        [[ $st == 2 ]] || { echo "exit $st for: $args"; false; }
        [[ $(wc -l <"$T/u.err") == 1 ]] || { echo "for: $args"; cat "$T/u.err"; false; }
        grep -q "^elrun: error: " "$T/u.err"
        [[ ! -s $T/u.out ]]
    done
    set +e; "$ELRUN" --standalone --no-python /no/such/prog 2>"$T/u.err"; st=$?; set -e
    [[ $st == 2 ]]; grep -q "/no/such/prog.*does not exist" "$T/u.err"
    set +e; "$ELRUN" --standalone --no-python no-such-prog-xyz 2>"$T/u.err"; st=$?; set -e
    [[ $st == 2 ]]; grep -q "not found in PATH" "$T/u.err"
    set +e; "$ELRUN" --standalone "$T/missing.py" 2>"$T/u.err"; st=$?; set -e
    [[ $st == 2 ]]; grep -q "missing.py.*cannot be read" "$T/u.err"
'

test_expect_success 'an exec failure is reported as such, not retried' '
    printf "#!/no/such/interpreter\n" >"$T/badinterp"; chmod +x "$T/badinterp"
    set +e; "$ELRUN" --standalone --nproc-per-node=2 --max-restarts=3 --no-python "$T/badinterp" 2>"$T/x.err"; st=$?; set -e
    [[ $st == 2 ]]
    grep -q "cannot run .*badinterp.*No such file or directory" "$T/x.err"
    refute grep -q restarting "$T/x.err"
'

test_expect_success 'an unreachable static endpoint: clear error, exit 1' '
    set +e
    "$ELRUN" --nnodes=2 --node-rank=1 --master-addr=127.0.0.1 --master-port=1 \
        --rdzv-conf=timeout=1 --no-python true 2>"$T/ur.err"; st=$?
    set -e
    [[ $st == 1 ]]
    grep -q "cannot reach the rendezvous store at 127.0.0.1:1" "$T/ur.err"
'

test_expect_success '--help and the man page' '
    "$ELRUN" --help >"$T/help"
    grep -q -- "--nproc-per-node" "$T/help"
    grep -q -- "--signals-to-handle" "$T/help"
    grep -q "nproc" "$ROOT/docs/elrun.1"
    if command -v man >/dev/null; then
        man -l "$ROOT/docs/elrun.1" >"$T/man.txt" 2>/dev/null
        grep -q -- "--nproc-per-node" "$T/man.txt"
    fi
'

test_done

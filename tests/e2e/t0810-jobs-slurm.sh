#!/usr/bin/env bash
# elrun's job layer on a real Slurm 22.05 (munged, slurmctld and 4 slurmd on
# this machine, started by tests/infra/slurm-start.sh on free ports): the
# sbatch script of --dryrun, the C example -j 2:3x1 (status and logs while
# it runs and after, also once Slurm forgot the job), cancel, a node lost
# mid-run with the job finishing on the others, a failing job requeued up to
# --max-retries and then FAILED with its root cause, TorchX's dist.ddp
# spelling with a PyTorch DDP script, `srun -N3 elrun ...` with no
# rendezvous flags, and an unreachable Slurm as one line naming the command.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jobs-common.bash"
TRAIN="$ROOT/$BUILD/examples/train_fmnist"
PY=/usr/bin/python3
export ELRUN_HOME="$T/home"

for b in slurmctld slurmd sbatch squeue munged; do
    command -v $b >/dev/null || { test_skip 'slurm jobs' "needs $b (scripts/deps.sh)"; test_done; exit; }
done
if [[ $EUID -ne 0 ]]; then test_skip 'slurm jobs' 'needs root to start Slurm'; test_done; exit; fi

free_port() { low_port; }
export SLURM_BASE="$T/slurm" SLURM_LINK_ETC=0 SLURM_CTLD_PORT=$(free_port) SLURM_NODE_PORT_BASE=$(low_port 1 2 3 4)
# A requeued job waits cred_expire seconds (default 120); jobs are forgotten
# MinJobAge seconds after they end (default here 60).
export SLURM_EXTRA_CONF=$'AuthInfo=cred_expire=5\nMinJobAge=2'
slurm_cleanup() {
    bash "$ROOT/tests/infra/slurm-stop.sh" >/dev/null 2>&1
    _cleanup
}
trap slurm_cleanup EXIT
if ! out=$(bash "$ROOT/tests/infra/slurm-start.sh" 2>"$T/slurm-start.log"); then
    echo "Bail out! slurm-start.sh failed"; cat "$T/slurm-start.log"; exit 1
fi
eval "$out"

id_of() { echo "${1##*/}"; }
dir_of() { echo "$ELRUN_HOME/jobs/slurm/${1##*/}"; }
state_of() { "$ELRUN" status --json "$1" | $PY -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }
cp "$ROOT/tests/e2e/bin/job_sleeper.sh" "$T/sleeper.sh"
cp "$ROOT/tests/e2e/bin/job_fail.sh" "$T/fail.sh"

test_expect_success '--dryrun prints the sbatch script and submits nothing' '
    "$ELRUN" submit -s slurm -j 2:3x2 --max-retries 1 --cfg partition=debug,time=5 \
        --dryrun --no-python "$T/sleeper.sh" >"$T/dry.sh"
    cat "$T/dry.sh"
    grep -q "^#SBATCH --nodes=2-3$" "$T/dry.sh"
    grep -q "^#SBATCH --no-kill$" "$T/dry.sh"
    grep -q "^#SBATCH --requeue$" "$T/dry.sh"
    grep -q "^#SBATCH --partition=.debug.$" "$T/dry.sh"
    grep -q "^#SBATCH --time=.5.$" "$T/dry.sh"
    grep -q "^srun .*--ntasks-per-node=1" "$T/dry.sh"
    bash -n "$T/dry.sh"
    test -z "$(squeue -h)"
'

if [[ -x $TRAIN ]]; then
test_expect_success 'C example -j 2:3x1: status and logs while it runs and after' '
    h=$("$ELRUN" submit -s slurm -j 2:3x1 --no-python "$TRAIN" --subset 30000 --epochs 3 --hidden 128)
    echo "$h" | contains -E "^slurm://elrun/[0-9]+$"
    echo "$h" >"$T/h1"
    wait_until "[[ \$(state_of $h) == RUNNING ]] && grep -qs \"^epoch\" $(dir_of $h)/replicas/*/combined.log" 60
    "$ELRUN" status $h | tee "$T/st1"
    grep -qE "^ \*train_fmnist\[0\]:RUNNING on elnode[1-4]" "$T/st1"
    grep -qE "^  train_fmnist\[2\]:RUNNING on elnode[1-4]" "$T/st1"   # 3 nodes were free
    "$ELRUN" logs $h --tail 3 >"$T/l1"
    refute grep -vE "^train_fmnist/[0-2] " "$T/l1"
    wait_until "[[ \$(state_of $h) == SUCCEEDED ]]" 180
    "$ELRUN" logs $h >"$T/l2"
    grep -qE "^train_fmnist/[0-2] final: test accuracy [0-9.]+% .*world 3" "$T/l2"
    "$ELRUN" list -s slurm | contains -E "^$h +train_fmnist +SUCCEEDED"
'

test_expect_success 'a node lost mid-run: the job finishes on the others' '
    h=$("$ELRUN" submit -s slurm -j 2:3x1 --no-python "$TRAIN" --subset 30000 --epochs 10 \
        --hidden 128 --ckpt-dir "$T/ckpt" --ckpt-every 40)
    d=$(dir_of $h)
    on_failure_show "$d/batch.log" "$d/replicas/*/combined.log"
    wait_until "ls \"$T/ckpt\" 2>/dev/null | contains ckpt-" 120
    test "$(ls "$d/replicas" | wc -l)" = 3
    lost=$(cat "$d/replicas/2/host")
    # The host dies: every process of the job on it, and Slurm is told.
    for p in $(job_procs "$d"); do
        grep -qzx "SLURMD_NODENAME=$lost" "/proc/$p/environ" 2>/dev/null && kill -KILL $p
    done
    scontrol update NodeName=$lost State=DOWN Reason=elrun-test
    wait_until "[[ \$(state_of $h) == SUCCEEDED ]]" 180
    scontrol update NodeName=$lost State=RESUME || true   # may be back already
    "$ELRUN" status $h | tee "$T/st3"
    grep -q "^  train_fmnist\[2\]:FAILED" "$T/st3"
    "$ELRUN" logs $h | contains -E "final: test accuracy [0-9.]+% .*world 2"
    acc=$("$ELRUN" logs $h | sed -n "s/.*final: test accuracy \([0-9.]*\)%.*/\1/p")
    awk -v a="$acc" "BEGIN { exit !(a >= 75) }"
'
fi

test_expect_success 'cancel: scancel, CANCELLED, no process left' '
    h=$("$ELRUN" submit -s slurm -j 2x1 --no-python "$T/sleeper.sh")
    d=$(dir_of $h)
    on_failure_show "$d/batch.log" "$d/replicas/*/combined.log"
    wait_until "[[ \$(cat $d/replicas/*/combined.log 2>/dev/null | grep -c \" up on \") == 2 ]]" 60
    test "$(job_procs "$d" | wc -l)" -ge 4
    "$ELRUN" cancel $h
    test "$(state_of $h)" = CANCELLED
    wait_until "[[ -z \$(job_procs $d) ]]" 30
    "$ELRUN" status $h | contains "^ \*sleeper\[0\]:CANCELLED"
'

test_expect_success 'a failing job is requeued up to --max-retries, then FAILED with its root cause' '
    h=$("$ELRUN" submit -s slurm -j 2x1 --max-retries 1 --no-python "$T/fail.sh")
    on_failure_show "$(dir_of $h)/batch.log" "$(dir_of $h)/replicas/*/combined.log"
    wait_until "[[ \$(state_of $h) == FAILED ]]" 240
    "$ELRUN" status $h | tee "$T/st4"
    grep -q "Num Restarts: 1" "$T/st4"
    ls -l --time-style=+%T.%N "$(dir_of $h)"/replicas/*/
    grep -q "Msg: root cause: replica [01], rank 1 on elnode[1-4] exited with 3" "$T/st4"
    grep -c "requeue after attempt 0" "$(dir_of $h)/batch.log"
    test "$(grep -c "attempt [01] on" "$(dir_of $h)/batch.log")" = 2
'

test_expect_success 'TorchX spelling: dist.ddp -j 2x1 --script with a PyTorch DDP script' '
    cat >"$T/train.py" <<EOF
import argparse, os
import torch, torch.distributed as dist, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
p = argparse.ArgumentParser(); p.add_argument("--epochs", type=int); a = p.parse_args()
dist.init_process_group("gloo")
torch.manual_seed(0)
m = DDP(nn.Linear(4, 1)); opt = torch.optim.SGD(m.parameters(), lr=0.1)
x = torch.ones(8, 4) * (dist.get_rank() + 1)
for e in range(a.epochs):
    opt.zero_grad(); m(x).sum().backward(); opt.step()
w = m.module.weight.detach().clone(); dist.all_reduce(w)
print("ddp done rank %d world %d epochs %d same %s" % (dist.get_rank(), dist.get_world_size(), a.epochs,
      torch.allclose(w / dist.get_world_size(), m.module.weight)))
dist.destroy_process_group()
EOF
    h=$(PYTHON_EXEC=$PY "$ELRUN" submit -s slurm dist.ddp -j 2x1 --script "$T/train.py" -- --epochs 3)
    wait_until "[[ \$(state_of $h) == SUCCEEDED ]]" 240
    "$ELRUN" logs $h --regex "ddp done" | sort | tee "$T/ddp"
    grep -q "^train/0 ddp done rank [01] world 2 epochs 3 same True$" "$T/ddp"
    grep -q "^train/1 ddp done rank [01] world 2 epochs 3 same True$" "$T/ddp"
'

test_expect_success 'srun -N3 elrun with no rendezvous flags' '
    cat >"$T/env.sh" <<EOF
#!/bin/bash
echo "rank \$RANK world \$WORLD_SIZE group \$GROUP_RANK master \$MASTER_ADDR"
EOF
    chmod +x "$T/env.sh"
    timeout 120 srun -N3 "$ELRUN" --nproc-per-node=2 --no-python "$T/env.sh" >"$T/srun.out" 2>"$T/srun.err"
    cat "$T/srun.out" "$T/srun.err"
    test "$(grep -c "world 6 .* master elnode1$" "$T/srun.out")" = 6
    test "$(cut -d" " -f2 "$T/srun.out" | sort -n | tr "\n" " ")" = "0 1 2 3 4 5 "
    test "$(grep -c "inside Slurm job [0-9]*: PET_NNODES=3 from SLURM_STEP_NUM_NODES, PET_NODE_RANK=[0-2] from SLURM_NODEID, PET_MASTER_ADDR=elnode1 from SLURM_STEP_NODELIST" "$T/srun.err")" = 3
    # an explicit flag wins
    timeout 60 srun -N2 "$ELRUN" --nnodes=1 --node-rank=0 --master-port=0 --nproc-per-node=1 \
        --no-python "$T/env.sh" >"$T/srun2.out" 2>&1
    test "$(grep -c "world 1 " "$T/srun2.out")" = 2
'

test_expect_success 'an unreachable Slurm: one line naming the command, exit 2' '
    h=$("$ELRUN" submit -s slurm -j 1x1 --no-python "$T/sleeper.sh")
    wait_until "[[ \$(state_of $h) == RUNNING ]]" 60
    sed "s/^SlurmctldPort=.*/SlurmctldPort=$(free_port)/" "$SLURM_CONF" >"$T/dead.conf"
    st=0; SLURM_CONF="$T/dead.conf" "$ELRUN" status $h >"$T/u.out" 2>"$T/u.err" || st=$?
    cat "$T/u.err"; test $st = 2; test "$(wc -l <"$T/u.err")" = 1
    grep -q "squeue -h -t all -j $(id_of $h) -o %T failed" "$T/u.err"
    st=0; SLURM_CONF="$T/dead.conf" "$ELRUN" submit -s slurm --no-python "$T/sleeper.sh" >"$T/u.out" 2>"$T/u.err" || st=$?
    cat "$T/u.err"; test $st = 2; test "$(wc -l <"$T/u.err")" = 1
    grep -q "sbatch --parsable .* failed" "$T/u.err"
    test ! -s "$T/u.out"
    "$ELRUN" cancel $h
'

test_expect_success 'status still answers after Slurm forgot the job (run last: Slurm purges slowly)' '
    [[ -s $T/h1 ]]
    h=$(cat "$T/h1")
    # squeue exits 1 for a job it forgot; poll gently (a busy slurmctld
    # puts its purge off)
    forgot() { sleep 1; local o; o=$(squeue -h -t all -j "$1" 2>&1) || true; [[ -z $o || $o == *"Invalid job id"* ]]; }
    wait_until "forgot $(id_of $h)" 240
    "$ELRUN" status $h | tee "$T/st2"
    grep -q "State: SUCCEEDED" "$T/st2"
    grep -q "^ \*train_fmnist\[0\]:SUCCEEDED on elnode" "$T/st2"
'

test_done

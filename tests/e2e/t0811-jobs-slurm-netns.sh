#!/usr/bin/env bash
# The Slurm scheduler with one simulated host per Slurm node (network
# namespaces elh1..3, each slurmd with its own address and hostname; the
# clients and slurmctld in elhub): an elastic job's agents really are on
# different hosts, and a host that crashes mid-run (every process in it
# SIGKILLed, its slurmd too) leaves the job to finish on the other two.
. "$(dirname "$0")/lib.sh"
TRAIN="$ROOT/$BUILD/examples/train_fmnist"
export ELRUN_HOME="$T/home"
for b in slurmctld slurmd sbatch munged; do
    command -v $b >/dev/null || { test_skip 'slurm jobs on simulated hosts' "needs $b"; test_done; exit; }
done
if [[ $EUID -ne 0 || ! -x $TRAIN ]]; then
    test_skip 'slurm jobs on simulated hosts' "needs root and $TRAIN"; test_done; exit
fi
export SLURM_BASE="$T/slurm" SLURM_LINK_ETC=0 SLURM_NETNS=1 SLURM_NODES=3
export SLURM_EXTRA_CONF=$'AuthInfo=cred_expire=5'
netns_cleanup() {
    bash "$ROOT/tests/infra/slurm-stop.sh" >/dev/null 2>&1
    _cleanup
    bash "$ROOT/tests/infra/netns-down.sh" >/dev/null 2>&1
}
trap netns_cleanup EXIT
netns_hosts 3
# 9>&-: the daemons must not inherit (and hold) the simulated hosts' lock
if ! out=$(bash "$ROOT/tests/infra/slurm-start.sh" 2>"$T/slurm-start.log" 9>&-); then
    echo "Bail out! slurm-start.sh failed"; cat "$T/slurm-start.log"; exit 1
fi
eval "$out"
hub() { ip netns exec elhub "$@"; }
state_of() { hub "$ELRUN" status --json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }

test_expect_success 'C example -j 2:3x1 on three hosts; one host crashes mid-run; the job finishes' '
    h=$(hub "$ELRUN" submit -s slurm -j 2:3x1 --no-python "$TRAIN" --subset 30000 \
        --epochs 8 --hidden 128 --ckpt-dir "$T/ckpt" --ckpt-every 40)
    d=$ELRUN_HOME/jobs/slurm/${h##*/}
    wait_until "ls \"$T/ckpt\" 2>/dev/null | contains ckpt-" 120
    hub "$ELRUN" status $h | tee "$T/st1"
    grep -q "^ \*train_fmnist\[0\]:RUNNING on elnode1" "$T/st1"
    grep -q "^  train_fmnist\[1\]:RUNNING on elnode2" "$T/st1"
    grep -q "^  train_fmnist\[2\]:RUNNING on elnode3" "$T/st1"
    grep -qE "round [0-9]+: 3 nodes \(joined: elnode[123]/[0-9a-f]{4}, elnode[123]/[0-9a-f]{4}, elnode[123]/[0-9a-f]{4}" "$d"/replicas/*/combined.log
    bash "$ROOT/tests/infra/netns-fault.sh" kill 3
    wait_until "[[ \$(state_of $h) == SUCCEEDED ]]" 240
    hub "$ELRUN" status $h | tee "$T/st2"
    grep -q "^  train_fmnist\[2\]:FAILED on elnode3" "$T/st2"
    hub "$ELRUN" logs $h >"$T/logs"
    grep -qE "round [0-9]+: 2 nodes" "$T/logs"
    acc=$(sed -n "s/.*final: test accuracy \([0-9.]*\)%.*world 2.*/\1/p" "$T/logs")
    echo "accuracy $acc"
    awk -v a="$acc" "BEGIN { exit !(a != \"\" && a >= 75) }"
'

test_done

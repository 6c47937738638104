#!/usr/bin/env bash
# make demo: elrun's main job.  An elastic data-parallel MLP trains on
# Fashion-MNIST in C (examples/train_fmnist.c) under
#   elrun --standalone --nproc-per-node=2 --max-restarts=3
# and this script kills one of its workers with SIGKILL mid-run.  The agent
# sees the death at once, stops the other worker, restarts both, and they
# resume from the newest checkpoint.  A second, undisturbed run gives the
# reference: the demo ends with both test accuracies and fails unless the
# faulted run reaches 87% and stays within 0.5 points of the reference.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ELRUN=$BUILD/elrun
TRAIN=$BUILD/examples/train_fmnist
D=$(mktemp -d /tmp/elrun-demo.XXXXXX)
agent=
trap '[[ -n $agent ]] && kill -TERM $agent 2>/dev/null; rm -rf "$D"' EXIT

say() { printf '\n\033[1mdemo: %s\033[0m\n' "$*"; }
final_acc() { sed -n 's/^final: test accuracy \([0-9.]*\)%.*/\1/p' "$1" | tail -1; }

# The worker of this agent whose RANK is $2.
worker_pid() {
    local p
    for p in $(pgrep -P "$1"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$2" && { echo "$p"; return; }
    done
}

say "training with a fault: elrun --standalone --nproc-per-node=2 --max-restarts=3 (2 workers, 10 epochs)"
"$ELRUN" --standalone --nproc-per-node=2 --max-restarts=3 --no-python \
    "$TRAIN" --ckpt-dir "$D/ckpt" --ckpt-every 200 >"$D/fault.out" 2> >(tee "$D/fault.err" >&2) &
agent=$!
# Wait for the second checkpoint, then kill worker rank 1.
until ls "$D/ckpt" 2>/dev/null | grep -q 'ckpt-0000000400'; do
    kill -0 $agent 2>/dev/null || break
    sleep 0.05
done
victim=$(worker_pid $agent 1)
if [[ -n $victim ]]; then
    say "checkpoint of step 400 written; killing worker rank 1 (pid $victim) with SIGKILL"
    kill -KILL "$victim"
else
    say "could not find worker rank 1 to kill"; exit 1
fi
wait $agent; rc=$?; agent=
cat "$D/fault.out"
[[ $rc -eq 0 ]] || { say "the faulted run failed (exit $rc)"; exit 1; }
grep -E "failed|restart|resumed from checkpoint" "$D/fault.err" | sed 's/^/  recovery: /' | head -8

say "reference: the same run without the fault"
"$ELRUN" --standalone --nproc-per-node=2 --no-python "$TRAIN" --ckpt-dir "$D/ref" \
    >"$D/ref.out" 2>"$D/ref.err" || { cat "$D/ref.err"; say "the reference run failed"; exit 1; }
tail -n 1 "$D/ref.out"

a=$(final_acc "$D/fault.out"); b=$(final_acc "$D/ref.out")
say "test accuracy: $a% with a worker killed mid-run, $b% without"
awk -v a="$a" -v b="$b" 'BEGIN {
    d = a - b; if (d < 0) d = -d
    if (a == "" || a < 87) { print "demo: FAILED: accuracy below 87%"; exit 1 }
    if (d > 0.5) { printf "demo: FAILED: %.2f points from the reference\n", d; exit 1 }
    printf "demo: ok: at least 87%%, %.2f points from the reference\n", d }'

#!/usr/bin/env bash
# train.sh -- training throughput (samples/s) of examples/train_fmnist under
# elrun against the same MLP in PyTorch with DDP (gloo) under torchrun, same
# data, same global batch, same world size, side by side in one run
# (issue 5 target: at least equal).
#
#   bench/train.sh [LAUNCHES]         (default 3; BUILD=build by default)
#   WORLD=2 EPOCHS=3 HIDDEN=256 BATCH=128 bench/train.sh
#
# Each launch runs elrun then torchrun, alternating, so that load from
# elsewhere on the machine hits both alike.  A launch's figure is the median
# of its epochs' training throughput (evaluation excluded); the table shows
# the median over launches, and each side's final test accuracy.
# Debian's torchrun 1.13 crashes at start under Python 3.11 (Std.from_str,
# pytorch#92319); it is run through a shim that fixes that lookup in memory
# and then calls torch.distributed.run.main() unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LAUNCHES=${1:-3}
WORLD=${WORLD:-2}
EPOCHS=${EPOCHS:-3}
HIDDEN=${HIDDEN:-256}
BATCH=${BATCH:-128}
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3
elrun=$BUILD/elrun train=$BUILD/examples/train_fmnist
[[ -x $elrun && -x $train ]] || { echo "train.sh: $elrun or $train missing (make first)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/torchrun311.py" <<'PY'
import re, sys
from torch.distributed.elastic.multiprocessing.api import Std
def from_str(vm):
    if re.match(r"^[0123]$", vm):
        return Std(int(vm))
    return {int(i): Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
Std.from_str = staticmethod(from_str)
from torch.distributed.run import main
sys.argv[0] = "torchrun"
main()
PY

echo "training throughput, Fashion-MNIST MLP 784-$HIDDEN-10, global batch $BATCH, $WORLD ranks, $EPOCHS epochs:"
echo "  elrun + $train  vs  torchrun ($($PY -c 'import torch; print("torch", torch.__version__)' 2>/dev/null)) + DDP gloo"
echo "machine: $(nproc) cores, $(uname -r); launches: $LAUNCHES; $(date -u +%FT%TZ)"
for ((l = 1; l <= LAUNCHES; l++)); do
    "$elrun" --standalone --nproc-per-node="$WORLD" --no-python "$train" \
        --epochs "$EPOCHS" --hidden "$HIDDEN" --batch "$BATCH" 2>/dev/null |
        sed -n 's/^epoch [0-9]*\/[0-9]*: .*, \([0-9]*\) samples\/s, .* test accuracy \([0-9.]*\)%.*/RESULT elrun '"$l"' \1 \2/p' >>"$tmp/out"
    "$PY" "$tmp/torchrun311.py" --standalone --nproc_per_node="$WORLD" \
        bench/train_fmnist_ddp.py --epochs "$EPOCHS" --hidden "$HIDDEN" --batch "$BATCH" 2>/dev/null |
        awk -v l="$l" '$1 == "RESULT" { print "RESULT torch", l, $5, $6 }' >>"$tmp/out"
    echo "  launch $l/$LAUNCHES done" >&2
done

"$PY" - "$tmp/out" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 5 and f[0] == "RESULT":
        runs.setdefault(f[1], {}).setdefault(f[2], []).append((float(f[3]), float(f[4])))
def fig(side):
    launches = runs.get(side, {})
    if not launches:
        return float("nan"), float("nan")
    rate = statistics.median(statistics.median(e[0] for e in v) for v in launches.values())
    acc = statistics.median(v[-1][1] for v in launches.values())
    return rate, acc
e, t = fig("elrun"), fig("torch")
ratio = e[0] / t[0]
print()
print("| launcher + program | samples/s (median) | final test accuracy |")
print("|---|---|---|")
print(f"| elrun + train_fmnist (C, OpenBLAS, libelrun allreduce) | {e[0]:.0f} | {e[1]:.2f}% |")
print(f"| torchrun + PyTorch DDP (gloo) | {t[0]:.0f} | {t[1]:.2f}% |")
print(f"\nratio {ratio:.2f}x (target >= 1x: {'met' if ratio >= 1 else 'MISSED'})")
sys.exit(0 if ratio >= 1 else 1)
PY

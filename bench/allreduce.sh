#!/usr/bin/env bash
# allreduce.sh -- libelrun's allreduce against PyTorch's gloo, side by side
# in one run on this machine: bus bandwidth for 2 and 4 ranks at 4 KiB,
# 1 MiB, 16 MiB and 64 MiB, and 4 KiB latency, with the ratio and the
# targets of issue 5 (>= gloo everywhere, >= 1.5x at 16 MiB and above, 4 KiB
# latency <= 1/4 of gloo's).
#
#   bench/allreduce.sh [LAUNCHES]      (default 3; BUILD=build by default)
#   RANKS=2,4 SIZES=4K,1M,16M,64M SCALE=1 bench/allreduce.sh
#   ELRUN_BENCH_TCP=1 bench/allreduce.sh    elrun over TCP only (no shm)
#
# Each launch runs elrun then gloo for one rank count, alternating, so that
# load from elsewhere on the machine hits both alike.  Per launch each side
# reports per-op medians (barrier, one timed op, max over ranks) and
# back-to-back medians (bench_allreduce.c / allreduce_gloo.py); the table
# shows the median over launches.  The gloo side runs under Debian's
# /usr/bin/python3 (python3-torch), spawning its ranks itself.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LAUNCHES=${1:-3}
RANKS=${RANKS:-2,4}
SIZES=${SIZES:-4K,1M,16M,64M}
SCALE=${SCALE:-1}
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3
bin=$BUILD/bench/bench_allreduce
[[ -x $bin ]] || { echo "allreduce.sh: $bin missing (make first)" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT

echo "allreduce, float32 sum: elrun ($bin) vs gloo ($($PY -c 'import torch; print("torch", torch.__version__)' 2>/dev/null || echo 'torch ?'))"
echo "machine: $(nproc) cores, $(uname -r); launches: $LAUNCHES; $(date -u +%FT%TZ)"
for ((l = 1; l <= LAUNCHES; l++)); do
    for n in ${RANKS//,/ }; do
        "$bin" -n "$n" -s "$SIZES" -r "$SCALE" >>"$out"
        OMP_NUM_THREADS=1 "$PY" bench/allreduce_gloo.py -n "$n" -s "$SIZES" -r "$SCALE" >>"$out"
        echo "  launch $l/$LAUNCHES, $n ranks done" >&2
    done
done

"$PY" - "$out" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) != 8 or f[0] != "RESULT":
        continue
    key = (f[1], int(f[2]), int(f[3]))
    rows.setdefault(key, []).append([float(x) for x in f[4:]])
def med(key, i):
    v = rows.get(key)
    return statistics.median(r[i] for r in v) if v else float("nan")
def size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
ranks = sorted({k[1] for k in rows})
sizes = sorted({k[2] for k in rows})
ok = True
print()
print("| ranks | size | elrun per-op | elrun busbw | gloo per-op | gloo busbw | ratio | elrun b2b busbw | gloo b2b busbw | b2b ratio | target |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for n in ranks:
    for b in sizes:
        e, g = ("elrun", n, b), ("gloo", n, b)
        et, eb, ebt, ebb = (med(e, i) for i in range(4))
        gt, gb, gbt, gbb = (med(g, i) for i in range(4))
        # Same bytes on both sides: the busbw ratio is the time ratio
        # (taken from the times, which are not rounded like the GB/s).
        ratio, bratio = gt / et, gbt / ebt
        need = 1.5 if b >= 16 << 20 else 1.0
        met = ratio >= need
        tgt = f">= {need:g}x"
        if b <= 4096:
            met = met and et <= gt / 4
            tgt += ", lat <= 1/4"
        ok = ok and met
        print(f"| {n} | {size(b)} | {et:.1f} µs | {eb:.3f} GB/s | {gt:.1f} µs | "
              f"{gb:.3f} GB/s | **{ratio:.2f}x** | {ebb:.3f} GB/s | {gbb:.3f} GB/s | "
              f"{bratio:.2f}x | {tgt}: {'met' if met else 'MISSED'} |")
print()
print("per-op: barrier, then one timed allreduce; time = max over ranks; median over "
      "500/100/20/10 iterations (x SCALE); b2b: that many in a row, median of 3 batches.")
print("busbw = 2(n-1)/n x bytes / time; the table shows the median over launches.")
print("all targets met" if ok else "some targets MISSED")
EOF

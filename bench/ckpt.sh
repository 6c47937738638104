#!/usr/bin/env bash
# ckpt.sh -- checkpoint save throughput of libelrun against the disk's
# sequential write speed as `dd conv=fsync` measures it, on the same file
# system, side by side in one run (issue 5 target: >= 80% of dd).
#
#   bench/ckpt.sh [LAUNCHES]              (default 5; BUILD=build by default)
#   SIZES=64M,256M DIR=/path/on/the/fs bench/ckpt.sh
#
# Each launch runs dd then bench_ckpt for every size, alternating, so that
# load from elsewhere on the machine hits both alike.  dd writes SIZE bytes
# from /dev/zero in 1 MiB blocks to a new file and fsyncs it; bench_ckpt
# saves SIZE random bytes as a checkpoint (CRC-32C, write, fsync, rename,
# fsync of the directory, deletion of the previous one), median of 3 saves.
# The table shows the median over launches.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LAUNCHES=${1:-5}
SIZES=${SIZES:-64M,256M}
DIR=${DIR:-$BUILD/bench-ckpt.tmp}
bin=$BUILD/bench/bench_ckpt
[[ -x $bin ]] || { echo "ckpt.sh: $bin missing (make first)" >&2; exit 1; }
out=$(mktemp)
mkdir -p "$DIR"
trap 'rm -f "$out"; rm -rf "$DIR"' EXIT

bytes() { # 64M -> 67108864
    local v=${1%[KMGkmg]} u=${1: -1}
    case $u in K|k) echo $((v << 10));; M|m) echo $((v << 20));; G|g) echo $((v << 30));; *) echo "$1";; esac
}

echo "checkpoint save: elrun ($bin) vs dd conv=fsync, in $DIR ($(df -PT "$DIR" | awk 'NR==2 {print $2 " on " $1}'))"
echo "machine: $(nproc) cores, $(uname -r); launches: $LAUNCHES; $(date -u +%FT%TZ)"
for ((l = 1; l <= LAUNCHES; l++)); do
    for s in ${SIZES//,/ }; do
        n=$(bytes "$s")
        rm -f "$DIR/dd.out"
        t0=$(date +%s%N)
        dd if=/dev/zero of="$DIR/dd.out" bs=1M count=$((n >> 20)) conv=fsync status=none
        t1=$(date +%s%N)
        rm -f "$DIR/dd.out"
        echo "RESULT dd $n $(( (t1 - t0) / 1000 ))" >>"$out"
        "$bin" -d "$DIR/ck" -s "$s" -r 3 >>"$out"
    done
    echo "  launch $l/$LAUNCHES done" >&2
done

python3 - "$out" <<'PY'
import statistics, sys
dd, ck = {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 4 and f[0] == "RESULT" and f[1] == "dd":
        dd.setdefault(int(f[2]), []).append(int(f[2]) / (int(f[3]) / 1e6) / 1e6)
    elif len(f) == 7 and f[0] == "RESULT" and f[1] == "ckpt":
        ck.setdefault(int(f[2]), []).append((float(f[4]), float(f[6])))
print()
print("| size | dd conv=fsync | elrun checkpoint save | ratio | elrun load + verify | target |")
print("|---|---|---|---|---|---|")
ok = True
for n in sorted(ck):
    d = statistics.median(dd.get(n, [float("nan")]))
    s = statistics.median(x[0] for x in ck[n])
    r = statistics.median(x[1] for x in ck[n])
    met = s >= 0.8 * d
    ok = ok and met
    print(f"| {n >> 20} MiB | {d:.0f} MB/s | {s:.0f} MB/s | **{s / d:.2f}x** | {r:.0f} MB/s | >= 0.8x: {'met' if met else 'MISSED'} |")
print()
print("MB = 10^6 bytes; medians over launches; elrun: median of 3 saves per launch.")
sys.exit(0 if ok else 1)
PY

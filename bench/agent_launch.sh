#!/usr/bin/env bash
# agent_launch.sh -- the launcher's figures, elrun and torchrun side by side
# in one run (torchrun = Debian's python3-torch 1.13 through the
# bench/agent_torchrun311 shim, with --monitor_interval=0.1).
#
#   launch    `L --standalone --nproc-per-node=2 --no-python /bin/true`
#             whole-process wall time, and wait4's peak RSS
#   start     launcher start -> every worker started (stamped by the worker)
#   recovery  `--max-restarts=3`: rank 1 SIGKILLs itself 200 ms into attempt
#             0 (rank 0 waits and dies at once on SIGTERM); from the kill
#             stamp to the last attempt-1 worker's start stamp
#   detect    the same runs: from the kill stamp to rank 0 receiving the
#             agent's SIGTERM (failure detection + stop)
#   agent RSS the agent's own VmHWM, read by a worker at the end of a run
#   version   `elrun --version` wall time (load + exit; elrun builds only)
#
#   bench/agent_launch.sh                 RUNS=20 elrun, TR_RUNS=5 torchrun
#   BUILD=build-agent RUNS=5 TR_RUNS=3 bench/agent_launch.sh
#   NO_TORCHRUN=1 bench/agent_launch.sh   elrun only
#   BASE=/work/base/build bench/agent_launch.sh
#                                         also an earlier build ("before"),
#                                         RUNS times, in the same run
# Prints one RESULT line per figure: median (min-max) for each launcher and
# the ratio torchrun / elrun, then whether the goals hold (launch >= 300x
# torchrun, agent peak RSS as wait4 reports it < 4 MiB).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RUNS=${RUNS:-20}
TR_RUNS=${TR_RUNS:-5}
ELRUN=$PWD/$BUILD/elrun
H=$PWD/$BUILD/bench/agent_wallrss
TORCHRUN=$PWD/bench/agent_torchrun311
[[ -x $ELRUN && -x $H ]] || { echo "build first: make BUILD=$BUILD" >&2; exit 2; }
BASE_ELRUN=
if [[ -n ${BASE:-} ]]; then
    BASE_ELRUN=$(cd "$BASE" && pwd)/elrun
    [[ -x $BASE_ELRUN ]] || { echo "BASE=$BASE has no elrun" >&2; exit 2; }
fi
have_tr=1
if [[ -n ${NO_TORCHRUN:-} ]] || ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    have_tr=0
fi
W=$(mktemp -d "${TMPDIR:-/tmp}/agent-bench.XXXXXX")
trap 'rm -rf "$W"' EXIT

# stats: read numbers on stdin, print "median min max" (3 decimals).
stats() {
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "nan nan nan"; exit }
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.6g %.6g %.6g\n", m, v[1], v[NR] }'
}
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p"; }

# launcher_cmd NAME: the launcher's argv prefix.
launcher() {
    case $1 in
    elrun) echo "$ELRUN --standalone --nproc-per-node=2" ;;
    before) echo "$BASE_ELRUN --standalone --nproc-per-node=2" ;;
    *) echo "$TORCHRUN --standalone --nproc_per_node=2 --monitor_interval=0.1" ;;
    esac
}
noPy() { [[ $1 != torchrun ]] && echo --no-python || echo --no_python; }
maxr() { [[ $1 != torchrun ]] && echo --max-restarts=3 || echo --max_restarts=3; }
bin_of() { [[ $1 == before ]] && echo "$BASE_ELRUN" || echo "$ELRUN"; }

declare -A LAUNCH RSS START RECOV HWM DETECT VERSION
for L in elrun before torchrun; do
    [[ $L == torchrun && $have_tr == 0 ]] && continue
    [[ $L == before && -z $BASE_ELRUN ]] && continue
    n=$RUNS; [[ $L == torchrun ]] && n=$TR_RUNS
    echo "== $L: $n runs each" >&2
    # launch: 1 warm-up, then n timed runs
    $H run $(launcher $L) $(noPy $L) /bin/true >/dev/null 2>&1
    : >"$W/launch.$L"; : >"$W/rss.$L"; : >"$W/start.$L"; : >"$W/recov.$L"; : >"$W/hwm.$L"; : >"$W/detect.$L"
    for i in $(seq $n); do
        out=$($H run $(launcher $L) $(noPy $L) /bin/true 2>/dev/null)
        [[ $(field status <<<"$out") == 0 ]] || { echo "$L launch failed: $out" >&2; exit 1; }
        field wall_s <<<"$out" >>"$W/launch.$L"
        echo "$(( $(field maxrss_kib <<<"$out") ))" >>"$W/rss.$L"
    done
    # start: launcher start -> last worker's first instruction
    for i in $(seq $n); do
        d=$W/s.$L.$i; mkdir "$d"
        out=$($H run $(launcher $L) $(noPy $L) $H stamp "$d" 2>/dev/null)
        t0=$(field start_ns <<<"$out")
        last=$(cat "$d"/start.0.* | sort -n | tail -1)
        echo "$(( last - t0 ))" | awk '{ printf "%.6f\n", $1 / 1e9 }' >>"$W/start.$L"
    done
    # recovery
    for i in $(seq $n); do
        d=$W/r.$L.$i; mkdir "$d"
        out=$($H run $(launcher $L) $(maxr $L) $(noPy $L) $H failer "$d" 200 2>/dev/null)
        [[ $(field status <<<"$out") == 0 ]] || { echo "$L recovery run failed: $out" >&2; exit 1; }
        k=$(cat "$d/kill"); last=$(cat "$d"/start.1.* | sort -n | tail -1)
        echo "$(( last - k ))" | awk '{ printf "%.6f\n", $1 / 1e9 }' >>"$W/recov.$L"
        echo "$(( $(cat "$d/term.0") - k ))" | awk '{ printf "%.6f\n", $1 / 1e9 }' >>"$W/detect.$L"
    done
    # the agent's own peak RSS
    for i in $(seq $(( n < 5 ? n : 5 ))); do
        d=$W/h.$L.$i; mkdir "$d"
        $(launcher $L) $(noPy $L) $H hwm "$d" >/dev/null 2>&1
        cat "$d/hwm.0" >>"$W/hwm.$L"
    done
    # --version: the binary's load time and nothing else
    : >"$W/version.$L"
    if [[ $L != torchrun ]]; then
        for i in $(seq $n); do
            $H run $(bin_of $L) --version 2>/dev/null | field wall_s >>"$W/version.$L"
        done
    fi
    VERSION[$L]=$(stats <"$W/version.$L")
    LAUNCH[$L]=$(stats <"$W/launch.$L"); RSS[$L]=$(stats <"$W/rss.$L")
    START[$L]=$(stats <"$W/start.$L"); RECOV[$L]=$(stats <"$W/recov.$L")
    DETECT[$L]=$(stats <"$W/detect.$L")
    HWM[$L]=$(stats <"$W/hwm.$L")
done

# row NAME UNIT ARRAY: one RESULT line.
row() {
    local name=$1 unit=$2; local -n a=$3
    read -r em emin emax <<<"${a[elrun]}"
    local line
    line=$(printf "RESULT agent_%s elrun: med %s %s (min %s max %s, n %s)" "$name" "$em" "$unit" "$emin" "$emax" "$RUNS")
    if [[ -n $BASE_ELRUN ]]; then
        read -r bm bmin bmax <<<"${a[before]}"
        line+=$(printf " | before: med %s %s (min %s max %s, n %s)" "$bm" "$unit" "$bmin" "$bmax" "$RUNS")
    fi
    if [[ $have_tr == 1 && ${a[torchrun]} != "nan nan nan" ]]; then
        read -r tm tmin tmax <<<"${a[torchrun]}"
        line+=$(printf " | torchrun --monitor_interval=0.1: med %s %s (min %s max %s, n %s) | ratio torchrun/elrun %s" \
            "$tm" "$unit" "$tmin" "$tmax" "$TR_RUNS" "$(awk -v t="$tm" -v e="$em" 'BEGIN { printf (e > 0 ? "%.0fx" : "n/a"), t / e }')")
    fi
    echo "$line"
}
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); elrun=$ELRUN${BASE_ELRUN:+ before=$BASE_ELRUN}"
for b in "$ELRUN" $BASE_ELRUN; do
    echo "# $b: $(ldd "$b" | grep -c '=>') shared libraries at start (libcurl among them: $(ldd "$b" | grep -q libcurl && echo yes || echo no))"
done
row launch_wall s LAUNCH
row start_all_workers s START
row detect_kill_to_sigterm_of_others s DETECT
row recovery_kill_to_all_restarted s RECOV
row peak_rss_wait4 KiB RSS
row vmhwm_of_agent KiB HWM
row version_wall s VERSION
if [[ $have_tr == 1 ]]; then
    read -r em _ <<<"${LAUNCH[elrun]}"; read -r tm _ <<<"${LAUNCH[torchrun]}"
    awk -v t="$tm" -v e="$em" 'BEGIN { r = t / e; printf "GOAL launch >= 300x torchrun: %.0fx %s\n", r, (r >= 300 ? "met" : "NOT MET") }'
fi
read -r rm _ <<<"${RSS[elrun]}"
awk -v r="$rm" 'BEGIN { printf "GOAL agent peak RSS (wait4) < 4096 KiB: %d KiB %s\n", r, (r < 4096 ? "met" : "NOT MET") }'

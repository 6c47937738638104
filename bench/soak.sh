#!/usr/bin/env bash
# soak.sh -- the long chaos soak of issue #14 ("a longer soak (200 faults) is
# a benchmark, not a test"): t0955's job (3 agents of the C example on a
# standalone store, each restarted when it exits, as a scheduler would) once
# without faults, then under FAULTS random faults of every loopback kind
# (worker-kill, agent-kill, agent-stop, agent-term), with t0955's checks (the
# job finishes at the fault-free accuracy within 0.5 points, no resume before
# the last checkpoint, nothing left, no fd or RSS growth).  Prints the figures
# beside the fault-free run's: faults by kind, wall times, accuracy, rounds,
# resumes, and each long-lived agent's fds and RSS at its second round and its
# last.
#
# Run from anywhere:  bench/soak.sh          (about 20 minutes on 2 cores)
# Knobs: FAULTS (200), EVERY (1s-2s between faults), EPOCHS (1000: the job must
# outlast the schedule), KEEP, BUILD.  Loopback only; t0955 kills what it starts.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FAULTS=${FAULTS:-200}
EVERY=${EVERY:-1s-2s}
EPOCHS=${EPOCHS:-1000}
W=$(mktemp -d "${TMPDIR:-/tmp}/elrun-soak.XXXXXX")
# KEEP=1: leave the job's logs, samples and chaos output in $W.
if [[ -n ${KEEP:-} ]]; then echo "soak: keeping everything in $W"; else trap 'rm -rf "$W"' EXIT; fi

echo "soak: $FAULTS faults, one every $EVERY, $EPOCHS epochs; $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), $(date -u +%FT%TZ)"
t0=$SECONDS
SOAK_KEEP="$W/t" SOAK_FAULTS=$FAULTS FAULT_EVERY=$EVERY SOAK_EPOCHS=$EPOCHS \
    bash "$ROOT/tests/e2e/t0955-soak.sh"
st=$?
K=$W/t
[[ -d $K ]] || { echo "soak: t0955 kept nothing (it did not get to its cases)"; exit 1; }

# Wall time of a job: its first launch log's first line to its last line.
wall() {
    cat "$K/$1"/a*.log 2>/dev/null | grep -Eo "^[0-9]{4}-[0-9-]+T[0-9:.]+Z" | sort |
        sed -n '1p;$p' | while read -r t; do date -d "$t" +%s.%N; done |
        awk 'NR == 1 { a = $1 } NR == 2 { printf "%.1f s", $1 - a }'
}
acc() { cat "$K/$1"/a*.log 2>/dev/null | sed -n "s/^final: test accuracy \([0-9.]*\)%.*/\1/p" | tail -1; }
rounds() { cat "$K/$1"/a*.log 2>/dev/null | sed -n "s/.* round \([0-9]*\): [0-9]* nodes.*/\1/p" | sort -n | tail -1; }
launches() { ls "$K/$1"/a*.log 2>/dev/null | wc -l; }

echo
printf "%-28s %-14s %-14s\n" "" "fault-free" "under faults"
printf "%-28s %-14s %-14s\n" "wall (first to last line)" "$(wall clean)" "$(wall soak)"
printf "%-28s %-14s %-14s\n" "final test accuracy" "$(acc clean)%" "$(acc soak)%"
printf "%-28s %-14s %-14s\n" "last round" "$(rounds clean)" "$(rounds soak)"
printf "%-28s %-14s %-14s\n" "agent launches" "$(launches clean)" "$(launches soak)"
if [[ -f $K/chaos.out ]]; then
    echo
    echo "faults by kind:"
    grep -Eo " (worker|agent)-(kill|stop|term) pid " "$K/chaos.out" | awk '{ n[$1]++ } END { for (k in n) printf "  %-12s %d\n", k, n[k] }' | sort
fi
[[ -f $K/ckpts ]] && echo "resumes from a checkpoint: $(grep -c ' R ' "$K/ckpts")"
if [[ -s $K/growth ]]; then
    echo
    echo "agents that lived through 3 rounds or more (the median sample of each round):"
    echo "  pid round-from round-to fds-from fds-to rss-from-kB rss-to-kB"
    sed 's/^/  /' "$K/growth"
fi
echo
echo "soak: t0955 $( ((st == 0)) && echo passed || echo FAILED) in $((SECONDS - t0)) s"
exit $st

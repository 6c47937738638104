#!/usr/bin/env bash
# bench/jobs.sh: the job layer's figures, medians of N runs, anchor beside:
#   1. `elrun submit` return time: local; Slurm beside `sbatch --parsable` of
#      a trivial script (sbatch's own time)
#   2. submit -> every worker running: local -j 2x2; Slurm -j 2x1 beside a
#      trivial 2-node sbatch job whose srun tasks do the same (touch a file)
#   3. `elrun status` and `elrun logs --tail 10` of a running 3-node Slurm job
# Slurm parts need root and Debian's slurm packages (they start a private
# cluster with tests/infra/slurm-start.sh on free ports) and are skipped
# otherwise.  N=${N:-11}.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build}
ELRUN=$ROOT/$BUILD/elrun
N=${N:-11}
D=$(mktemp -d /tmp/elrun-bench-jobs.XXXXXX)
export ELRUN_HOME=$D/home
PY=python3

now_ms() { date +%s%3N; }
median() { sort -n | awk '{a[NR]=$1} END {if (NR) print (NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2); else print "n/a"}'; }
cleanup() {
    local d p
    for d in "$ELRUN_HOME"/jobs/local/*/; do
        [[ -f $d/supervisor.pid ]] && kill -KILL "$(cat "$d/supervisor.pid")" 2>/dev/null
    done
    [[ -n ${SLURM_BASE:-} ]] && bash tests/infra/slurm-stop.sh >/dev/null 2>&1
    rm -rf "$D"
}
trap cleanup EXIT

cat >"$D/mark.sh" <<'EOF'
#!/bin/bash
# a worker that says it runs, then waits to be stopped
touch "$MARK_DIR/up.${SLURM_PROCID:-x}.$RANK"
exec sleep 600
EOF
chmod +x "$D/mark.sh"
# wait_marks DIR COUNT: until COUNT marker files exist (5 ms steps)
wait_marks() { until [[ $(ls "$1" 2>/dev/null | wc -l) -ge $2 ]]; do sleep 0.005; done; }

echo "== 1. elrun submit return time, local (-j 2x2 of a sleeping worker), N=$N"
ts=()
for ((i = 0; i < N; i++)); do
    t0=$(now_ms)
    h=$("$ELRUN" submit -j 2x2 --no-python /bin/sleep 600)
    t1=$(now_ms)
    ts+=($((t1 - t0)))
    "$ELRUN" cancel "$h"
done
printf '%s\n' "${ts[@]}" | median | awk '{print "local submit returns: median " $1 " ms (goal < 50 ms)"}'

echo "== 2. submit -> every worker running, local -j 2x2, N=$N"
ts=()
for ((i = 0; i < N; i++)); do
    m=$D/marks.$i; mkdir -p "$m"
    t0=$(now_ms)
    h=$(MARK_DIR=$m "$ELRUN" submit -j 2x2 --no-python "$D/mark.sh")
    wait_marks "$m" 4
    t1=$(now_ms)
    ts+=($((t1 - t0)))
    "$ELRUN" cancel "$h"
done
printf '%s\n' "${ts[@]}" | median | awk '{print "local: 4 workers running after: median " $1 " ms"}'

slurm_ok=1
for b in slurmctld slurmd sbatch munged; do command -v $b >/dev/null || slurm_ok=0; done
((EUID == 0)) || slurm_ok=0
if ((slurm_ok == 0)); then
    echo "== Slurm parts skipped (need root and slurmctld slurmd slurm-client munge)"
    exit 0
fi
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export SLURM_BASE=$D/slurm SLURM_LINK_ETC=0 SLURM_CTLD_PORT=$(free_port)
export SLURM_NODE_PORT_BASE=$(( ($(free_port) % 20000) + 20000 ))
eval "$(bash tests/infra/slurm-start.sh 2>/dev/null)" || { echo "slurm-start.sh failed"; exit 1; }
cat >"$D/trivial.sh" <<EOF
#!/bin/bash
#SBATCH --nodes=2 --output=/dev/null
srun --ntasks-per-node=1 bash -c 'touch "\$MARK_DIR/up.\$SLURM_PROCID"; exec sleep 600'
EOF
drain() { until [[ -z $(squeue -h) ]]; do sleep 0.05; done; }

echo "== 1b. submit return time on Slurm beside sbatch's own, N=$N"
ts=() tb=()
for ((i = 0; i < N; i++)); do
    t0=$(now_ms); id=$(sbatch --parsable --output=/dev/null --wrap "sleep 600"); t1=$(now_ms)
    tb+=($((t1 - t0))); scancel "$id"
    t0=$(now_ms); h=$("$ELRUN" submit -s slurm -j 2x1 --no-python /bin/sleep 600); t1=$(now_ms)
    ts+=($((t1 - t0))); "$ELRUN" cancel "$h"
done
drain
a=$(printf '%s\n' "${ts[@]}" | median); b=$(printf '%s\n' "${tb[@]}" | median)
echo "slurm: elrun submit median $a ms, sbatch --parsable alone median $b ms (goal: < 50 ms + sbatch)"

echo "== 2b. submit -> every worker running on Slurm, -j 2x1, beside a trivial 2-node sbatch job, N=$N"
ts=() tb=()
for ((i = 0; i < N; i++)); do
    m=$D/sm.$i; mkdir -p "$m"
    t0=$(now_ms); id=$(MARK_DIR=$m sbatch --parsable "$D/trivial.sh"); wait_marks "$m" 2; t1=$(now_ms)
    tb+=($((t1 - t0))); scancel "$id"; drain
    m=$D/se.$i; mkdir -p "$m"
    t0=$(now_ms); h=$(MARK_DIR=$m "$ELRUN" submit -s slurm -j 2x1 --no-python "$D/mark.sh"); wait_marks "$m" 2; t1=$(now_ms)
    ts+=($((t1 - t0))); "$ELRUN" cancel "$h"; drain
done
a=$(printf '%s\n' "${ts[@]}" | median); b=$(printf '%s\n' "${tb[@]}" | median)
echo "slurm: 2 workers running after elrun submit: median $a ms; trivial sbatch job's 2 tasks: median $b ms"

echo "== 3. status and logs --tail 10 of a running 3-node Slurm job, N=$((N * 2 + 1))"
m=$D/s3; mkdir -p "$m"
h=$(MARK_DIR=$m "$ELRUN" submit -s slurm -j 3x1 --no-python "$D/mark.sh")
wait_marks "$m" 3
ts=() tl=()
for ((i = 0; i < N * 2 + 1; i++)); do
    t0=$(now_ms); "$ELRUN" status "$h" >/dev/null; t1=$(now_ms); ts+=($((t1 - t0)))
    t0=$(now_ms); "$ELRUN" logs "$h" --tail 10 >/dev/null; t1=$(now_ms); tl+=($((t1 - t0)))
done
t0=$(now_ms); for ((i = 0; i < 5; i++)); do squeue -h -t all -j "${h##*/}" >/dev/null; done; t1=$(now_ms)
"$ELRUN" cancel "$h"
a=$(printf '%s\n' "${ts[@]}" | median); b=$(printf '%s\n' "${tl[@]}" | median)
echo "slurm 3-node job: status median $a ms (one squeue: $(((t1 - t0) / 5)) ms), logs --tail 10 median $b ms (goal < 100 ms each)"

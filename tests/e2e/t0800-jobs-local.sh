#!/usr/bin/env bash
# elrun's job layer on the local scheduler: `elrun submit -s local` starts
# MAX agents as one elastic job, detached from the submitting shell, and
# status, logs, cancel, list and describe answer from any other shell: the C
# example as -j 2x2 (RUNNING, then SUCCEEDED, logs with TorchX's
# `role/replica ` prefix), cancel leaving no process, a -j 1:3x1 job that
# loses a replica mid-run and still finishes, a failing job's root cause,
# and one clear line with exit 2 for each kind of bad input.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jobs-common.bash"
TRAIN="$ROOT/$BUILD/examples/train_fmnist"
DATA=/usr/share/datasets/fashion-mnist
export ELRUN_HOME="$T/home"

# job_procs (jobs-common.bash) and the job's supervisor, which has no
# ELRUN_JOB_DIR.
job_and_supervisor() {
    job_procs "$1"
    local s; s=$(cat "$1/supervisor.pid" 2>/dev/null) || return 0
    [[ -r /proc/$s/cmdline ]] && [[ $(awk '{print $3}' "/proc/$s/stat") != Z ]] &&
        tr '\0' ' ' <"/proc/$s/cmdline" | contains __supervise && echo "$s"
    return 0
}
# The jobs' supervisors left the script's process tree (setsid): end them.
jobs_cleanup() {
    local d
    for d in "$ELRUN_HOME"/jobs/local/*/; do
        [[ -d $d ]] && for p in $(job_and_supervisor "${d%/}"); do kill -KILL "$p" 2>/dev/null; done
    done
    _cleanup
}
trap jobs_cleanup EXIT
dir_of() { echo "$ELRUN_HOME/jobs/local/${1##*/}"; }
state_of() { "$ELRUN" status --json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }
# usage_error CMD...: exit status 2 and exactly one line on stderr.
usage_error() {
    local st=0
    "$@" >"$T/ue.out" 2>"$T/ue.err" || st=$?
    cat "$T/ue.err"
    [[ $st -eq 2 ]] || { echo "exit status $st, not 2: $*"; return 1; }
    [[ $(wc -l <"$T/ue.err") -eq 1 ]] || { echo "not one line: $*"; return 1; }
    [[ ! -s $T/ue.out ]]
}

cp "$ROOT/tests/e2e/bin/job_sleeper.sh" "$T/sleeper.sh"
cp "$ROOT/tests/e2e/bin/job_fail.sh" "$T/fail.sh"

test_expect_success 'bad input: one line and exit 2' '
    usage_error "$ELRUN" submit -s lsf --no-python /bin/true
    grep -q "unknown scheduler .lsf.; use -s local, slurm, aws_batch or kubernetes" "$T/ue.err"
    usage_error "$ELRUN" submit -j 2y4 --no-python /bin/true
    grep -q "is not a job size" "$T/ue.err"
    usage_error "$ELRUN" submit -j 3:2x1 --no-python /bin/true
    usage_error "$ELRUN" submit --no-python /no/such/program
    grep -q "program ./no/such/program. does not exist" "$T/ue.err"
    usage_error "$ELRUN" submit --cfg partition=x --no-python /bin/true
    grep -q "the local scheduler has no options" "$T/ue.err"
    usage_error "$ELRUN" submit --no-python --wait /bin/true
    grep -q "put elrun submit.s own flags first" "$T/ue.err"
    usage_error "$ELRUN" submit --standalone --no-python /bin/true
    usage_error "$ELRUN" submit dist.ddp -j 1x1
    grep -q "exactly one of --script and -m must be specified" "$T/ue.err"
    usage_error "$ELRUN" status local://elrun/no-such-job
    grep -q "no job local://elrun/no-such-job" "$T/ue.err"
    usage_error "$ELRUN" status not-a-handle
    grep -q "is not a job handle" "$T/ue.err"
    usage_error "$ELRUN" logs local://elrun/nope
    usage_error "$ELRUN" cancel slurm://elrun/12345
    usage_error "$ELRUN" describe local://elrun/a/b/c/d
    usage_error "$ELRUN" list -s pbs
    test ! -d "$ELRUN_HOME/jobs/local" || test -z "$(ls "$ELRUN_HOME/jobs/local")"
'

test_expect_success '--dryrun prints the agents and submits nothing' '
    "$ELRUN" submit -j 1:3x2 --dryrun --no-python "$T/sleeper.sh" >"$T/dry"
    cat "$T/dry"
    test "$(grep -c -- "--nnodes=1:3 --nproc-per-node=2 --rdzv-backend=c10d" "$T/dry")" = 3
    test ! -d "$ELRUN_HOME/jobs/local" || test -z "$(ls "$ELRUN_HOME/jobs/local")"
'

if [[ -x $TRAIN && -f $DATA/train-images-idx3-ubyte.gz ]]; then
test_expect_success 'C example -j 2x2: RUNNING, then SUCCEEDED, from other shells' '
    # The submitting shell exits at once; the job goes on without it.
    bash -c "\"$ELRUN\" submit -j 2x2 --name fmnist --no-python \"$TRAIN\" \
        --subset 30000 --epochs 2 --hidden 128" >"$T/h1" 2>"$T/s1.err"
    test "$(wc -l <"$T/h1")" = 1
    grep -qE "^local://elrun/fmnist-[a-z0-9]+$" "$T/h1"
    h=$(cat "$T/h1")
    env -i ELRUN_HOME="$ELRUN_HOME" PATH="$PATH" bash -c "\"$ELRUN\" status $h" >"$T/st1"
    cat "$T/st1"
    grep -q "State: RUNNING" "$T/st1"
    grep -q "^ \*train_fmnist\[0\]:RUNNING on " "$T/st1"
    grep -q "^  train_fmnist\[1\]:RUNNING on " "$T/st1"
    wait_until "[[ \$(state_of $h) == SUCCEEDED ]]" 180
    "$ELRUN" status $h | tee "$T/st2"
    grep -q "^ \*train_fmnist\[0\]:SUCCEEDED" "$T/st2"
    test "$(job_and_supervisor "$(dir_of $h)")" = ""
'

test_expect_success 'logs: every line prefixed role/replica, --tail, --regex' '
    h=$(cat "$T/h1")
    "$ELRUN" logs $h >"$T/logs"
    test -s "$T/logs"
    refute grep -vE "^train_fmnist/[01] " "$T/logs"
    grep -qE "^train_fmnist/[01] final: test accuracy [0-9.]+%" "$T/logs"
    grep -q "^train_fmnist/0 " "$T/logs"
    grep -q "^train_fmnist/1 " "$T/logs"
    "$ELRUN" logs $h train_fmnist/1 --tail 2 >"$T/tail"
    cat "$T/tail"
    test "$(wc -l <"$T/tail")" = 2
    refute grep -v "^train_fmnist/1 " "$T/tail"
    "$ELRUN" logs $h --regex "^epoch [0-9]/2: " >"$T/re"   # rank 0 prints
    cat "$T/re"
    test "$(wc -l <"$T/re")" = 2
    refute grep -v "epoch" "$T/re"
    usage_error "$ELRUN" logs $h other/0
    grep -q "no role .other." "$T/ue.err"
    usage_error "$ELRUN" logs $h train_fmnist/5
    "$ELRUN" list >"$T/list"
    cat "$T/list"
    grep -q "^APP HANDLE  *APP NAME  *APP STATUS" "$T/list"
    grep -qE "^$h +fmnist +SUCCEEDED" "$T/list"
    "$ELRUN" describe $h >"$T/desc"
    grep -q "\"size\": \"2x2\"" "$T/desc"
'
else
    test_skip 'C example -j 2x2' "needs $TRAIN and dataset-fashion-mnist"
fi

test_expect_success 'cancel stops every process of the job and records CANCELLED' '
    h=$("$ELRUN" submit -j 2x2 --no-python "$T/sleeper.sh")
    d=$(dir_of $h)
    on_failure_show "$d/supervisor.log" "$d/replicas/*/combined.log"
    wait_until "[[ \$(grep -c \"up\$\" \"$d\"/replicas/*/combined.log | awk -F: \"{s+=\\\$2} END {print s}\") == 4 ]]" 30
    test "$(job_and_supervisor "$d" | wc -l)" -ge 7   # supervisor, 2 agents, 4 workers
    "$ELRUN" cancel $h >"$T/cancel.out"
    test ! -s "$T/cancel.out"
    test "$(job_and_supervisor "$d")" = ""
    test "$(state_of $h)" = CANCELLED
    "$ELRUN" status $h | contains "^ \*sleeper\[0\]:CANCELLED"
    "$ELRUN" cancel $h   # a second cancel is harmless
    "$ELRUN" logs $h -f --tail 1 >"$T/f.out"   # -f on an ended job returns
    test -s "$T/f.out"
'

test_expect_success 'the submitting terminal hanging up does not touch the job' '
    # a session of its own, as a terminal gives; HUP to all of it
    h=$(setsid bash -c "\"$ELRUN\" submit -j 1x1 --no-python \"$T/sleeper.sh\"; kill -HUP 0") || true
    grep -q "^local://" <<<"$h"
    d=$(dir_of $h)
    on_failure_show "$d/supervisor.log" "$d/replicas/*/combined.log"
    wait_until "grep -q up \"$d/replicas/0/combined.log\" 2>/dev/null" 30
    test "$(state_of $h)" = RUNNING
    "$ELRUN" cancel $h
    test "$(job_and_supervisor "$d")" = ""
'

if [[ -x $TRAIN && -f $DATA/train-images-idx3-ubyte.gz ]]; then
test_expect_success '-j 1:3x1: a replica killed mid-run, the others finish' '
    h=$("$ELRUN" submit -j 1:3x1 --no-python "$TRAIN" --subset 20000 \
        --epochs 3 --hidden 128 --ckpt-dir "$T/ckpt" --ckpt-every 40)
    d=$(dir_of $h)
    on_failure_show "$d/supervisor.log" "$d/replicas/*/combined.log"
    wait_until "ls \"$T/ckpt\" 2>/dev/null | contains ckpt-" 120
    victim=$(cat "$d/replicas/2/pid")
    kill -KILL "$victim"
    wait_until "[[ \$(state_of $h) == SUCCEEDED ]]" 180
    "$ELRUN" status $h | tee "$T/st3"
    grep -q "^  train_fmnist\[2\]:FAILED (exitcode: 137)" "$T/st3"
    grep -q "^ \*train_fmnist\[0\]:SUCCEEDED" "$T/st3"
    grep -q "^  train_fmnist\[1\]:SUCCEEDED" "$T/st3"
    "$ELRUN" logs $h train_fmnist/0 | contains -E "round [0-9]+: 2 nodes"
    "$ELRUN" logs $h | contains -E "final: test accuracy [0-9.]+%.*world 2"
    test "$(job_and_supervisor "$d")" = ""
'
else
    test_skip '-j 1:3x1 with a replica killed' "needs $TRAIN"
fi

test_expect_success 'a failed job: FAILED with its root cause; --wait returns 1' '
    st=0
    "$ELRUN" submit -j 2x1 --wait --no-python "$T/fail.sh" >"$T/h4" 2>"$T/w4" || st=$?
    test $st = 1
    grep -q "job finished: FAILED" "$T/w4"
    h=$(cat "$T/h4")
    "$ELRUN" status $h | tee "$T/st4"
    grep -q "State: FAILED" "$T/st4"
    grep -q "Msg: root cause: replica [01], rank 1 on .* exited with 3" "$T/st4"
    grep -q "        rank: 1" "$T/st4"
    "$ELRUN" status --json $h | python3 -c "
import json, sys
d = json.load(sys.stdin)
assert d[\"state\"] == \"FAILED\", d
assert d[\"root_cause\"][\"rank\"] == 1 and d[\"root_cause\"][\"exitcode\"] == 3, d
assert d[\"roles\"][0][\"replicas\"][0][\"state\"] == 5, d
"
'

test_expect_success '--max-retries reruns a failed job, counted in Num Restarts' '
    h=$("$ELRUN" submit -j 2x1 --max-retries 2 --wait --no-python "$T/fail.sh" 2>/dev/null) || true
    "$ELRUN" status $h | tee "$T/st5"
    grep -q "State: FAILED" "$T/st5"
    grep -q "Num Restarts: 2" "$T/st5"
    test "$(grep -c "worker 1 starting" "$(dir_of $h)"/replicas/*/combined.log | awk -F: "{s+=\$2} END {print s}")" = 3
'

test_expect_success 'dist.ddp spelling with --script and -- ARGS (python)' '
    cat >"$T/ddp.py" <<EOF
import os, sys
print("ddp", os.environ["RANK"], os.environ["WORLD_SIZE"], " ".join(sys.argv[1:]), os.environ.get("FOO"))
EOF
    h=$(PYTHON_EXEC=/usr/bin/python3 "$ELRUN" submit dist.ddp -j 2x1 --env FOO=bar,BAZ=1 --script "$T/ddp.py" -- --epochs 3)
    wait_until "[[ \$(state_of $h) == SUCCEEDED ]]" 60
    "$ELRUN" logs $h --regex "^ddp" | sort >"$T/ddp.out"
    cat "$T/ddp.out"
    grep -q "^ddp/0 ddp [01] 2 --epochs 3 bar$" "$T/ddp.out"
    grep -q "^ddp/1 ddp [01] 2 --epochs 3 bar$" "$T/ddp.out"
'

test_done

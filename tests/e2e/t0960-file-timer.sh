#!/usr/bin/env bash
# torch's file timer under elrun (TORCHELASTIC_ENABLE_FILE_TIMER=1), driven
# by Debian's real torch 1.13 client (FileTimerClient, timer.expires): a
# worker whose expires(after=1) block sleeps is killed and reported hung,
# and the group restarts; one that releases in time is not; malformed
# requests and a timer of a process that is no worker are ignored with one
# line each; a pipe that cannot be made is a clear error.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/t01-common.bash"

PY=$(torch_python)
if [[ -z $PY ]]; then
    test_skip 'file timer' 'no python3 with torch (apt-get install python3-torch)'
    test_done; exit
fi
export PYTHON_EXEC=$PY
W="$ROOT/tests/e2e/py/file_timer_worker.py"

# ft CASE MODE [ELRUN ARGS...]: run one worker of W MODE under the timer
# (exit status in RC, stderr in $T/CASE/err).
ft() {
    local c=$1 mode=$2; shift 2
    mkdir -p "$T/$c"
    RC=0
    ELRUN_LOG_LEVEL=info TORCHELASTIC_ENABLE_FILE_TIMER=1 "$ELRUN" --standalone \
        --nproc-per-node=1 "$@" "$W" "$mode" "$T/$c/out" >"$T/$c/o" 2>"$T/$c/err" || RC=$?
}

test_expect_success 'an expires(after=1) block that sleeps: the worker is killed, reported hung with the timer, the group restarts' '
    ft hang hang --max-restarts=1
    [[ $RC -eq 0 ]] || { tail -20 "$T/hang/err"; false; }
    p=$(sed -n "s/^sleeping pid=//p" "$T/hang/out")
    [[ -n $p ]]
    grep -q "Starting a FileTimerServer with .*/watchdog_timer \.\.\.$" "$T/hang/err"
    grep -Eq "worker rank 0 \(local_rank 0, pid $p\) on .* is hung: its file timer .hang-block. \(TORCHELASTIC_TIMER_FILE\) expired [0-9.]+ s ago; killing it$" "$T/hang/err"
    grep -q "Reaping worker_pid=\[$p\]. Expired timers: \[.hang-block.\]" "$T/hang/err"
    grep -q "restarting (1 of 1 restarts used)" "$T/hang/err"
    grep -q "^done attempt=1 " "$T/hang/out"
    refute grep -q "not killed" "$T/hang/out"
'

test_expect_success 'a block that ends in time: not killed past its deadline; TORCHELASTIC_TIMER_FILE is used, and removed at the end' '
    TORCHELASTIC_TIMER_FILE="$T/ok/pipe" ft ok ok
    [[ $RC -eq 0 ]] || { tail -20 "$T/ok/err"; false; }
    grep -q "Starting a FileTimerServer with $T/ok/pipe \.\.\.$" "$T/ok/err"
    grep -q "^done attempt=0 " "$T/ok/out"
    refute grep -q "is hung\|Reaping" "$T/ok/err"
    refute test -e "$T/ok/pipe"
'

test_expect_success 'a timer with signal 0 expires: logged as torch does, the worker is not killed' '
    ft nosig nosig
    [[ $RC -eq 0 ]] || { tail -20 "$T/nosig/err"; false; }
    p=$(sed -n "s/^done attempt=0 pid=//p" "$T/nosig/out")
    [[ -n $p ]]
    grep -q "Reaping worker_pid=\[$p\]. Expired timers: \[.quick-block.\]" "$T/nosig/err"
    grep -q "No signal specified with worker=\[$p\]. Do not reap it." "$T/nosig/err"
    refute grep -q "is hung" "$T/nosig/err"
'

test_expect_success 'malformed requests and a timer of pid 1: one line each, nobody is killed, the job succeeds' '
    ft bad bad
    [[ $RC -eq 0 ]] || { tail -20 "$T/bad/err"; false; }
    grep -q "^done attempt=0 " "$T/bad/out"
    [[ $(grep -c "file timer: ignoring a malformed request on .*/watchdog_timer: not JSON" "$T/bad/err") -eq 1 ]]
    refute grep -q "ignoring a request of more than" "$T/bad/err"
    [[ $(grep -c "file timer: ignoring a timer of pid 1, which is not a worker of this agent" "$T/bad/err") -eq 1 ]]
    refute grep -q "is hung\|Reaping" "$T/bad/err"
'

test_expect_success 'a timer pipe that cannot be made: one clear line, no worker starts' '
    mkdir -p "$T/nodir"
    RC=0
    TORCHELASTIC_ENABLE_FILE_TIMER=1 TORCHELASTIC_TIMER_FILE=/nonexistent/x/pipe \
        "$ELRUN" --standalone --nproc-per-node=1 --no-python touch "$T/nodir/ran" 2>"$T/nodir/err" || RC=$?
    cat "$T/nodir/err"
    [[ $RC -ne 0 ]]
    grep -q "TORCHELASTIC_ENABLE_FILE_TIMER=1: cannot create the timer pipe /nonexistent/x/pipe: No such file or directory (set TORCHELASTIC_TIMER_FILE to a path in a writable local directory)" "$T/nodir/err"
    refute test -e "$T/nodir/ran"
'

test_expect_success 'without TORCHELASTIC_ENABLE_FILE_TIMER: no pipe; a TORCHELASTIC_TIMER_FILE given passes through (as torchrun)' '
    mkdir -p "$T/off"
    "$ELRUN" --standalone --nproc-per-node=1 --no-python sh -c \
        "echo \${TORCHELASTIC_TIMER_FILE-unset} >\"$T/off/a\""
    [[ $(cat "$T/off/a") == unset ]]
    TORCHELASTIC_TIMER_FILE="$T/off/p" "$ELRUN" --standalone --nproc-per-node=1 --no-python sh -c \
        "echo \$TORCHELASTIC_TIMER_FILE >\"$T/off/b\""
    [[ $(cat "$T/off/b") == "$T/off/p" ]]
    refute test -e "$T/off/p"
'
test_done

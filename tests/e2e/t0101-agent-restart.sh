#!/usr/bin/env bash
# Worker failures: a crash (exit code, SIGSEGV, SIGKILL) stops the group and
# restarts it while --max-restarts allows, and the job then succeeds; when
# restarts run out, torchrun's failure table and exit status 1; error files
# are read and the root cause copied to the agent's own error file.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/t01-common.bash"

# crash.sh HOW DIR: rank 1 fails in attempt 0 (HOW = exit|segv|kill), the
# others wait for SIGTERM; every later attempt succeeds.  Each start is
# logged to DIR/starts.
cat >"$T/crash.sh" <<'EOF'
#!/bin/bash
how=$1 dir=$2
echo "$TORCHELASTIC_RESTART_COUNT $RANK $$" >> "$dir/starts"
if [[ $TORCHELASTIC_RESTART_COUNT == 0 ]]; then
    if [[ $RANK == 1 ]]; then
        case $how in
            exit) exit 3 ;;
            segv) kill -SEGV $$ ;;
            kill) kill -KILL $$ ;;
        esac
    fi
    exec sleep 60
fi
exit 0
EOF
chmod +x "$T/crash.sh"

for how in exit segv kill; do
    test_expect_success "rank 1 crashes ($how) on attempt 0: restart, then success" '
        mkdir "$T/$how"
        "$ELRUN" --standalone --nproc-per-node=3 --max-restarts=1 --no-python \
            "$T/crash.sh" '$how' "$T/$how" 2>"$T/$how/err"
        # Rank 1 failed in attempt 0 (the others may have been stopped
        # before they even started), every rank ran attempt 1.
        grep -q "^0 1 " $T/'$how'/starts
        [[ $(grep -c "^1 " $T/'$how'/starts) == 3 ]]
        grep -q "restarting (1 of 1 restarts used)" "$T/$how/err"
        refute grep -q "ChildFailedError" "$T/$how/err"
    '
done

test_expect_success 'the report says which signal killed the worker' '
    grep -q "killed by signal 11 (SEGV)" "$T/segv/err"
    grep -q "killed by signal 9 (KILL)" "$T/kill/err"
    grep -q "exited with code 3" "$T/exit/err"
'

# always.sh: rank 1 always dies from SIGKILL; the others wait.
cat >"$T/always.sh" <<'EOF'
#!/bin/bash
echo "$TORCHELASTIC_RESTART_COUNT $RANK" >> "$1/starts"
[[ $RANK == 1 ]] && kill -KILL $$
exec sleep 60
EOF
chmod +x "$T/always.sh"

test_expect_success 'restarts exhausted: failure table, exit 1, no process left' '
    mkdir "$T/ex"
    set +e
    "$ELRUN" --standalone --nproc-per-node=2 --max-restarts=2 --no-python \
        "$T/always.sh" "$T/ex" >"$T/ex/out" 2>"$T/ex/err"; st=$?
    set -e
    [[ $st == 1 ]]
    # Rank 1 ran (and died) in each of the 3 attempts.
    [[ $(grep -c " 1$" "$T/ex/starts") == 3 ]]
    pid=$(sed -n "s/.*exitcode  : -9 (pid: \([0-9]*\))/\1/p" "$T/ex/err")
    [[ -n $pid ]]
    sed -n "/^=====/,\$p" "$T/ex/err" >"$T/ex/box"
    # torchrun 1.13 format (width = the longest line, at most 60).
    cat >"$T/ex/want" <<EOF
============================================================
$T/always.sh FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : TIME
  host      : HOST
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: $pid)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID $pid
============================================================
EOF
    # Rules as wide as the longest other line (at most 60), as torch does.
    w=$(grep -v "^[=-]*$" "$T/ex/box" | awk "{ if (length(\$0) > m) m = length(\$0) } END { print (m > 60 ? 60 : m) }")
    [[ $(grep -c "^$(printf "%${w}s" | tr " " =)$" "$T/ex/box") == 2 ]]
    [[ $(grep -c "^$(printf "%${w}s" | tr " " -)$" "$T/ex/box") == 2 ]]
    sed -i "s/^=*$/=/; s/^-*$/-/" "$T/ex/want" "$T/ex/box"
    sed -i "s/^  time      : .*/  time      : TIME/; s/^  host      : .*/  host      : HOST/" "$T/ex/box"
    diff "$T/ex/want" "$T/ex/box"
    grep -q "failed (exitcode: -9) local_rank: 1 (pid: $pid) of binary: $T/always.sh" "$T/ex/err"
    refute alive $pid
    refute pgrep -f "$T/always.sh"
'

# raise.sh: rank 1 writes an error file as PyTorch's @record does and exits
# 1; the others wait to be stopped.
cat >"$T/raise.sh" <<'EOF'
#!/bin/bash
[[ $RANK == 1 ]] || exec sleep 60
printf '{"message": {"message": "RuntimeError: boom from rank %s", "extraInfo": {"py_callstack": "Traceback (most recent call last):\\n  File \\"x.py\\", line 1\\nRuntimeError: boom from rank %s\\n", "timestamp": "%s"}}}' "$RANK" "$RANK" "$(date +%s)" > "$TORCHELASTIC_ERROR_FILE"
exit 1
EOF
chmod +x "$T/raise.sh"

test_expect_success 'error files: traceback in the table, copied to the agent'"'"'s error file' '
    mkdir "$T/ef"
    set +e
    TORCHELASTIC_ERROR_FILE=$T/ef/agent.json "$ELRUN" --standalone --nproc-per-node=2 \
        --log-dir "$T/ef/logs" --no-python "$T/raise.sh" 2>"$T/ef/err"; st=$?
    set -e
    [[ $st == 1 ]]
    sed -n "/^=====/,\$p" "$T/ef/err" >"$T/ef/box"
    grep -A1 "^Failures:" "$T/ef/box" | contains "^  <NO_OTHER_FAILURES>$"
    grep -A1 "^Root Cause" "$T/ef/box" | contains "^\[0\]:"
    grep -A9 "^Root Cause" "$T/ef/box" | contains "^  rank      : 1 (local_rank: 1)"
    grep -q "^  error_file: $T/ef/logs/[0-9a-f-]*_[a-z0-9_]*/attempt_0/1/error.json$" "$T/ef/box"
    grep -q "^  traceback : Traceback (most recent call last):$" "$T/ef/box"
    grep -q "^    File \"x.py\", line 1$" "$T/ef/box"
    grep -q "^  RuntimeError: boom from rank 1$" "$T/ef/box"
    grep -q "^  $" "$T/ef/box"
    # The agent error file: the root cause plus its errorCode.
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); m=d[\"message\"]; assert m[\"message\"]==\"RuntimeError: boom from rank 1\", m; assert m[\"errorCode\"]==1, m" "$T/ef/agent.json"
    # Logs stay where torchrun puts them.
    ls -d "$T"/ef/logs/*_*/attempt_0/0 "$T"/ef/logs/*_*/attempt_0/1
'

test_expect_success 'a failure without an error file: torchrun'"'"'s hint' '
    set +e
    "$ELRUN" --standalone --no-python sh -c "exit 5" 2>"$T/nf.err"; st=$?
    set -e
    [[ $st == 1 ]]
    grep -q "^  exitcode  : 5 (pid: " "$T/nf.err"
    grep -q "^  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html$" "$T/nf.err"
'

# slowterm.sh: ignores SIGTERM (the grace must end in SIGKILL).
cat >"$T/slowterm.sh" <<'EOF'
#!/bin/bash
trap "" TERM
echo $$ > "$1/pid.$RANK"
[[ $RANK == 1 ]] && { sleep 0.2; exit 4; }
while :; do sleep 1; done
EOF
chmod +x "$T/slowterm.sh"

test_expect_success 'a worker that ignores SIGTERM is killed after --stop-timeout' '
    mkdir "$T/st"
    start=$(date +%s%N)
    set +e
    "$ELRUN" --standalone --nproc-per-node=2 --stop-timeout=0.5 --no-python \
        "$T/slowterm.sh" "$T/st" 2>"$T/st/err"; st=$?
    set -e
    el=$(( ($(date +%s%N) - start) / 1000000 ))
    [[ $st == 1 ]]
    grep -q "sending SIGKILL" "$T/st/err"
    (( el < 5000 ))
    p0=$(cat "$T/st/pid.0"); [[ -n $p0 ]]
    refute alive "$p0"
'

test_expect_success 'the log dir holds attempt_N/<rank> per restart' '
    mkdir "$T/ld"
    "$ELRUN" --standalone --nproc-per-node=2 --max-restarts=1 --log-dir "$T/ld/logs" \
        -r 3 --no-python "$T/crash.sh" exit "$T/ld"
    d=$(echo "$T"/ld/logs/*_*)
    [[ -d $d/attempt_0/0 && -d $d/attempt_0/1 && -d $d/attempt_1/0 && -d $d/attempt_1/1 ]]
    [[ -f $d/attempt_1/0/stdout.log && -f $d/attempt_1/1/stderr.log ]]
'

# flaky.sh DIR: rank 1 fails in every attempt (a fault that persists, such
# as a read-only checkpoint directory); each start is stamped in ns.
cat >"$T/flaky.sh" <<'EOF'
#!/bin/bash
echo "$TORCHELASTIC_RESTART_COUNT $RANK $(date +%s%N)" >> "$1/starts"
[[ $RANK == 1 ]] && exit 7
exec sleep 60
EOF
chmod +x "$T/flaky.sh"

# start_ns DIR ATTEMPT: when rank 1 started that attempt.
start_ns() { sed -n "s/^$2 1 //p" "$1/starts"; }

test_expect_success 'restart back-off: the first restart at once, then --restart-backoff, doubling' '
    mkdir "$T/bo"
    set +e
    "$ELRUN" --standalone --nproc-per-node=2 --max-restarts=3 --restart-backoff=0.3 \
        --no-python "$T/flaky.sh" "$T/bo" 2>"$T/bo/err"; st=$?
    set -e
    cat "$T/bo/err"
    [[ $st == 1 ]]
    [[ $(grep -c " 1 " "$T/bo/starts") == 4 ]]
    # No wait before restart 1, 0.3 s before restart 2, 0.6 s before 3.
    [[ $(grep -c "waiting .* s before restarting" "$T/bo/err") == 2 ]]
    grep -q "waiting 0.3 s before restarting (back-off after 2 failures in a row)" "$T/bo/err"
    grep -q "waiting 0.6 s before restarting (back-off after 3 failures in a row)" "$T/bo/err"
    # The waits happened (lower bounds only: a busy machine makes them longer).
    (( $(start_ns "$T/bo" 2) - $(start_ns "$T/bo" 1) >= 300000000 ))
    (( $(start_ns "$T/bo" 3) - $(start_ns "$T/bo" 2) >= 600000000 ))
'

test_expect_success 'PET_RESTART_BACKOFF sets the back-off; 0 restarts at once' '
    mkdir "$T/bo0" "$T/boe"
    set +e
    "$ELRUN" --standalone --nproc-per-node=2 --max-restarts=2 --restart-backoff=0 \
        --no-python "$T/flaky.sh" "$T/bo0" 2>"$T/bo0/err"
    PET_RESTART_BACKOFF=0.2 "$ELRUN" --standalone --nproc-per-node=2 --max-restarts=2 \
        --no-python "$T/flaky.sh" "$T/boe" 2>"$T/boe/err"
    set -e
    [[ $(grep -c " 1 " "$T/bo0/starts") == 3 && $(grep -c " 1 " "$T/boe/starts") == 3 ]]
    refute grep -q "before restarting" "$T/bo0/err"
    grep -q "waiting 0.2 s before restarting" "$T/boe/err"
'

test_expect_success 'SIGTERM during the back-off ends the agent at once: no restart, exit 1' '
    mkdir "$T/bos"
    "$ELRUN" --standalone --nproc-per-node=2 --max-restarts=5 --restart-backoff=120 --restart-backoff-max=300 \
        --no-python "$T/flaky.sh" "$T/bos" 2>"$T/bos/err" &
    apid=$!
    wait_for_line "$T/bos/err" "waiting 120 s before restarting"
    kill -TERM $apid
    # 10 s is a bound far under the 120 s wait, not a timing assertion.
    set +e; timeout 10 tail --pid=$apid -f /dev/null; t=$?; wait $apid; st=$?; set -e
    cat "$T/bos/err"
    [[ $t == 0 && $st == 1 ]]
    grep -q "received signal 15 (TERM) while waiting to restart; shutting down" "$T/bos/err"
    refute grep -q "^2 " "$T/bos/starts"
'

test_done

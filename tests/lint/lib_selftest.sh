#!/usr/bin/env bash
# lib_selftest.sh -- cases for refute and wait_until of tests/e2e/lib.sh, run
# by tests/lint-e2e.sh: a case named "passes: ..." must pass, "fails: ..."
# must fail, and "fails loudly: ..." must fail saying why (a "refute:" or
# "wait_until:" line in its log).
. "$(dirname "$0")/../e2e/lib.sh"
echo hello >"$T/f"

test_expect_success 'passes: the pitfall itself, ! CMD before the last line' '! true; echo after'
test_expect_success 'passes: refute false' 'refute false; echo after'
test_expect_success 'fails loudly: refute true, before the last line' 'refute true; echo after'
test_expect_success 'fails: the pitfall: a writer that goes on after grep -q matched (SIGPIPE)' \
    'seq 1 300000 | grep -qx 1; echo after'
test_expect_success 'passes: contains reads it all: the writer ends normally' \
    'seq 1 300000 | contains -x 1; echo after'
test_expect_success 'fails: contains that finds nothing' 'seq 1 10 | contains -x 11; echo after'
test_expect_success 'passes: refute grep that finds nothing' 'refute grep -q bye "$T/f"; echo after'
test_expect_success 'fails loudly: refute grep that finds a line' 'refute grep hello "$T/f"; echo after'
test_expect_success 'fails loudly: refute grep on a missing file (status 2 is no "no")' \
    'refute grep -q bye "$T/missing"; echo after'
test_expect_success 'fails loudly: refute a command killed by a signal' 'refute sh -c "kill -SEGV \$\$"; echo after'
test_expect_success 'fails loudly: refute a command not found' 'refute no-such-command-xyz; echo after'
test_expect_success 'fails loudly: refute timeout that timed out' 'refute timeout 0.1 sleep 5; echo after'
test_expect_success 'passes: refute leaves the redirections to the command' '
    refute sh -c "echo oops >&2; exit 3" 2>"$T/err"
    grep -qx oops "$T/err"
'
test_expect_success 'fails loudly: refute says why even under 2>/dev/null' 'refute true 2>/dev/null; echo after'
test_expect_success 'fails loudly: refute in a loop fails on any round' 'for i in 1 0 1; do refute test $i = 0; done'
test_expect_success 'passes: wait_until a condition that comes true' '
    (sleep 0.2; touch "$T/late") &
    wait_until "[[ -e \$T/late ]]" 10
'
test_expect_success 'fails loudly: wait_until a condition that never holds' 'wait_until "[[ -e \$T/never ]]" 1; echo after'
test_done

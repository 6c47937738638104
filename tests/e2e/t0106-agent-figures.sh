#!/usr/bin/env bash
# bench/agent_launch.sh keeps working: run it briefly (elrun only) and check
# that it measures and prints every figure.  The figures themselves are
# judged in bench/ and BENCHMARKS.md, not here: this machine is shared and
# noisy, and a test must not fail because it was busy.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/t01-common.bash"

test_expect_success 'bench/agent_launch.sh runs and reports every figure (elrun only)' '
    [[ -x $ROOT/$BUILD/bench/agent_wallrss ]]
    NO_TORCHRUN=1 RUNS=3 BUILD=$BUILD "$ROOT/bench/agent_launch.sh" >"$T/fig" 2>&1
    cat "$T/fig"
    for f in launch_wall start_all_workers recovery_kill_to_all_restarted vmhwm_of_agent; do
        grep -q "^RESULT agent_$f elrun: med [0-9]" "$T/fig" || { echo "no $f"; false; }
    done
'

test_done

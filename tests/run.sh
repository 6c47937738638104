#!/usr/bin/env bash
# Run every test: the lint of the e2e scripts (tests/lint-e2e.sh: no
# assertion that can never fail) and the C format check
# (scripts/format-check.sh), the C unit tests, the fuzz corpus replay,
# and the end-to-end scripts in tests/e2e (which use real processes, signals
# and PyTorch).
# Each part prints "N passed, N failed"; this adds them up into the last line.
#   tests/run.sh               everything
#   tests/run.sh lint          only the lint (and its own fixtures)
#   tests/run.sh e2e t0101     only e2e scripts whose name contains t0101
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD
total_pass=0 total_fail=0
failed_parts=()

tally() { # name, log file, exit status
    local line p f
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$2" | tail -1)
    if [[ -z $line ]]; then p=0; f=1; else
        p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}
        [[ $3 -ne 0 && $f -eq 0 ]] && f=1
    fi
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    ((f > 0)) && failed_parts+=("$1")
}

run_part() { # name, command...
    local name=$1; shift
    local log; log=$(mktemp)
    echo "== $name"
    "$@" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    tally "$name" "$log" "$rc"
    rm -f "$log"
}

what=${1:-all} filter=${2:-}
if [[ $what == all || $what == lint ]]; then
    run_part lint-e2e bash tests/lint-e2e.sh
    # The C sources as .clang-format says (scripts/format-check.sh).
    run_part format bash -c 'scripts/format-check.sh >&2 && echo "1 passed, 0 failed" || { echo "0 passed, 1 failed"; exit 1; }'

fi
if [[ $what == all || $what == unit ]]; then
    run_part unit "$BUILD/unit_tests"
    for f in "$BUILD"/fuzz_replay_*; do
        [[ -x $f ]] || continue
        n=${f##*/fuzz_replay_}
        run_part "fuzz-$n" "$f" "tests/fuzz/corpus/$n"
    done
    run_part prometheus-rules bash tests/prometheus/run.sh
fi
if [[ $what == all || $what == e2e ]]; then
    for t in tests/e2e/t[0-9]*.sh; do
        [[ -e $t ]] || continue
        [[ -n $filter && $t != *"$filter"* ]] && continue
        run_part "$(basename "$t" .sh)" bash "$t"
    done
fi
echo
((${#failed_parts[@]})) && echo "failing parts: ${failed_parts[*]}"
echo "$total_pass passed, $total_fail failed"
((total_fail == 0))

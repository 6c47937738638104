#!/usr/bin/env bash
# The alerting rules of deploy/prometheus: promtool's syntax check, then its
# unit tests (elrun-rules.test.yml).  Prints "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")"
if ! command -v promtool >/dev/null; then
    echo "promtool not found: install Debian's prometheus (make deps)"
    echo "0 passed, 1 failed"
    exit 1
fi
pass=0 fail=0
for step in "check rules ../../deploy/prometheus/elrun-rules.yml" \
            "test rules elrun-rules.test.yml"; do
    # shellcheck disable=SC2086
    if promtool $step; then
        echo "ok - promtool $step"; pass=$((pass + 1))
    else
        echo "not ok - promtool $step"; fail=$((fail + 1))
    fi
done
echo "$pass passed, $fail failed"
((fail == 0))

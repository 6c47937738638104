#!/usr/bin/env bash
# check-exports.sh -- libelrun.so exports exactly its public API: every
# dynamic symbol it defines is declared in include/elrun/*.h, and every
# function or variable declared there is exported (so none is declared and
# never defined).  The list comes from scripts/public-symbols.sh.  Prints
# "N passed, N failed" (two checks) like the other test parts.
#
#   scripts/check-exports.sh [build/libelrun.so]
set -uo pipefail
cd "$(dirname "$0")/.."
lib=${1:-${BUILD:-build}/libelrun.so}
[[ -f $lib ]] || { echo "check-exports: no $lib (build first)"; echo "0 passed, 1 failed"; exit 1; }
pub=$(scripts/public-symbols.sh) || { echo "0 passed, 1 failed"; exit 1; }
exp=$(nm -D --defined-only "$lib" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' | sort -u)
pass=0 fail=0
extra=$(comm -23 <(echo "$exp") <(echo "$pub"))
if [[ -z $extra ]]; then
    echo "ok 1 - every symbol $lib exports is declared in include/elrun"; pass=$((pass + 1))
else
    echo "not ok 1 - $lib exports $(wc -l <<<"$extra") symbols no public header declares (hide them: only include/elrun/*.h is exported):"
    sed 's/^/    /' <<<"$extra" | head -40; fail=$((fail + 1))
fi
missing=$(comm -13 <(echo "$exp") <(echo "$pub"))
if [[ -z $missing ]]; then
    echo "ok 2 - every function and variable of include/elrun is exported ($(wc -l <<<"$pub"))"; pass=$((pass + 1))
else
    echo "not ok 2 - declared in include/elrun but not exported by $lib (not defined, or hidden):"
    sed 's/^/    /' <<<"$missing" | head -40; fail=$((fail + 1))
fi
echo "$pass passed, $fail failed"
((fail == 0))

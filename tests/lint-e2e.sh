#!/usr/bin/env bash
# lint-e2e.sh -- the "lint" part of tests/run.sh: no e2e assertion that can
# never fail (tests/lint/lint_e2e.py: a `!`-negated command before a body's
# last line, `[[ $? ]]`, a readiness loop that gives up silently, `CMD |
# grep -q` under pipefail).
#   1. the lint itself, on tests/lint/fixtures/*: it must report exactly the
#      lines marked "# expect: RULE..." (with those rules), and exit 1 when
#      it reports any, 0 when none;
#   2. refute and wait_until (tests/e2e/lib.sh) fail a case when they must,
#      and say why (tests/lint/lib_selftest.sh);
#   3. every tests/e2e/*.sh and *.bash: nothing to report.
# Prints TAP lines and "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
LINT=tests/lint/lint_e2e.py
PY=${LINT_PYTHON:-python3}
pass=0 fail=0 n=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

result() { # status, name, details file
    n=$((n + 1))
    if (($1 == 0)); then
        echo "ok $n - $2"; pass=$((pass + 1))
    else
        echo "not ok $n - $2"; fail=$((fail + 1))
        sed 's/^/    /' "$3"
    fi
}

for f in tests/lint/fixtures/*; do
    # "LINE RULE" for each rule a marked line expects, and for each finding
    awk '{ if (match($0, /# expect: [a-z -]*/)) {
               k = split(substr($0, RSTART + 10, RLENGTH - 10), r, " ")
               for (i = 1; i <= k; i++) if (r[i] ~ /^[a-z-]+$/) print NR, r[i]
           } }' "$f" | sort -u >"$tmp/want"
    "$PY" "$LINT" "$f" >"$tmp/out" 2>&1; st=$?
    sed -n 's/^[^:]*:\([0-9]*\): \([a-z-]*\): .*/\1 \2/p' "$tmp/out" | sort -u >"$tmp/got"
    want_st=0; [[ -s $tmp/want ]] && want_st=1
    {
        diff "$tmp/want" "$tmp/got" | sed -n 's/^< /missed: line /p; s/^> /reported wrongly: line /p'
        ((st == want_st)) || { echo "exit status $st, not $want_st"; cat "$tmp/out"; }
    } >"$tmp/why"
    result "$([[ -s $tmp/why ]] && echo 1 || echo 0)" "lint fixture ${f##*/}: $(wc -l <"$tmp/want") findings, as marked" "$tmp/why"
done

# refute and wait_until themselves (tests/lint/lib_selftest.sh)
bash tests/lint/lib_selftest.sh >"$tmp/lib.out" 2>&1
awk -v T="$tmp" '
    /^(not )?ok [0-9]+ - / { if (name != "") { print body > (T "/case." sprintf("%03d", ++k)) }
                             ok = ($1 == "ok"); name = $0; sub(/^(not )?ok [0-9]+ - /, "", name)
                             body = ok "\t" name "\n"; next }
    /^    / { body = body $0 "\n" }
    END { if (name != "") print body > (T "/case." sprintf("%03d", ++k)) }' "$tmp/lib.out"
for c in "$tmp"/case.*; do
    [[ -e $c ]] || { result 1 "lib.sh self-test ran" "$tmp/lib.out"; break; }
    IFS=$'\t' read -r ok name <"$c"
    case $name in
        passes:*) [[ $ok == 1 ]]; st=$? ;;
        "fails loudly:"*) [[ $ok == 0 ]] && grep -qE "^    (refute|wait_until): " "$c"; st=$? ;;
        fails:*) [[ $ok == 0 ]]; st=$? ;;
        *) st=1 ;;
    esac
    { echo "the case $([[ $ok == 1 ]] && echo passed || echo failed); its log:"; sed -n "2,\$p" "$c"; } >"$tmp/why"
    result $st "lib.sh: $name" "$tmp/why"
done

for f in tests/e2e/*.sh tests/e2e/*.bash; do
    [[ -e $f ]] || continue
    "$PY" "$LINT" "$f" >"$tmp/out" 2>&1
    result $? "$f: no assertion that cannot fail" "$tmp/out"
done

echo "$pass passed, $fail failed"
((fail == 0))

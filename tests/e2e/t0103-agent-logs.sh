#!/usr/bin/env bash
# Worker output: --tee prefixes every whole line with [<role><local_rank>]:
# and never mixes partial lines of different workers; --redirects sends
# streams to <log_dir>/<run_id>_<rand>/attempt_<n>/<rank>/std{out,err}.log;
# --local-ranks-filter keeps other ranks off the console.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/t01-common.bash"

# chatty.sh: writes lines in pieces (a partial line, a pause, the rest),
# to stdout and stderr, and a last line without a newline.
cat >"$T/chatty.sh" <<'EOF'
#!/bin/bash
for i in 1 2 3 4 5; do
    printf 'out %s line %s part-a ' "$LOCAL_RANK" "$i"
    sleep 0.01
    printf 'part-b\n'
    printf 'err %s line %s\n' "$LOCAL_RANK" "$i" >&2
done
printf 'tail %s' "$LOCAL_RANK"
EOF
chmod +x "$T/chatty.sh"

test_expect_success '--tee 3: every console line prefixed and whole' '
    "$ELRUN" --standalone --nproc-per-node=3 --tee 3 --log-dir "$T/l1" \
        --no-python "$T/chatty.sh" >"$T/t.out" 2>"$T/t.err"
    for r in 0 1 2; do
        [[ $(grep -c "^\[default$r\]:out $r line [1-5] part-a part-b$" "$T/t.out") == 5 ]]
        [[ $(grep -c "^\[default$r\]:err $r line [1-5]$" "$T/t.err") == 5 ]]
        grep -q "^\[default$r\]:tail $r$" "$T/t.out"
    done
    # No line that is not prefixed (no interleaved fragments).
    refute grep -v "^\[default[0-2]\]:" "$T/t.out"
    [[ $(wc -l <"$T/t.out") == 18 ]]
'

test_expect_success 'teed streams are also in the log files, unprefixed' '
    d=$(echo "$T"/l1/*_*/attempt_0)
    for r in 0 1 2; do
        [[ $(grep -c "^out $r line [1-5] part-a part-b$" $d/$r/stdout.log) == 5 ]]
        [[ $(grep -c "^err $r line [1-5]$" $d/$r/stderr.log) == 5 ]]
    done
'

test_expect_success '--redirects 3: nothing on the console, all in files' '
    "$ELRUN" --standalone --nproc-per-node=2 -r 3 --log-dir "$T/l2" --rdzv-id ignored \
        --no-python "$T/chatty.sh" >"$T/r.out" 2>"$T/r.err"
    [[ ! -s $T/r.out ]]
    # elrun itself says only where the logs go (#12.5: the log folder
    # always); no worker line reaches the console.
    refute grep -v -e OMP_NUM_THREADS -e "log directory set to: $T/l2/" "$T/r.err"
    [[ $(grep -c "log directory set to: " "$T/r.err") == 1 ]]
    d=$(echo "$T"/l2/*_*/attempt_0)
    [[ $(grep -c "part-b" $d/1/stdout.log) == 5 && $(grep -c "^err 1" $d/1/stderr.log) == 5 ]]
'

test_expect_success 'per-rank maps: -r 0:1 -t 1:2' '
    "$ELRUN" --standalone --nproc-per-node=2 -r 0:1 -t 1:2 --log-dir "$T/l3" \
        --no-python "$T/chatty.sh" >"$T/m.out" 2>"$T/m.err"
    d=$(echo "$T"/l3/*_*/attempt_0)
    # rank 0: stdout to file only, stderr to console unprefixed.
    [[ $(grep -c "part-b" $d/0/stdout.log) == 5 ]]
    refute grep -q "out 0" "$T/m.out"
    grep -q "^err 0 line 1$" "$T/m.err"
    # rank 1: stdout to console unprefixed, stderr teed with prefix.
    grep -q "^out 1 line 1 part-a part-b$" "$T/m.out"
    [[ $(grep -c "^\[default1\]:err 1 line" "$T/m.err") == 5 ]]
    [[ $(grep -c "^err 1 line" $d/1/stderr.log) == 5 ]]
'

test_expect_success '--local-ranks-filter: only those ranks reach the console' '
    "$ELRUN" --standalone --nproc-per-node=3 --tee=3 --local-ranks-filter=0,2 --role=trainer \
        --log-dir "$T/l4" --no-python "$T/chatty.sh" >"$T/f.out" 2>"$T/f.err"
    grep -q "^\[trainer0\]:out 0" "$T/f.out"
    grep -q "^\[trainer2\]:out 2" "$T/f.out"
    refute grep -q "trainer1" "$T/f.out" "$T/f.err"
    d=$(echo "$T"/l4/*_*/attempt_0)
    [[ $(grep -c "part-b" $d/1/stdout.log) == 5 ]]
    # Without redirects a filtered-out rank goes to /dev/null.
    "$ELRUN" --standalone --nproc-per-node=2 --local-ranks-filter=1 \
        --no-python "$T/chatty.sh" >"$T/g.out" 2>/dev/null
    grep -q "^out 1 line 1" "$T/g.out"
    refute grep -q "^out 0" "$T/g.out"
'

test_expect_success 'TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE sets the prefix' '
    TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="<\${role_name}|\${rank}|\${local_rank}> " \
        "$ELRUN" --standalone --nproc-per-node=2 --tee=1 --no-python "$T/chatty.sh" >"$T/p.out" 2>/dev/null
    grep -q "^<default|1|1> out 1 line 1" "$T/p.out"
'

test_expect_success 'a long line without a newline is cut, not lost' '
    "$ELRUN" --standalone --tee=1 --no-python python3 -c "import sys; sys.stdout.write(\"x\" * 200000)" >"$T/long.out"
    [[ $(tr -d "\n" <"$T/long.out" | sed "s/\[default0\]://g" | wc -c) == 200000 ]]
    refute grep -v "^\[default0\]:x*$" "$T/long.out"
'

test_done

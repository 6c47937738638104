#!/usr/bin/env bash
# The Fashion-MNIST example on libelrun: a clear error outside elrun, it
# learns a subset alone and as two workers under elrun, a worker killed
# mid-run makes the round restart and resume from the last checkpoint (or
# from the one a surviving rank saves on its way out) with the same final
# result, a later round with another world size resumes the same run (the
# line of the epoch it changed in says "world 2 -> 3 at step 70"),
# ranks without a shared directory resume from the one that has the
# checkpoint, and a corrupt newest checkpoint is skipped with a warning.
# Two nodes with a directory each both keep every checkpoint (a lost node 0
# and its directory lose no progress, after a normal end or a SIGTERM), and a
# save that fails (ENOSPC) is reported as failed by every rank.
. "$(dirname "$0")/lib.sh"
TRAIN="$ROOT/$BUILD/examples/train_fmnist"
DATA=/usr/share/datasets/fashion-mnist
# A subset that trains in about a second: 6000 samples, 47 steps per epoch.
ARGS="--subset 6000 --epochs 3 --hidden 128 --ckpt-every 25"

if [[ ! -x $TRAIN || ! -f $DATA/train-images-idx3-ubyte.gz ]]; then
    test_skip 'train_fmnist' "needs $TRAIN and dataset-fashion-mnist"
    test_done
    exit
fi

# final_acc FILE: the accuracy of the "final:" line.
final_acc() { sed -n 's/^final: test accuracy \([0-9.]*\)%.*/\1/p' "$1" | tail -1; }
# at_least A B: A >= B, as decimals.
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a >= b) }'; }

test_expect_success 'outside elrun: exit 1 naming the missing variable' '
    set +e; env -u RANK -u ELRUN_STANDALONE "$TRAIN" $ARGS >"$T/out0" 2>"$T/err0"; st=$?; set -e
    [[ $st == 1 ]]
    grep "RANK is not set" "$T/err0"
    grep "ELRUN_STANDALONE=1" "$T/err0"
'

test_expect_success 'alone (ELRUN_STANDALONE=1) it learns the subset' '
    ELRUN_STANDALONE=1 timeout 120 "$TRAIN" $ARGS >"$T/out1" 2>"$T/err1"
    cat "$T/out1"
    grep -c "^epoch [0-9]/3: 47 steps" "$T/out1" | contains -x 3
    at_least "$(final_acc "$T/out1")" 75
'

test_expect_success 'two workers under elrun learn the subset' '
    timeout 120 "$ELRUN" --standalone --nproc-per-node=2 --no-python \
        "$TRAIN" $ARGS >"$T/out2" 2>"$T/err2"
    cat "$T/out2"
    grep -q "world 2$" "$T/out2"
    at_least "$(final_acc "$T/out2")" 75
'

test_expect_success 'a lone worker killed at step 70 restarts from the checkpoint of step 50, same result' '
    timeout 180 "$ELRUN" --standalone --nproc-per-node=1 --max-restarts=1 \
        --no-python "$TRAIN" $ARGS --ckpt-dir "$T/ck3" --fail-at-step 70 \
        >"$T/out3" 2>"$T/err3"
    cat "$T/out3"
    grep "injected failure: rank 0 kills itself at step 70" "$T/err3"
    grep "resumed from checkpoint step 50 " "$T/err3"
    # The same world replays the same steps: bitwise the same model.
    [[ $(final_acc "$T/out3") == $(final_acc "$T/out1") ]]
'

test_expect_success 'rank 1 killed at step 70: rank 0 saves step 70 on its way out, no work lost' '
    timeout 180 "$ELRUN" --standalone --nproc-per-node=2 --max-restarts=1 \
        --no-python "$TRAIN" $ARGS --ckpt-dir "$T/ck3b" --fail-at-step 70 \
        >"$T/out3b" 2>"$T/err3b"
    grep "injected failure: rank 1 kills itself at step 70" "$T/err3b"
    grep "rank 0: the round is broken: saved checkpoint step 70 before exiting" "$T/err3b"
    grep "resumed from checkpoint step 70 " "$T/err3b"
    [[ $(final_acc "$T/out3b") == $(final_acc "$T/out2") ]]
'

test_expect_success 'rank 0 killed at step 70: rank 1 saves step 70 on its way out' '
    timeout 180 "$ELRUN" --standalone --nproc-per-node=2 --max-restarts=1 \
        --no-python "$TRAIN" $ARGS --ckpt-dir "$T/ck3d" --fail-at-step 70 \
        --fail-rank 0 >"$T/out3d" 2>"$T/err3d"
    grep "injected failure: rank 0 kills itself at step 70" "$T/err3d"
    grep "rank 1: the round is broken: saved checkpoint step 70 before exiting" "$T/err3d"
    grep "resumed from checkpoint step 70 " "$T/err3d"
    [[ $(final_acc "$T/out3d") == $(final_acc "$T/out2") ]]
'

test_expect_success 'SIGTERM (how the agent stops a round): rank 0 saves the last step' '
    ELRUN_STANDALONE=1 "$TRAIN" $ARGS --epochs 50 --ckpt-dir "$T/ck3c" \
        >"$T/out3c" 2>"$T/err3c" &
    pid=$!
    wait_for_line "$T/out3c" "^epoch 1/50" 60
    kill -TERM $pid
    st=0; wait $pid || st=$?
    [[ $st == 143 ]]
    # Saved on the way out, or by the periodic save of that very step.
    grep -E "rank 0: Terminated: (saved checkpoint step [0-9]+ before exiting|checkpoint step [0-9]+ is saved already)" "$T/err3c"
    step=$(sed -n "s/.*Terminated: \(saved \)\{0,1\}checkpoint step \([0-9]*\) .*/\2/p" "$T/err3c")
    ls "$T/ck3c" | contains "^ckpt-$(printf %010d "$step").elck$"
'

test_expect_success 'a round with another world size resumes the same run' '
    set +e
    timeout 120 "$ELRUN" --standalone --nproc-per-node=2 --no-python \
        "$TRAIN" $ARGS --ckpt-dir "$T/ck4" --fail-at-step 70 \
        >"$T/out4a" 2>"$T/err4a"; st=$?
    set -e
    [[ $st == 1 ]]
    ls "$T/ck4" | contains "ckpt-0000000070.elck"
    timeout 120 "$ELRUN" --standalone --nproc-per-node=3 --no-python \
        "$TRAIN" $ARGS --ckpt-dir "$T/ck4" >"$T/out4" 2>"$T/err4"
    cat "$T/out4"
    grep "resumed from checkpoint step 70 (epoch 2, sample 2944; saved by 2 ranks, now 3;" "$T/err4"
    # The epoch the world changed in says when; the next one has one size.
    grep -q "^epoch 2/3: 47 steps (to step 94), .*, world 2 -> 3 at step 70$" "$T/out4"
    grep -q "^epoch 3/3: 47 steps (to step 141), .*, world 3$" "$T/out4"
    grep -q "^final: .* (141 steps).*world 3$" "$T/out4"
    at_least "$(final_acc "$T/out4")" 75
'

test_expect_success 'without a shared directory the rank holding the checkpoint shares it' '
    # Each rank gets its own directory, and each directory every checkpoint;
    # then only the directory of rank 1 holds the newest.
    set +e
    timeout 120 "$ELRUN" --standalone --nproc-per-node=2 --no-python \
        "$TRAIN" $ARGS --ckpt-dir "$T/ck6/\${local_rank}" --fail-at-step 70 \
        >"$T/out6a" 2>"$T/err6a"; st=$?
    set -e
    [[ $st == 1 ]]
    ls "$T/ck6/1" | contains "ckpt-0000000050.elck" # rank 1 (killed at 70) wrote its own
    rm -r "$T/ck6/1"
    mv "$T/ck6/0" "$T/ck6/1"
    timeout 120 "$ELRUN" --standalone --nproc-per-node=2 --no-python \
        "$TRAIN" $ARGS --ckpt-dir "$T/ck6/\${local_rank}" \
        >"$T/out6" 2>"$T/err6"
    grep "resumed from checkpoint step 70 .*read by rank 1)" "$T/err6"
    [[ $(final_acc "$T/out6") == $(final_acc "$T/out2") ]]
'

test_expect_success 'a corrupt newest checkpoint is skipped with a warning' '
    ELRUN_STANDALONE=1 timeout 120 "$TRAIN" $ARGS --epochs 1 \
        --ckpt-dir "$T/ck5" >"$T/out5a" 2>"$T/err5a"
    newest=$(ls "$T/ck5" | sort | tail -1)
    [[ $newest == ckpt-0000000047.elck ]]
    printf "\xff" | dd of="$T/ck5/$newest" bs=1 seek=1000 conv=notrunc 2>/dev/null
    ELRUN_STANDALONE=1 timeout 120 "$TRAIN" $ARGS --ckpt-dir "$T/ck5" \
        >"$T/out5" 2>"$T/err5"
    grep "skipping checkpoint ckpt-0000000047.elck: payload checksum mismatch" "$T/err5"
    grep "resumed from checkpoint step 25 " "$T/err5"
    grep -q "^final: .*(141 steps)" "$T/out5"
'

# --- every node keeps the newest step it finished (issue #11 items 7, 8) ---

# fm_node I DIR OUT [ARGS...]: node I of a two-node static job on this
# machine (two workers each, checkpoints in DIR), in the background; its pid
# in FM_PID[I], its stdout/stderr in OUT.I / OUT.I.err.
declare -a FM_PID
fm_node() {
    local i=$1 dir=$2 out=$3; shift 3
    "$ELRUN" --nnodes=2 --node-rank=$i --master-addr=127.0.0.1 \
        --master-port=$FM_PORT --nproc-per-node=2 --rdzv-id=fm \
        --rdzv-conf=timeout=60 --no-python "$TRAIN" $ARGS --ckpt-dir "$dir" \
        "$@" >"$out.$i" 2>"$out.$i.err" &
    FM_PID[$i]=$!
}
fm_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

test_expect_success 'two nodes, a directory each: node 0 lost with its directory, the job resumes from node 1, not from step 0' '
    FM_PORT=$(fm_port)
    fm_node 1 "$T/ck7/node1" "$T/out7a" --epochs 1
    fm_node 0 "$T/ck7/node0" "$T/out7a" --epochs 1
    wait ${FM_PID[0]}; wait ${FM_PID[1]}
    # One writer per node: the lowest rank there.
    grep "rank 0 writes checkpoints to $T/ck7/node0 (2 checkpoint directories in the job)" "$T/out7a.0.err"
    grep "rank 2 writes checkpoints to $T/ck7/node1 (2 checkpoint directories in the job)" "$T/out7a.1.err"
    refute grep -q "rank [13] writes checkpoints" "$T/out7a.0.err" "$T/out7a.1.err"
    ls "$T/ck7/node0" "$T/ck7/node1" | grep -c "^ckpt-0000000047.elck$" | contains -x 2
    rm -r "$T/ck7/node0"
    FM_PORT=$(fm_port)
    fm_node 1 "$T/ck7/node1" "$T/out7b"
    fm_node 0 "$T/ck7/node0" "$T/out7b"
    wait ${FM_PID[0]}; wait ${FM_PID[1]}
    cat "$T/out7b.0"
    grep "resumed from checkpoint step 47 (epoch 2, sample 0; saved by 4 ranks, now 4; global batch 128; in 1 of 2 checkpoint directories; read by rank 2)" "$T/out7b.0.err"
    grep -q "^final: .* (141 steps).*world 4$" "$T/out7b.0"
    at_least "$(final_acc "$T/out7b.0")" 75
'

test_expect_success 'SIGTERM to both nodes: all ranks stop after one step and every node saves it; node 0 lost, the job resumes there' '
    FM_PORT=$(fm_port)
    fm_node 1 "$T/ck8/node1" "$T/out8a" --epochs 50 --ckpt-every 100000
    fm_node 0 "$T/ck8/node0" "$T/out8a" --epochs 50 --ckpt-every 100000
    wait_for_line "$T/out8a.0" "^epoch 1/50" 120
    kill -TERM ${FM_PID[0]} ${FM_PID[1]}
    st=0; wait ${FM_PID[0]} || st=$?; wait ${FM_PID[1]} || st=$?
    cat "$T/out8a.0.err" "$T/out8a.1.err" | grep "Terminated"
    # Both writers report the same step, saved in both directories.
    for n in 0 1; do
        w=$((2 * n))
        grep -E "rank $w: Terminated: saved checkpoint step [0-9]+ before exiting \(in 2 checkpoint directories\)" "$T/out8a.$n.err"
    done
    s0=$(sed -n "s/.*rank 0: Terminated: saved checkpoint step \([0-9]*\) .*/\1/p" "$T/out8a.0.err")
    s2=$(sed -n "s/.*rank 2: Terminated: saved checkpoint step \([0-9]*\) .*/\1/p" "$T/out8a.1.err")
    [[ -n $s0 && $s0 == "$s2" ]]
    f=ckpt-$(printf %010d "$s0").elck
    [[ -f $T/ck8/node0/$f && -f $T/ck8/node1/$f ]]
    refute grep -q "is saved already\|not saved" "$T/out8a.0.err" "$T/out8a.1.err"
    rm -r "$T/ck8/node0"
    FM_PORT=$(fm_port)
    fm_node 1 "$T/ck8/node1" "$T/out8b" --epochs 2
    fm_node 0 "$T/ck8/node0" "$T/out8b" --epochs 2
    wait ${FM_PID[0]}; wait ${FM_PID[1]}
    grep "resumed from checkpoint step $s0 .*in 1 of 2 checkpoint directories; read by rank 2)" "$T/out8b.0.err"
    grep -q "^final: .* (94 steps).*world 4$" "$T/out8b.0"
'

test_expect_success 'SIGTERM to node 0 alone: node 1 learns it in the step, stops after the same step and saves it too' '
    FM_PORT=$(fm_port)
    fm_node 1 "$T/ck10/node1" "$T/out10" --epochs 50 --ckpt-every 100000
    fm_node 0 "$T/ck10/node0" "$T/out10" --epochs 50 --ckpt-every 100000
    wait_for_line "$T/out10.0" "^epoch 1/50" 120
    kill -TERM ${FM_PID[0]}
    st=0; wait ${FM_PID[0]} || st=$?; wait ${FM_PID[1]} || st=$?
    grep -E "rank 0: Terminated: saved checkpoint step [0-9]+ before exiting \(in 2 checkpoint directories\)" "$T/out10.0.err"
    s0=$(sed -n "s/.*rank 0: Terminated: saved checkpoint step \([0-9]*\) .*/\1/p" "$T/out10.0.err")
    grep "rank 2: another rank is stopped: saved checkpoint step $s0 before exiting (in 2 checkpoint directories)" "$T/out10.1.err"
    grep "rank 3: another rank was stopped by a signal after step $s0; stopping with it" "$T/out10.1.err"
    f=ckpt-$(printf %010d "$s0").elck
    [[ -f $T/ck10/node0/$f && -f $T/ck10/node1/$f ]]
'

# A disk that is full for real: a 64 KiB tmpfs (needs root; skipped elsewhere).
mkdir -p "$T/full"
if mount -t tmpfs -o size=64k elrun-test "$T/full" 2>/dev/null && umount "$T/full"; then
test_expect_success 'a save that fails with ENOSPC is reported as failed on every rank, never as saved' '
    mount -t tmpfs -o size=64k elrun-test "$T/full"
    trap "umount \"$T/full\"" EXIT
    # (Not refute: it would capture the output that the greps below read.)
    st=0
    timeout 120 "$ELRUN" --standalone --nproc-per-node=2 --no-python \
        "$TRAIN" $ARGS --ckpt-dir "$T/full" >"$T/out9" 2>"$T/err9" || st=$?
    [[ $st == 1 ]]
    cat "$T/err9" | grep "checkpoint step 25"
    msg="checkpoint step 25 is not saved in 1 of 1 checkpoint directories: rank 0 ($T/full): No space left on device; exiting (the previous checkpoints are intact)"
    # Both ranks (two train processes) say it.
    [[ $(grep -F "$msg" "$T/err9" | grep -o "ERROR train\[[0-9]*\]" | sort -u | wc -l) == 2 ]]
    refute grep -q "saved already\|saved checkpoint\|resumed" "$T/err9"
    [[ -z $(ls "$T/full") ]]
'
else
    test_skip 'a save that fails with ENOSPC is reported as failed on every rank' 'cannot mount a tmpfs (not root)'
fi

test_done

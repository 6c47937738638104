#!/bin/sh
# A worker for rendezvous tests whose peers matter, as a training worker's
# collectives do: it records what the agent told it in DIR/w.<round>.<rank>
# (as rdzv_worker.sh), runs until DIR/finish exists, and fails (exit 1)
# once workers of a newer round exist: the others went on without it.
dir=$1
round=$TORCHELASTIC_RESTART_COUNT
f="$dir/w.$round.$RANK"
echo "host=$(hostname) rank=$RANK world=$WORLD_SIZE group=$GROUP_RANK groups=$GROUP_WORLD_SIZE local=$LOCAL_RANK round=$round master=$MASTER_ADDR:$MASTER_PORT" >"$f.tmp"
mv "$f.tmp" "$f"
while [ ! -e "$dir/finish" ]; do
    for g in "$dir"/w.*; do
        r=${g#"$dir"/w.}; r=${r%%.*}
        case $r in *[!0-9]*|'') continue ;; esac
        [ "$r" -gt "$round" ] && exit 1
    done
    sleep 0.05
done

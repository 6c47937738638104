#!/bin/sh
# A worker for rendezvous tests: records what the agent told it in
# DIR/w.<round>.<rank>, then runs until DIR/finish exists.
dir=$1
f="$dir/w.$TORCHELASTIC_RESTART_COUNT.$RANK"
echo "host=$(hostname) rank=$RANK world=$WORLD_SIZE group=$GROUP_RANK groups=$GROUP_WORLD_SIZE local=$LOCAL_RANK round=$TORCHELASTIC_RESTART_COUNT master=$MASTER_ADDR:$MASTER_PORT" >"$f.tmp"
mv "$f.tmp" "$f"
while [ ! -e "$dir/finish" ]; do sleep 0.05; done

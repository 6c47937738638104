#!/usr/bin/env bash
# make demo-elastic: the same Fashion-MNIST training grows and shrinks while
# it runs.  Agents on this machine join one elastic job
#   elrun --nnodes=1:2 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:PORT
# one node at first; a second node joins (the job grows to 2 workers); then
# the second node is killed with SIGKILL (the job shrinks back to 1).  Each
# change starts a new round that resumes from the newest checkpoint, keeping
# the global batch, and training runs to the end.  node-a serves the live
# dashboard (docs/DASHBOARD.md); at the end its timeline is written as an
# SVG file, and a screenshot, to $BUILD/artifacts (with tests/browser's
# chromium driver, when make deps could install it).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ELRUN=$PWD/$BUILD/elrun
TRAIN=$PWD/$BUILD/examples/train_fmnist
D=$(mktemp -d /tmp/elrun-demo-elastic.XXXXXX)
a1= a2=
trap 'kill -KILL $a1 $a2 2>/dev/null; [[ -n ${KEEP:-} ]] || rm -rf "$D"' EXIT
say() { printf '\n\033[1mdemo: %s\033[0m\n' "$*"; }
port=$(/usr/bin/python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
agent() { # NAME [FLAGS]: one node of the job, its output in $D/NAME.*
    local name=$1; shift
    "$ELRUN" "$@" --nnodes=1:2 --nproc-per-node=1 --rdzv-backend=c10d \
        --rdzv-endpoint="127.0.0.1:$port" --rdzv-id=elastic-demo \
        --rdzv-conf=last_call_timeout=1 --max-restarts=3 --local-addr="$name" \
        --no-python "$TRAIN" --epochs 6 --ckpt-dir "$D/ckpt-$name" --ckpt-every 100 \
        >"$D/$name.out" 2>"$D/$name.err" &
}
# wait_line FILE REGEX: until a line of FILE matches (the job gives up in 120 s)
wait_line() {
    local deadline=$((SECONDS + 120))
    until grep -qE "$2" "$1" 2>/dev/null; do
        ((SECONDS < deadline)) || { say "timed out waiting for /$2/ in $1"; exit 1; }
        sleep 0.05
    done
}

say "node-a starts the job alone (--nnodes=1:2)"
agent node-a --dashboard-addr=127.0.0.1:0; a1=$!
wait_line "$D/node-a.err" " dashboard at http://"
dash=$(sed -n 's|.* dashboard at \(http://[^ ]*\)$|\1|p' "$D/node-a.err" | head -1)
say "the live dashboard of node-a: $dash (open it while the job runs)"
# A few checkpoints into the run:
deadline=$((SECONDS + 120))
until ls "$D/ckpt-node-a" 2>/dev/null | grep -q 'ckpt-0000000300'; do
    ((SECONDS < deadline)) || { say "node-a made no progress"; tail "$D/node-a.err"; exit 1; }
    sleep 0.05
done
say "node-b joins: the job grows to 2 workers"
agent node-b; a2=$!
wait_line "$D/node-a.err" "round [0-9]+: 2 nodes"
grep -hE "round [0-9]+: 2 nodes" "$D/node-a.err" | tail -1 | sed 's/^/  /'
wait_line "$D/node-a.err" "resumed from checkpoint.*now 2"
grep -h "resumed from checkpoint" "$D/node-a.err" | tail -1 | sed 's/^/  /'
wait_line "$D/node-a.out" "^epoch [3-9]/6"
say "node-b is killed with SIGKILL: the job shrinks to 1 worker"
kill -KILL $a2; wait $a2 2>/dev/null; a2=
wait_line "$D/node-a.err" "round [0-9]+: 1 nodes \(joined: -; left: node-b\)"
grep -hE "left: node-b" "$D/node-a.err" | tail -1 | sed 's/^/  /'
# The page as it is now (1 -> 2 -> 1 nodes), while node-a still serves it.
art=$PWD/$BUILD/artifacts
mkdir -p "$art"
svg=
if command -v chromium >/dev/null && [[ -d tests/browser/node_modules/playwright-core ]] &&
    node tests/browser/dashboard.js "$dash" "$D/page.json" "$art/demo-elastic.png" \
        "document.querySelectorAll('#timeline circle.point').length >= 3" \
        "$art/demo-elastic-timeline.svg" 2>"$D/browser.err"; then
    svg=$art/demo-elastic-timeline.svg
else
    say "no timeline SVG: $(cat "$D/browser.err" 2>/dev/null || echo "chromium or tests/browser's playwright-core missing (make deps)")"
fi
wait $a1; rc=$?; a1=
say "training output of node-a (epochs run at whatever world size the job had)"
cat "$D/node-a.out"
grep -hE "round [0-9]+: |resumed from checkpoint" "$D/node-a.err" | sed 's/^/  node-a: /'
[[ $rc -eq 0 ]] || { say "node-a failed (exit $rc)"; tail -20 "$D/node-a.err"; exit 1; }
acc=$(sed -n 's/^final: test accuracy \([0-9.]*\)%.*/\1/p' "$D/node-a.out" | tail -1)
say "the job grew from 1 to 2 nodes and shrank back to 1; final test accuracy $acc%"
say "the dashboard was at $dash (node-a's, gone with it)${svg:+; its timeline: $svg, the page: $art/demo-elastic.png}"

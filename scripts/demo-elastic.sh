#!/usr/bin/env bash
# make demo-elastic: the same Fashion-MNIST training grows and shrinks while
# it runs.  Agents on this machine join one elastic job
#   elrun --nnodes=1:2 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:PORT
# one node at first; a second node joins (the job grows to 2 workers); then
# the second node is killed with SIGKILL (the job shrinks back to 1).  Each
# change starts a new round that resumes from the newest checkpoint, keeping
# the global batch, and training runs to the end.  The training output and
# the agents' round lines stream as they come; the demo ends with a summary
# (each change of world size with its time, how long training took to run
# again, the steps redone, the final accuracy against a run without
# changes) and writes the timeline of the world size as an SVG file.
#
# Knobs (environment), for a shorter run (tests/e2e/t0110 uses them):
#   DEMO_EPOCHS [6]  DEMO_CKPT_EVERY [100]  DEMO_GROW_AT [300]: node-b joins
#   once the checkpoint of this step exists; node-b is killed at the first
#   epoch line after the job ran with 2 workers.  DEMO_TRAIN_ARGS: more
#   options for train_fmnist (--subset N ...), for both runs.
#   DEMO_SVG [$BUILD/demo-elastic.svg]: where the timeline goes.
#   DEMO_REFERENCE=0 skips the run without changes.  KEEP=1 keeps the logs.
#   node-a serves the live dashboard (docs/DASHBOARD.md); at the end a
#   screenshot of its page goes to $BUILD/artifacts (with tests/browser's
#   chromium driver, when make deps could install it).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ELRUN=$PWD/$BUILD/elrun
TRAIN=$PWD/$BUILD/examples/train_fmnist
EPOCHS=${DEMO_EPOCHS:-6}
CKPT_EVERY=${DEMO_CKPT_EVERY:-100}
GROW_AT=${DEMO_GROW_AT:-300}
SVG=${DEMO_SVG:-$PWD/$BUILD/demo-elastic.svg}
read -ra TRAIN_ARGS <<<"${DEMO_TRAIN_ARGS:-}"
D=$(mktemp -d /tmp/elrun-demo-elastic.XXXXXX)
a1= a2= streams=()
trap 'kill -KILL $a1 $a2 2>/dev/null; kill ${streams[*]} 2>/dev/null; [[ -n ${KEEP:-} ]] && echo "demo: logs kept in $D" || rm -rf "$D"' EXIT
say() { printf '\n\033[1mdemo: %s\033[0m\n' "$*"; }
# now: seconds of the UTC day, as the timestamps of the log lines read.
now() { date -u +%H:%M:%S.%N | awk -F: '{ printf "%.3f\n", $1 * 3600 + $2 * 60 + $3 }'; }
port=$(/usr/bin/python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
agent() { # NAME [FLAGS]: one node of the job, its output in $D/NAME.*
    local name=$1; shift
    "$ELRUN" "$@" --nnodes=1:2 --nproc-per-node=1 --rdzv-backend=c10d \
        --rdzv-endpoint="127.0.0.1:$port" --rdzv-id=elastic-demo \
        --rdzv-conf=last_call_timeout=1 --max-restarts=3 --local-addr="$name" \
        --no-python "$TRAIN" --epochs "$EPOCHS" --ckpt-dir "$D/ckpt-$name" \
        --ckpt-every "$CKPT_EVERY" "${TRAIN_ARGS[@]}" >"$D/$name.out" 2>"$D/$name.err" &
}
# stream NAME PID: show NAME's training output (epoch lines, progress) and
# its agent's round lines live, as they are written, until PID (its agent)
# has ended and the last lines are out.
stream() {
    touch "$D/$1.out" "$D/$1.err"
    tail -n +1 -F --pid="$2" "$D/$1.out" 2>/dev/null > >(sed -u "s/^/  $1 | /") &
    streams+=($!)
    tail -n +1 -F --pid="$2" "$D/$1.err" 2>/dev/null > >(grep --line-buffered -E \
        "^epoch |round [0-9]+: [0-9]+ nodes|; re-forming|resumed from checkpoint|before exiting|saved already|ERROR" |
        sed -u -E "s/^[0-9T:.-]+Z [A-Z]+ [a-z_]+\[[0-9]+\] //; s/^/  $1 ! /") &
    streams+=($!)
}
# wait_line FILE REGEX: until a line of FILE matches (the job gives up in 120 s)
wait_line() {
    local deadline=$((SECONDS + 120))
    until grep -qE "$2" "$1" 2>/dev/null; do
        ((SECONDS < deadline)) || { say "timed out waiting for /$2/ in $1"; exit 1; }
        kill -0 $a1 2>/dev/null || { say "node-a ended before /$2/ appeared in $1 (more epochs: DEMO_EPOCHS)"; exit 1; }
        sleep 0.05
    done
}
final_acc() { sed -n 's/^final: test accuracy \([0-9.]*\)%.*/\1/p' "$1" | tail -1; }

say "node-a starts the job alone (--nnodes=1:2); its output follows as it comes"
t_start=$(now)
agent node-a --dashboard-addr=127.0.0.1:0; a1=$!
stream node-a $a1
wait_line "$D/node-a.err" " dashboard at http://"
dash=$(sed -n 's|.* dashboard at \(http://[^ ]*\)$|\1|p' "$D/node-a.err" | head -1)
say "the live dashboard of node-a: $dash (open it while the job runs)"
# A few checkpoints into the run:
deadline=$((SECONDS + 120))
until ls "$D/ckpt-node-a" 2>/dev/null | grep -q "ckpt-$(printf %010d "$GROW_AT")"; do
    ((SECONDS < deadline)) || { say "node-a made no progress"; tail "$D/node-a.err"; exit 1; }
    kill -0 $a1 2>/dev/null || { say "node-a ended before step $GROW_AT"; tail "$D/node-a.err"; exit 1; }
    sleep 0.05
done
say "node-b joins: the job grows to 2 workers"
t_grow=$(now)
agent node-b; a2=$!
stream node-b $a2
wait_line "$D/node-a.err" "resumed from checkpoint.*now 2"
epochs_then=$(grep -c "^epoch [0-9]*/" "$D/node-a.out")
until (($(grep -c "^epoch [0-9]*/" "$D/node-a.out") > epochs_then)); do
    kill -0 $a1 2>/dev/null || { say "node-a ended with 2 workers (more epochs: DEMO_EPOCHS)"; exit 1; }
    sleep 0.05
done
say "node-b is killed with SIGKILL: the job shrinks to 1 worker"
t_kill=$(now)
kill -KILL $a2; wait $a2 2>/dev/null; a2=
wait_line "$D/node-a.err" "round [0-9]+: 1 nodes \(joined: -; left: node-b/[0-9a-f]{4}\)"
# The page as it is now (1 -> 2 -> 1 nodes), while node-a still serves it.
art=$PWD/$BUILD/artifacts
mkdir -p "$art"
png=
if command -v chromium >/dev/null && [[ -d tests/browser/node_modules/playwright-core ]] &&
    node tests/browser/dashboard.js "$dash" "$D/page.json" "$art/demo-elastic.png" \
        "document.querySelectorAll('#timeline circle.point').length >= 3" \
        "$art/demo-elastic-page-timeline.svg" 2>"$D/browser.err"; then
    png=$art/demo-elastic.png
else
    say "no screenshot of the page: $(cat "$D/browser.err" 2>/dev/null || echo "chromium or tests/browser's playwright-core missing (make deps)")"
fi
wait $a1; rc=$?; a1=
t_end=$(now)
wait "${streams[@]}" 2>/dev/null; streams=() # their agents ended: the last lines
[[ $rc -eq 0 ]] || { say "node-a failed (exit $rc)"; tail -20 "$D/node-a.err"; exit 1; }
acc=$(final_acc "$D/node-a.out")

ref=
if [[ ${DEMO_REFERENCE:-1} != 0 ]]; then
    say "reference: the same training on 1 worker without changes"
    "$ELRUN" --standalone --nproc-per-node=1 --no-python "$TRAIN" --epochs "$EPOCHS" \
        --ckpt-dir "$D/ckpt-ref" --ckpt-every "$CKPT_EVERY" "${TRAIN_ARGS[@]}" \
        >"$D/ref.out" 2>"$D/ref.err" || { tail "$D/ref.err"; say "the reference run failed"; exit 1; }
    tail -n 1 "$D/ref.out" | sed 's/^/  ref | /'
    ref=$(final_acc "$D/ref.out")
fi

# The summary and the SVG, from node-a's log (the node that stayed): its
# rounds (world size, when), the step each new round resumed from and the
# last step the round before took ("saved checkpoint step N before exiting",
# else its last progress line).
say "summary"
awk -v t0="$t_start" -v tg="$t_grow" -v tk="$t_kill" -v tend="$t_end" \
    -v acc="$acc" -v ref="$ref" -v svg="$SVG" -v tsv="$D/timeline.tsv" '
function sec(ts,   h) { h = substr(ts, 12, 12); split(h, p, ":")
    s = p[1] * 3600 + p[2] * 60 + p[3]; return s < t0 - 43200 ? s + 86400 : s }
function rel(s) { return s - t0 }
/ round [0-9]+: [0-9]+ nodes \(joined/ {
    match($0, /round [0-9]+: [0-9]+ nodes/); split(substr($0, RSTART, RLENGTH), w, " ")
    n = w[3] + 0
    if (nr == 0 || n != world[nr]) { nr++; world[nr] = n; at[nr] = sec($1) }
    next }
/^epoch [0-9]+\/[0-9]+ \[.*step [0-9]+/ {
    if (match($0, /step [0-9]+/)) last = substr($0, RSTART + 5, RLENGTH - 5) + 0
    next }
/saved checkpoint step [0-9]+ before exiting|checkpoint step [0-9]+ is saved already/ {
    match($0, /checkpoint step [0-9]+/); last = substr($0, RSTART + 16, RLENGTH - 16) + 0
    exact = 1; next }
/resumed from checkpoint step [0-9]+/ {
    match($0, /checkpoint step [0-9]+/); st = substr($0, RSTART + 16, RLENGTH - 16) + 0
    if (nr > 1 && !(nr in back)) {
        back[nr] = sec($1); from[nr] = st
        redo[nr] = last > st ? last - st : 0; known[nr] = exact
    }
    exact = 0; next }
END {
    if (nr == 0) { print "  (no round in the log)"; exit 1 }
    printf "  %6.1f s  world %d: node-a starts the job\n", rel(at[1]), world[1]
    for (i = 2; i <= nr; i++) {
        trig = world[i] > world[i - 1] ? tg : tk
        what = world[i] > world[i - 1] ? "node-b joined" : "node-b killed"
        line = sprintf("  %6.1f s  world %d -> %d: %s at %.1f s", rel(at[i]),
                       world[i - 1], world[i], what, rel(trig))
        if (i in back)
            line = line sprintf("; training again %.1f s later, from step %d, %d step%s redone%s",
                                back[i] - trig, from[i], redo[i], redo[i] == 1 ? "" : "s",
                                known[i] ? "" : " (at least)")
        else
            line = line "; no checkpoint to resume from: started over"
        print line
    }
    printf "  %6.1f s  done\n", rel(tend)
    if (ref != "")
        printf "  final test accuracy %s%% with the changes, %s%% without (1 worker throughout): %+.2f points\n",
               acc, ref, acc - ref
    else
        printf "  final test accuracy %s%% with the changes\n", acc
    # The timeline: world size over time, a step line.
    for (i = 1; i <= nr; i++) printf "%.3f\t%d\n", rel(at[i]), world[i] > tsv
    W = 640; H = 240; L = 50; R = 20; T = 30; B = 40; span = rel(tend); if (span <= 0) span = 1
    maxw = 0; for (i = 1; i <= nr; i++) if (world[i] > maxw) maxw = world[i]
    xs = (W - L - R) / span; ys = (H - T - B) / (maxw + 1)
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H > svg
    printf "<title>elrun demo-elastic: world size over time</title>\n" > svg
    printf "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n" > svg
    printf "<text x=\"%d\" y=\"18\" font-size=\"14\">world size of the job over time (make demo-elastic)</text>\n", L > svg
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, H - B, W - R, H - B > svg
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, T, L, H - B > svg
    for (k = 0; k <= maxw + 1; k++)
        printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%d</text>\n", L - 6, H - B - k * ys + 4, k > svg
    step = span > 50 ? 10 : span > 20 ? 5 : span > 8 ? 2 : 1
    for (x = 0; x <= span; x += step)
        printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d s</text>\n", L + x * xs, H - B + 16, x > svg
    pts = ""
    for (i = 1; i <= nr; i++) {
        x = L + rel(at[i]) * xs
        if (i > 1) pts = pts sprintf(" %.1f,%.1f", x, H - B - world[i - 1] * ys)
        pts = pts sprintf(" %.1f,%.1f", x, H - B - world[i] * ys)
    }
    pts = pts sprintf(" %.1f,%.1f", L + span * xs, H - B - world[nr] * ys)
    printf "<polyline points=\"%s\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"3\"/>\n", pts > svg
    for (i = 2; i <= nr; i++) {
        x = L + rel(at[i]) * xs
        printf "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" fill=\"#d62728\">%d &#8594; %d at %.1f s%s</text>\n",
               (x > W * 0.55 ? x - 4 : x + 4),
               H - B - (maxw + 0.6) * ys + (i % 2) * 14, (x > W * 0.55 ? "end" : "start"),
               world[i - 1], world[i], rel(at[i]),
               (i in back) ? sprintf(", running %.1f s later", back[i] - (world[i] > world[i - 1] ? tg : tk)) : "" > svg
    }
    printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">time since node-a started</text>\n", L + (W - L - R) / 2, H - 6 > svg
    printf "</svg>\n" > svg
}' "$D/node-a.err" || { say "no summary from node-a's log (above: why)"; exit 1; }
echo "  the timeline of the world size: $SVG"
say "the job grew from 1 to 2 nodes and shrank back to 1; final test accuracy $acc%"
say "the dashboard was at $dash (node-a's, gone with it)${png:+; a screenshot of its page: $png}"

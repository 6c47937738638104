#!/usr/bin/env bash
# store_limits.sh -- the store's limits of issue #11, before (the starting
# point's build: BASE, default /work/base/build) and after (this tree's
# BUILD, default build), in one run, the two taking turns:
#
#   1. unread replies: 20 clients each send GETS (130) GETs of a VALUE (512
#      KiB) value (65 MiB of replies, just under the per-connection cap the
#      starting point enforced) and never read, while one well-behaved
#      client does SET + GET round trips for SECS seconds: the store's peak
#      RSS (VmHWM) and the good client's median / p99 / slowest round trip.
#      REPS repetitions, medians.
#   2. descriptor lockout: the store under `ulimit -n 1024` with 1,013
#      silent connections held open, then 20 new clients one after another:
#      how many are served.
#   3. the secret's cost (after only): connect vs connect + authenticate
#      (medians of 500), and an idle `elrun store`'s RSS before and after
#      (Nettle is linked for the HMAC).
#
# Run from anywhere:  bench/store_limits.sh      (about 2 minutes)
# Knobs: REPS (3), SECS (5), VALUE, GETS, BASE, BUILD.  Loopback only; every process it
# starts is killed on exit.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BASE=${BASE:-/work/base/build}
BUILD=${BUILD:-build}
REPS=${REPS:-3}
SECS=${SECS:-5}
VALUE=${VALUE:-524288}
GETS=${GETS:-130}
PROBE="$ROOT/$BUILD/bench/store_limits"
TMP=$(mktemp -d /tmp/storelimits.XXXXXX)
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    sleep 0.2
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { printf '%s  %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

make -s -C "$ROOT" BUILD="$BUILD" "$BUILD/elrun" "$BUILD/bench/store_limits" >/dev/null || exit 1
[[ -x $BASE/elrun ]] || { echo "store_limits.sh: no $BASE/elrun (set BASE)" >&2; exit 1; }
# Copies with a name of their own: a concurrent `pkill elrun` elsewhere on a
# shared machine must not end a measurement.
cp "$BASE/elrun" "$TMP/kv_before"
cp "$ROOT/$BUILD/elrun" "$TMP/kv_after"

# store WHICH [ulimit] -> sets SPID, SPORT
store() {
    local bin=$TMP/kv_$1 lim=${2:-}
    rm -f "$TMP/s.out"
    if [[ -n $lim ]]; then
        ( ulimit -n "$lim"; exec "$bin" store --listen 127.0.0.1:0 ) >"$TMP/s.out" 2>"$TMP/s.err" &
    else
        "$bin" store --listen 127.0.0.1:0 >"$TMP/s.out" 2>"$TMP/s.err" &
    fi
    SPID=$!
    PIDS+=("$SPID")
    for _ in $(seq 500); do grep -q '^listening' "$TMP/s.out" 2>/dev/null && break; sleep 0.01; done
    SPORT=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$TMP/s.out")
}
stop() { kill "$@" 2>/dev/null; wait "$@" 2>/dev/null; }
hwm() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# --- 1. unread replies ------------------------------------------------------
for rep in $(seq "$REPS"); do
    for w in before after; do
        store "$w"
        "$PROBE" put "127.0.0.1:$SPORT" /big "$VALUE"
        # The good client runs from before the flood until after it.
        "$PROBE" good "127.0.0.1:$SPORT" "$SECS" >"$TMP/good.out" &
        gp=$!
        sleep 1
        "$PROBE" flood "127.0.0.1:$SPORT" 20 "$GETS" /big >"$TMP/flood.out" &
        fp=$!
        PIDS+=("$fp")
        wait "$gp"
        h=$(hwm "$SPID")
        read -r n med p99 mx < <(sed -E 's/^good: ([0-9]+) round trips.*median ([0-9.]+) ms, p99 ([0-9.]+) ms, max ([0-9.]+) ms/\1 \2 \3 \4/' "$TMP/good.out")
        echo "$h" >>"$TMP/1.$w.hwm"; echo "$n" >>"$TMP/1.$w.n"; echo "$med" >>"$TMP/1.$w.med"
        echo "$p99" >>"$TMP/1.$w.p99"; echo "$mx" >>"$TMP/1.$w.max"
        log "unread replies, $w, rep $rep: peak RSS $((h / 1024)) MiB; $(cat "$TMP/good.out")"
        stop "$fp" "$SPID"
    done
done

# --- 2. descriptor lockout ----------------------------------------------------
for w in before after; do
    store "$w" 1024
    "$PROBE" hold "127.0.0.1:$SPORT" 1013 >"$TMP/hold.out" &
    hp=$!
    PIDS+=("$hp")
    for _ in $(seq 1000); do grep -q '^ready' "$TMP/hold.out" && break; sleep 0.01; done
    "$PROBE" probe "127.0.0.1:$SPORT" 20 >"$TMP/2.$w"
    log "fd lockout, $w: $(cat "$TMP/hold.out"); $(cat "$TMP/2.$w")"
    stop "$hp" "$SPID"
done

# --- 3. the secret's cost ---------------------------------------------------------
head -c 32 /dev/urandom | base64 >"$TMP/secret"; chmod 600 "$TMP/secret"
"$TMP/kv_after" store --listen 127.0.0.1:0 --secret-file "$TMP/secret" >"$TMP/s.out" 2>"$TMP/s.err" &
SPID=$!; PIDS+=("$SPID")
for _ in $(seq 500); do grep -q '^listening' "$TMP/s.out" 2>/dev/null && break; sleep 0.01; done
SPORT=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$TMP/s.out")
"$PROBE" auth "127.0.0.1:$SPORT" 500 "$TMP/secret" >"$TMP/3.auth"
stop "$SPID"
for w in before after; do
    store "$w"; sleep 0.3; echo "$(rss "$SPID")" >"$TMP/3.$w.rss"; stop "$SPID"
done

# --- table ------------------------------------------------------------------------
m() { median <"$TMP/$1"; }
printf '\n| figure | before | after |\n|---|---|---|\n'
printf '| 20 non-reading clients x %s GETs of %s KiB: store peak RSS | %s MiB | %s MiB |\n' "$GETS" $((VALUE / 1024)) \
    $(( $(m 1.before.hwm) / 1024 )) $(( $(m 1.after.hwm) / 1024 ))
printf '| good client meanwhile: round trips in %s s | %s | %s |\n' "$SECS" "$(m 1.before.n)" "$(m 1.after.n)"
printf '| good client: median / p99 / slowest round trip (ms) | %s / %s / %s | %s / %s / %s |\n' \
    "$(m 1.before.med)" "$(m 1.before.p99)" "$(m 1.before.max)" "$(m 1.after.med)" "$(m 1.after.p99)" "$(m 1.after.max)"
printf '| 1,013 held-open connections at ulimit -n 1024: new clients served | %s | %s |\n' \
    "$(sed 's/probe: //; s/ new clients served//' "$TMP/2.before")" "$(sed 's/probe: //; s/ new clients served//' "$TMP/2.after")"
printf '| idle elrun store RSS | %s KiB | %s KiB |\n' "$(cat "$TMP/3.before.rss")" "$(cat "$TMP/3.after.rss")"
printf '| %s | – | %s |\n' "connect / connect + authenticate (median of 500)" "$(sed 's/auth: //' "$TMP/3.auth")"
echo "(medians of $REPS; $(nproc) CPUs, $(date -u +%F))"

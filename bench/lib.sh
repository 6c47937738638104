# lib.sh -- helpers the bench scripts source (bench/metrics.sh,
# bench/dashboard.sh, bench/events.sh).
#
#   agent_table    the agent CPU / peak RSS table by mode (below)
#   stats          numbers on stdin, one a line -> "median (min-max)"
#   cpu_ms PID     CPU time of all the process' threads in ms (schedstat)
#   hwm_kib PID    its peak RSS (VmHWM) in KiB
stats() {
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "nan nan nan"; exit }
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.4g (%.4g-%.4g)\n", m, v[1], v[NR] }'
}
cpu_ms() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { print s / 1e6 }'; }
hwm_kib() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status"; }

# agent_table MODE...: for each mode, RUNS runs of the sourcing script's
# `one_agent BIN MODE` (which prints "cpu_ms hwm_kib") and two RESULT lines
# named ${NAME[MODE]}.  Mode base runs $BASE/elrun as mode off (skipped
# without a base build).  Uses ELRUN, BASE, RUNS, WINDOW, W.
agent_table() {
    local mode bin m
    for mode in "$@"; do
        bin=$ELRUN m=$mode
        if [[ $mode == base ]]; then
            [[ -x $BASE/elrun ]] || continue
            bin=$BASE/elrun m=off
        fi
        : >"$W/res"
        for _ in $(seq "$RUNS"); do one_agent "$bin" "$m" >>"$W/res"; done
        echo "RESULT agent cpu_ms/${WINDOW}s ${NAME[$mode]}: $(cut -d' ' -f1 "$W/res" | stats)"
        echo "RESULT agent peak_rss_kib ${NAME[$mode]}: $(cut -d' ' -f2 "$W/res" | stats)"
    done
}

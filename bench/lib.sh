# lib.sh -- helpers the bench scripts source (bench/metrics.sh,
# bench/dashboard.sh).
#
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

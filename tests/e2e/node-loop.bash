# node-loop.bash -- a job's node as a scheduler runs it, for the e2e scripts
# whose agents must come back after any exit (t0955's soak, t0970's frozen
# node); sourced after lib.sh.
#
# node_loop DONE PIDFILE LOG CMD...: run CMD in the background, and again after
# every exit, until one launch exits 0 (then DONE is touched) or DONE exists.
# Each launch's output is appended to the file named by printf LOG N (N = the
# launch, from 1: "a1.%d.log" gives each launch a log, "a1.log" one log for
# all); "PID LOGFILE" of the running launch goes to PIDFILE.  The loop's pid
# is tracked (cleaned up with the script) and left in NODE_LOOP_PID.
node_loop() {
    local done=$1 pidfile=$2 log=$3
    shift 3
    (
        n=0
        while [[ ! -f $done ]]; do
            n=$((n + 1))
            # shellcheck disable=SC2059 # LOG is the format
            f=$(printf "$log" "$n")
            "$@" >>"$f" 2>&1 &
            echo "$! $f" >"$pidfile"
            st=0
            wait $! || st=$?
            if ((st == 0)); then touch "$done"; fi
        done
    ) &
    track_pid $!
    NODE_LOOP_PID=$!
}

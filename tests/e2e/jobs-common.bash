# jobs-common.bash -- what the job tests (t0800, t0810, t0811) share; sourced
# after lib.sh.

# job_procs DIR: the live processes of the job in DIR.  Every agent and
# worker of a job carries ELRUN_JOB_DIR=DIR in its environment.
job_procs() {
    local dir=$1 f p
    for f in $(grep -lzxF "ELRUN_JOB_DIR=$dir" /proc/[0-9]*/environ 2>/dev/null); do
        p=${f#/proc/}; p=${p%/environ}
        [[ $(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) == [ZX] ]] || echo "$p"
    done
    return 0
}

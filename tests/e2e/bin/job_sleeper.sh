#!/bin/bash
# A job's worker (t0800, t0810, bench/jobs.sh): says it is up, then runs
# until its agent stops it.
echo "worker $RANK of $WORLD_SIZE up${SLURMD_NODENAME:+ on $SLURMD_NODENAME}"
exec sleep 600

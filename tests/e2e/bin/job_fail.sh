#!/bin/bash
# A job's worker that fails: rank 1 exits 3, the others wait to be stopped.
echo "worker $RANK starting"
if [[ $RANK == 1 ]]; then echo "rank 1 gives up" >&2; exit 3; fi
exec sleep 600

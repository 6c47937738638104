#!/usr/bin/env bash
# make bench: every benchmark, one after the other, each printing medians
# and, where an anchor is installed (PyTorch's TCPStore server, torchrun,
# gloo, dd, PyTorch DDP), the ratio side by side.  BENCHMARKS.md records the
# figures.  Takes about 30 minutes on 2 cores; run one script alone for less:
#   bench/store.sh      store throughput, connection storm, memory per connection
#   bench/agent_launch.sh   launch, worker start, recovery, agent RSS vs torchrun
#   bench/rdzv.sh       elastic rendezvous of N agents, SIGKILL recovery, scale-up
#   bench/allreduce.sh  allreduce bus bandwidth and latency vs gloo
#   bench/ckpt.sh       checkpoint save vs dd conv=fsync
#   bench/train.sh      Fashion-MNIST training throughput vs PyTorch DDP
#   bench/jobs.sh       elrun submit/status/logs latency, local and Slurm (vs sbatch)
set -uo pipefail
cd "$(dirname "$0")/.."
rc=0
for b in store agent_launch rdzv allreduce ckpt train jobs; do
    echo "======== bench/$b.sh"
    bash "bench/$b.sh" || { echo "bench/$b.sh failed"; rc=1; }
    echo
done
exit $rc

"""agent_raiser.py -- a worker decorated with PyTorch's @record: rank 1
raises, the others sleep until they are stopped.  Used to compare elrun's
failure table with torchrun's."""
import os
import time

from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    rank = int(os.environ["RANK"])
    if rank == 1:
        raise RuntimeError(f"boom from rank {rank}")
    time.sleep(60)


main()

"""One rank of the torchrun test (test_torchrun.py): reports its default
device, the window starts it drew (in batch order) and where its rank came
from, gathered on rank 0 into a JSON file.

    torchrun --standalone --nproc_per_node=2 torchrun_worker.py OUT.json CONFIG.toml
"""
import json
import sys

import numpy
import torch.distributed as dist

import backplane


def main():
    out, config = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    # As a user runs it: the plugins next to the library, the environment
    # read (torchrun sets LOCAL_RANK, RANK and WORLD_SIZE).
    runtime = backplane.Runtime(config_file=config)
    chosen = runtime.default_device()
    tokens = runtime.array(numpy.arange(100_000, dtype=numpy.uint16), device="cpu:0")
    # rank and world_size left out: torch.distributed's, as rank_source says.
    stream = backplane.batches(tokens, 8, 32, device=chosen.device, seed=11, steps=5)
    starts = [[int(row[0]) for row in x] for x, _ in stream]
    report = {"rank": dist.get_rank(), "device": str(chosen.device), "source": chosen.source, "starts": starts,
              "rank_source": stream.rank_source}
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, report)
    if dist.get_rank() == 0:
        with open(out, "w", encoding="utf-8") as file:
            json.dump(gathered, file)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""One process of the jax.distributed test (test_jax_ranks.py): joins a
two-process job, draws three steps with rank and world_size left out, and
writes what it drew and where its rank came from as JSON.

    python3 jax_ranks_worker.py COORDINATOR PROCESS_ID OUT.json
"""
import json
import os
import sys

import jax
import numpy

import backplane
from support import isolated_runtime


def main():
    coordinator, process_id, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=2, process_id=process_id)
    runtime = isolated_runtime()
    tokens = runtime.array(numpy.arange(100_000, dtype=numpy.uint16), device="cpu:0")
    stream = backplane.batches(tokens, 4, 16, device="cpu:0", seed=11, steps=3, runtime=runtime)
    report = {"rank_source": stream.rank_source,
              "x": [x.tolist() for x, _ in stream],
              # JAX's public answer, asked after the stream (it starts a backend).
              "process_index": jax.process_index(), "process_count": jax.process_count()}
    # A launcher that set RANK to the other process's rank: refused, naming both.
    os.environ["RANK"] = str(1 - process_id)
    try:
        backplane.batches(tokens, 4, 16, device="cpu:0", steps=1, runtime=runtime)
        report["contradiction"] = None
    except backplane.InvalidArgumentError as error:
        report["contradiction"] = str(error)
    with open(out, "w", encoding="utf-8") as file:
        json.dump(report, file)
    runtime.close()
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()

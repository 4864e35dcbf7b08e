"""One rank of the torchrun layouts test (test_torchrun_layouts.py): with
rank left out of backplane.Layout (torch.distributed's), draws a few steps
of three layouts over four ranks, tries a mesh that does not cover the
process group, and writes all of it to OUT_DIR/rank<RANK>.json.

    torchrun --standalone --nproc_per_node=4 torchrun_layouts_worker.py OUT_DIR SPEC

SPEC is JSON: tokens (the arange's length), batch_size (per batch
coordinate), context, seed, steps and layouts (name: Layout's arguments
less rank), as the test draws its reference from them.
"""
import json
import os
import sys

import numpy
import torch.distributed as dist

import backplane
from support import isolated_runtime


def main():
    out_dir, spec = sys.argv[1], json.loads(sys.argv[2])
    batch_size, context, seed = spec["batch_size"], spec["context"], spec["seed"]
    dist.init_process_group("gloo")
    runtime = isolated_runtime()
    tokens = runtime.array(numpy.arange(spec["tokens"], dtype=numpy.uint16), device="cpu:0")
    report = {"rank": dist.get_rank(), "world_size": dist.get_world_size(), "layouts": {}}
    for name, arguments in spec["layouts"].items():
        stream = backplane.batches(tokens, batch_size, context, layout=backplane.Layout(**arguments), device="cpu:0",
                                   seed=seed, steps=spec["steps"], runtime=runtime)
        drawn = {"rank_source": stream.rank_source, "x": [], "y": []}
        for x, y in stream:
            drawn["x"].append(numpy.asarray(x).tolist())
            drawn["y"].append(numpy.asarray(y).tolist())
        report["layouts"][name] = drawn
    # A mesh of two ranks in a process group of four: refused, naming both.
    try:
        backplane.batches(tokens, batch_size, context, layout=backplane.Layout(mesh={"dp": 2}, batch="dp"),
                          device="cpu:0", seed=seed, steps=1, runtime=runtime)
        report["mismatch"] = None
    except backplane.InvalidArgumentError as error:
        report["mismatch"] = str(error)
    runtime.close()
    # Each rank its own file, so that the test can name a rank that did not finish.
    with open(os.path.join(out_dir, f"rank{dist.get_rank()}.json"), "w", encoding="utf-8") as file:
        json.dump(report, file)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

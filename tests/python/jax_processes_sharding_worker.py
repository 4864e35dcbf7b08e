"""One process of the jax.distributed sharding test
(test_jax_processes_sharding.py): joins a two-process job of two CPU
devices each, lays a ("data", "seq") mesh over all four devices, and for
each partition spec draws a few steps of global x and y with
batches(sharding=...). It writes, as JSON, its addressable shards (device,
index, data) and a jitted weighted sum over the whole global array, which
runs across both processes.

    XLA_FLAGS=--xla_force_host_platform_device_count=2 JAX_PLATFORMS=cpu \\
        python3 jax_processes_sharding_worker.py COORDINATOR PROCESS_ID OUT.json SPEC

SPEC is JSON: tokens (the arange's length), batch_size (global), context,
seed, steps, weights (a [batch_size, context] list of small ints) and
specs (name: the partition spec's entries).
"""
import json
import sys

import jax
import jax.numpy as jnp
import numpy
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import backplane
from support import isolated_runtime


def entries(spec):
    """JSON's lists back as the partition spec's tuples of axis names."""
    return [tuple(entry) if isinstance(entry, list) else entry for entry in spec]


def shards(array):
    """This process's shards of a global array: device, place, data."""
    return [{"device": shard.device.id, "process": shard.device.process_index,
             "index": [list(part.indices(size)[:2]) for part, size in zip(shard.index, array.shape)],
             "data": numpy.asarray(shard.data).tolist()} for shard in array.addressable_shards]


def main():
    coordinator, process_id, out, spec = sys.argv[1], int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=2, process_id=process_id)
    devices = jax.devices()
    mesh = Mesh(numpy.array(devices).reshape(2, 2), ("data", "seq"))
    # int32 products of tokens below 65536 and weights below 16 over 128
    # positions stay far below 2**31: exact without jax_enable_x64.
    weights = numpy.array(spec["weights"], dtype=numpy.int32)
    weighted_sum = jax.jit(lambda array: (array.astype(jnp.int32) * weights).sum())
    runtime = isolated_runtime()
    tokens = runtime.array(numpy.arange(spec["tokens"], dtype=numpy.uint16), device="cpu:0")
    report = {"process_index": jax.process_index(), "process_count": jax.process_count(),
              "devices": [[device.id, device.process_index] for device in devices],
              "local_devices": [device.id for device in jax.local_devices()], "specs": {}}
    for name, spec_entries in spec["specs"].items():
        sharding = NamedSharding(mesh, PartitionSpec(*entries(spec_entries)))
        stream = backplane.batches(tokens, spec["batch_size"], spec["context"], sharding=sharding, seed=spec["seed"],
                                   steps=spec["steps"], runtime=runtime)
        steps = []
        for x, y in stream:
            step = {}
            for which, array in (("x", x), ("y", y)):
                step[which] = {"shape": list(array.shape), "same_sharding": array.sharding == sharding,
                               "shards": shards(array),
                               # A scalar on every device of the mesh: this process's copy.
                               "weighted_sum": int(numpy.asarray(weighted_sum(array).addressable_data(0)))}
            steps.append(step)
        report["specs"][name] = {"rank_source": stream.rank_source, "steps": steps}
    with open(out, "w", encoding="utf-8") as file:
        json.dump(report, file)
    runtime.close()
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()

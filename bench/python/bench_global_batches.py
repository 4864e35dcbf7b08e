#!/usr/bin/env python3
"""Global batches from Python, each against its baseline in the same run:

1. to="jax" with a NamedSharding over 4 CPU devices (P("data", "seq")):
   the caller's time per step against to="numpy" on one device, same
   global B and T (goal <= 2x), and against the glue people write today
   (MaxText's: device_put of each shard's slice of a NumPy batch, then
   jax.make_array_from_single_device_arrays);
2. the same sharded stream behind a fixed fake step of --compute-ms: its
   data_stall_fraction (goal <= 1%);
3. bytes read per rank: a Layout rank with cp = 2 against one with cp = 1,
   from stats().read_bytes over the same steps (goal <= 0.55).

    XLA_FLAGS=--xla_force_host_platform_device_count=4 bench_global_batches.py \
        [--batch 32] [--context 2048] [--steps 200] [--compute-ms 5]

Runs with the package on PYTHONPATH and BACKPLANE_LIBRARY set, as the python
test suites do; sets XLA_FLAGS itself when JAX has not started.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, List

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

import backplane  # noqa: E402

jax: Any
try:
    import jax  # noqa: E402
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402
except ImportError:
    jax = None


def per_step_seconds(stream: Any, steps: int) -> float:
    """Median caller's time per next(), over `steps` steps after a warm-up."""
    for _ in range(5):
        x, _ = next(stream)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        x, y = next(stream)
        if hasattr(x, "block_until_ready"):
            x.block_until_ready()
            y.block_until_ready()
        times.append(time.perf_counter() - start)
    stream.close()
    return float(statistics.median(times))


def handmade_global_arrays(tokens: Any, batch: int, context: int, sharding: Any, steps: int) -> float:
    """The glue written today: a NumPy batch, sliced per shard and put on
    each device, then assembled (MaxText's _form_global_array)."""
    stream = backplane.batches(tokens, batch, context, device="cpu:0", seed=1, dtype="int32")
    shape = (batch, context)
    indices = sharding.addressable_devices_indices_map(shape)

    def step() -> Any:
        x, y = next(stream)
        xs = [jax.device_put(x[index], device) for device, index in indices.items()]
        ys = [jax.device_put(y[index], device) for device, index in indices.items()]
        return (jax.make_array_from_single_device_arrays(shape, sharding, xs),
                jax.make_array_from_single_device_arrays(shape, sharding, ys))

    class Handmade:
        def __next__(self) -> Any:
            return step()

        def close(self) -> None:
            stream.close()

    return per_step_seconds(Handmade(), steps)


def stall_behind_a_step(tokens: Any, batch: int, context: int, sharding: Any, steps: int, compute_s: float) -> float:
    stream = backplane.batches(tokens, batch, context, seed=1, sharding=sharding, steps=steps + 5)
    for _ in range(5):
        next(stream)
    for x, y in stream:
        deadline = time.perf_counter() + compute_s
        while time.perf_counter() < deadline:  # the fake step: a busy loop, as a device step keeps the host busy
            pass
    fraction = float(stream.stats().data_stall_fraction)
    stream.close()
    return fraction


def bytes_per_rank(tokens: Any, batch: int, context: int, steps: int) -> List[int]:
    figures: List[int] = []
    for layout in (backplane.Layout({"dp": 2}, batch="dp", rank=1),
                   backplane.Layout({"dp": 2, "cp": 2}, batch="dp", sequence="cp", rank=3)):
        stream = backplane.batches(tokens, batch, context, device="cpu:0", seed=1, layout=layout, steps=steps,
                                   prefetch=1)
        for _ in stream:
            pass
        figures.append(stream.stats().read_bytes)
        stream.close()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--compute-ms", type=float, default=5.0)
    arguments = parser.parse_args()
    batch, context, steps = arguments.batch, arguments.context, arguments.steps
    tokens = backplane.array(np.random.default_rng(0).integers(0, 50_000, size=1 << 24, dtype=np.uint16),
                             device="cpu:0")
    print(f"global batch {batch} x context {context} (uint16 tokens, handed out as int32), {steps} steps")
    if jax is None:
        print("skipped: rows 1 and 2 need jax")
    else:
        mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("data", "seq"))
        sharding = NamedSharding(mesh, P("data", "seq"))  # type: ignore[no-untyped-call]
        numpy_s = per_step_seconds(backplane.batches(tokens, batch, context, device="cpu:0", seed=1,
                                                     dtype="int32"), steps)
        sharded_s = per_step_seconds(backplane.batches(tokens, batch, context, seed=1, sharding=sharding), steps)
        handmade_s = handmade_global_arrays(tokens, batch, context, sharding, steps)
        print(f"{len(jax.devices())} JAX CPU devices; per step, the caller's time (median):")
        print(f"  to='numpy', one device      {numpy_s * 1e6:9.1f} us")
        print(f"  sharding=, 4 devices        {sharded_s * 1e6:9.1f} us   {sharded_s / numpy_s:5.2f}x numpy "
              "(goal <= 2x)")
        print(f"  handmade device_put glue    {handmade_s * 1e6:9.1f} us   {handmade_s / sharded_s:5.2f}x sharding=")
        fraction = stall_behind_a_step(tokens, batch, context, sharding, steps, arguments.compute_ms / 1e3)
        print(f"  behind a {arguments.compute_ms:g} ms step: data_stall_fraction {fraction * 100:.2f}% "
              "(goal <= 1%)")
    whole, half = bytes_per_rank(tokens, batch // 2, context, steps)
    print(f"bytes read per rank over {steps} steps: cp=1 {whole / 2**20:.2f} MiB, cp=2 {half / 2**20:.2f} MiB: "
          f"{half / whole:.3f} (goal <= 0.55)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What batches()'s default xy="copies" (x and y contiguous, independent)
costs the caller per step against xy="views" (two overlapping views of the
[B, T+1] buffer), for each framework installed, in one run:

    bench_xy.py [--batch 32] [--context 1024] [--steps 300] [--compute-ms 1] [--rounds 5]

Each stream runs on cpu:0 over 16M random U16 tokens widened to int64. A fake
training step of --compute-ms (a busy wait) runs between steps, so the
stream's threads keep the pipeline full; the time next() still waits for
data (stats().wait_seconds, which a busy machine makes noisy) is taken out,
leaving the caller's own time: the C call, the DLPack conversion and, for
copies, the two copies (for JAX, until x and y are ready).
Rows: the median over --rounds rounds of the mean next() time, views then
copies, and the ratio copies / views; then to='jax' against to='numpy', both
with the default xy and dtype (int64; int32 for JAX, whose 64-bit types are
off by default): goal <= 2x. Run with the package importable
(PYTHONPATH=python and BACKPLANE_LIBRARY=build/core/libbackplane.so from a
build tree).
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable, List, Literal, Optional, Tuple

import numpy as np

import backplane

Framework = Literal["numpy", "torch", "jax"]  # what to= names


def busy_wait(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def per_step(tokens: backplane.Array, args: argparse.Namespace, to: Framework, xy: str) -> float:
    """The mean caller's time of next() over --steps steps (after a warm-up)."""
    # JAX hands out arrays before they are computed: wait for them, so that
    # the time counts the work and not only its dispatch.
    ready: Optional[Callable[[Any], Any]] = None
    if to == "jax":
        import jax
        ready = jax.block_until_ready
    with backplane.batches(tokens, args.batch, args.context, device="cpu:0", to=to, xy=xy, seed=1) as stream:
        for _ in range(20):
            x, y = next(stream)
            busy_wait(args.compute_ms / 1e3)
        spent = 0.0
        waited = stream.stats().wait_seconds
        for _ in range(args.steps):
            del x, y
            busy_wait(args.compute_ms / 1e3)
            start = time.perf_counter()
            x, y = next(stream)
            if ready is not None:
                ready((x, y))
            spent += time.perf_counter() - start
        waited = stream.stats().wait_seconds - waited
    return (spent - waited) / int(args.steps)


def frameworks() -> List[Framework]:
    found: List[Framework] = ["numpy"]
    optional: Tuple[Framework, ...] = ("torch", "jax")
    for name in optional:
        try:
            __import__(name)
        except ImportError:
            print(f"  {name}: not installed for this interpreter, skipped")
            continue
        found.append(name)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--compute-ms", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    values = np.random.default_rng(0).integers(0, 50257, size=1 << 24, dtype=np.uint16)
    tokens = backplane.array(values, device="cpu:0")
    print(f"B={args.batch} T={args.context} on cpu:0 in the default dtype, {args.compute_ms:g} ms fake step, "
          f"median of {args.rounds} rounds of {args.steps} steps")
    copies_of = {}
    for to in frameworks():
        measured = {}
        for xy in ("views", "copies"):
            rounds: List[float] = []
            for _ in range(args.rounds):
                rounds.append(per_step(tokens, args, to, xy))
            measured[xy] = statistics.median(rounds)
        views, copies = measured["views"], measured["copies"]
        copies_of[to] = copies
        print(f"  to={to!r:<8} views {views * 1e6:8.1f} µs  copies {copies * 1e6:8.1f} µs  "
              f"copies/views {copies / views:5.2f}x  (+{(copies - views) * 1e6:.1f} µs a step)")
    if "jax" in copies_of:
        ratio = copies_of["jax"] / copies_of["numpy"]
        print(f"  to='jax' {copies_of['jax'] * 1e6:.1f} µs a step against to='numpy' {copies_of['numpy'] * 1e6:.1f} µs: "
              f"{ratio:.2f}x (goal <= 2x: {'met' if ratio <= 2 else 'NOT met'})")


if __name__ == "__main__":
    main()

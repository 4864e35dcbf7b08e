#!/usr/bin/env python3
"""What stream.stats() costs a training loop that logs it every step, and
what the resident size costs, measured in one run:

    bench_stats.py [--file-mib 256] [--files 200] [--calls 20000] [--dir /tmp]

A stream over one token file of --file-mib MiB (its pages read once, so the
mapping is resident) and --files small ones (more mappings, as a process with
a framework loaded has). Rows:

  stats()           the counters, per call (goal: <= 20 µs)
  resident_bytes()  the resident size, which reads /proc/self/smaps: what
                    every stats() call paid when the figure was one of its
                    fields (the baseline)
"""
from __future__ import annotations

import argparse
import os
import pathlib
import tempfile
import time
from typing import Callable

import numpy as np

import backplane


def per_call(function: Callable[[], object], calls: int) -> float:
    """Median over 5 rounds of the mean seconds per call."""
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            function()
        rounds.append((time.perf_counter() - start) / calls)
    return sorted(rounds)[len(rounds) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file-mib", type=int, default=256)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        root = pathlib.Path(directory)
        big = root / "big.u16"
        np.random.default_rng(0).integers(0, 50257, size=args.file_mib << 19, dtype=np.uint16).tofile(big)
        small = []
        for index in range(args.files):
            path = root / f"small_{index:04}.u16"
            np.arange(4096, dtype=np.uint16).tofile(path)
            small.append(path)
        tokens = [backplane.load_tokens(big, dtype="uint16")] + [backplane.load_tokens(path, dtype="uint16")
                                                                  for path in small]
        for path in [big] + small:
            os.unlink(path)  # the mappings keep the tokens
        np.asarray(tokens[0]).sum()  # every page of the big file resident
        with backplane.batches(tokens, 8, 1023, device="cpu") as stream:
            for _ in range(10):
                next(stream)
            stats = per_call(stream.stats, args.calls)
            resident = per_call(stream.resident_bytes, max(args.calls // 400, 20))
            figure = stream.resident_bytes()
    print(f"stats(): {stats * 1e6:.2f} µs a call (goal <= 20 µs: {'met' if stats <= 20e-6 else 'NOT met'})")
    print(f"resident_bytes() ({figure / 2**20:.0f} MiB resident over {args.files + 1} mappings), what stats() paid "
          f"for it before: {resident * 1e3:.2f} ms a call ({resident / stats:.0f}x stats())")


if __name__ == "__main__":
    main()

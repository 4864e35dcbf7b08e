#!/usr/bin/env python3
"""safetensors.save of a NumPy array against np.save of the same array, each
followed by what makes it durable, measured in one run on the same disk:

    bench_save.py [--mib 256] [--runs 5] [--dir /var/tmp]

Rows (median of --runs, each into a new file beside the last):

  np.save + os.fsync         the baseline: NumPy's writer, then a flush to disk
  safetensors.save           backplane's durable save: a new file flushed to
                             disk, then renamed over the target and the rename
                             flushed (goal: >= 0.8x the baseline's speed)
  np.save                    NumPy without a flush: what a scratch file costs
  safetensors.save(durable=False)
                             backplane without the flushes, against np.save
  safetensors.numpy.save_file  the reference library, where it is installed

The disk is shared with other work: the ratios, measured side by side and
interleaved, are the figures to read, not the seconds.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Callable, Dict, List

import numpy as np

import backplane


def timed(write: Callable[[str], None], path: str) -> float:
    start = time.perf_counter()
    write(path)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", default="/var/tmp")
    args = parser.parse_args()
    tokens = np.random.default_rng(0).integers(0, 50257, size=args.mib << 19, dtype=np.uint16)

    def np_save_fsync(path: str) -> None:
        with open(path, "wb") as file:
            np.save(file, tokens)
            file.flush()
            os.fsync(file.fileno())

    def np_save(path: str) -> None:
        with open(path, "wb") as file:
            np.save(file, tokens)

    writers: Dict[str, Callable[[str], None]] = {
        "np.save + os.fsync": np_save_fsync,
        "safetensors.save": lambda path: backplane.safetensors.save(path, {"tokens": tokens}),
        "np.save": np_save,
        "safetensors.save(durable=False)":
            lambda path: backplane.safetensors.save(path, {"tokens": tokens}, durable=False),
    }
    try:
        from safetensors.numpy import save_file
        writers["safetensors.numpy.save_file"] = lambda path: save_file({"tokens": tokens}, path)
    except ImportError:
        pass
    seconds: Dict[str, List[float]] = {name: [] for name in writers}
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        for run in range(args.runs):
            for name, write in writers.items():  # interleaved: each run sees the same disk
                path = os.path.join(directory, f"{run}-{len(seconds[name])}-{name.split('(')[0]}")
                seconds[name].append(timed(write, path))
                os.unlink(path)
    median = {name: statistics.median(values) for name, values in seconds.items()}
    size = tokens.nbytes / 2**20
    for name, value in median.items():
        print(f"{name:34s} {value:7.3f} s  {size / value:8.0f} MiB/s")
    durable = median["np.save + os.fsync"] / median["safetensors.save"]
    scratch = median["np.save"] / median["safetensors.save(durable=False)"]
    print(f"safetensors.save: {durable:.2f}x the speed of np.save + os.fsync (goal >= 0.8x: "
          f"{'met' if durable >= 0.8 else 'NOT met'}); durable=False: {scratch:.2f}x np.save")


if __name__ == "__main__":
    main()

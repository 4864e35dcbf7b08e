#!/usr/bin/env python3
"""nanoGPT's get_batch on a uint16 token file, timed like bench_take_windows.

    nanogpt_sampling.py --file=TOKENS.bin [--batch=32] [--length=1024]
                        [--steps=200] [--repeats=7]

Prints "nanogpt B=.. T=..: batches/s: X" (median of the runs), or
"skipped: <why>" when numpy or torch cannot be imported. Installs nothing.
"""
import argparse
import statistics
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--file", required=True)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    try:
        import numpy as np
        import torch
    except ImportError as error:
        print(f"skipped: {sys.executable} cannot import {error.name} (numpy and torch are needed; "
              f"on Debian: apt-get install python3-numpy python3-torch)")
        return 0

    data = np.memmap(args.file, dtype=np.uint16, mode="r")
    generator = torch.Generator().manual_seed(args.batch)
    offsets = [torch.randint(len(data) - args.length, (args.batch,), generator=generator)
               for _ in range(args.steps)]

    def run():
        for ix in offsets:  # exactly nanoGPT's get_batch (x only)
            x = torch.stack([torch.from_numpy((data[i:i + args.length]).astype(np.int64)) for i in ix])
        return x

    run()  # warm-up
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    rate = args.steps / statistics.median(times)
    print(f"nanogpt B={args.batch} T={args.length}: batches/s: {rate:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The user story from Python: list backends (no try/except), keep the
token file in host RAM while everything else defaults to the fastest device,
and sample training batches onto that device.

    python3 examples/story.py [TOKENS.safetensors] [--steps N] [--batch B] [--context T]

Without a file it writes a small one (1,000,000 random U16 tokens, tensor
`tokens`) into a temporary directory with backplane's own writer. Needs
libbackplane: set BACKPLANE_LIBRARY, or run from a build tree.
"""
import argparse
import pathlib
import random
import struct
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python"))
import backplane  # noqa: E402  (after the path tweak, for running from a checkout)


def write_tokens(runtime, path, count, vocabulary=50257):
    rng = random.Random(1234)
    tokens = struct.pack(f"<{count}H", *(rng.randrange(vocabulary) for _ in range(count)))
    array = runtime.array(tokens, "U16", (count,), device="cpu")
    backplane.safetensors.save(path, {"tokens": array}, metadata={"vocabulary": str(vocabulary)})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tokens", nargs="?", help="a safetensors file with a 1-D U16 tensor 'tokens'")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--context", type=int, default=256)
    args = parser.parse_args()

    runtime = backplane.Runtime.default()
    print("backends:")
    for backend in runtime.backends():  # a plain call: unavailable ones are listed with their reason
        print(f"  {backend.name:<12} {backend.status:<12} {backend.reason}")
    chosen = runtime.default_device()
    print(f"default device: {chosen.device} (decided by: {chosen.source})")

    with tempfile.TemporaryDirectory() as scratch:
        path = args.tokens
        if path is None:
            path = pathlib.Path(scratch) / "tokens.safetensors"
            write_tokens(runtime, path, 1_000_000)
            print(f"wrote {path} (1,000,000 U16 tokens)")

        header = backplane.safetensors.inspect(path)
        print(f"{path}: " + ", ".join(f"{t.name} {t.dtype}{list(t.shape)}" for t in header.tensors))
        # The token file stays in host RAM (a zero-copy memory map on cpu),
        # whatever the default device is.
        with runtime.default_device_scope("cpu"):
            tokens = backplane.safetensors.load(runtime, path, names=["tokens"])["tokens"]
        print(f"tokens: {tokens.shape[0]:,} on {tokens.device}")

        # Each step: B random windows of T+1 tokens, one transfer to the
        # default device, converted to I64 for an embedding lookup. The
        # next batch is issued before waiting on the current one.
        rng = random.Random(0)
        window = args.context + 1
        limit = tokens.shape[0] - window
        def offsets():
            return [rng.randrange(limit + 1) for _ in range(args.batch)]
        start = time.perf_counter()
        batch = runtime.take_windows(tokens, offsets(), window, dtype="I64")
        for _ in range(args.steps):
            upcoming = runtime.take_windows(tokens, offsets(), window, dtype="I64")
            batch.wait()  # a training step would consume `batch` here
            batch = upcoming
        batch.wait()
        elapsed = time.perf_counter() - start
        print(f"batch: {batch.dtype}{list(batch.shape)} on {batch.device}")
        print(f"{args.steps / elapsed:,.0f} batches/s "
              f"({args.steps * args.batch * window * 8 / elapsed / 1e6:,.1f} MB/s of I64 windows)")
        del tokens, batch, upcoming  # release the memory map before the directory goes
    return 0


if __name__ == "__main__":
    sys.exit(main())

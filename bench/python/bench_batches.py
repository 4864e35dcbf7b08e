#!/usr/bin/env python3
"""Training-batch sampling from Python: backplane against what people write
today, in one run, on one token file, with pages warm and cold.

    bench_batches.py [--tokens N] [--context T] [--batches 32,256] [--calls K]

Rows (each makes int64 windows of T+1 tokens from a uint16 token file):
  backplane      rt.take_windows(tokens, offsets, T+1, "cpu", "int64") on the
                 zero-copy safetensors map, then .numpy() of the result
  numpy          memmap[offsets[:, None] + arange(T+1)].astype(int64)
  nanogpt        nanoGPT's get_batch as written (x and y: two torch.stack of
                 from_numpy(slice.astype(int64)))
  torch.stack    one torch.stack of from_numpy(slice.astype(int64)) windows
and the ratio of each to backplane. "cold" drops the file's pages (madvise +
posix_fadvise DONTNEED) and remaps before each pass, so every call faults its
windows in from the file system.

The batch stream (backplane.batches over load_tokens): the caller's time per
step against NumPy fancy indexing + astype of the same windows (goal >= 3x);
a training loop with a fixed fake step of --compute-ms and its
data_stall_fraction on cpu and opencl:0 (goal <= 1%); cold pages: windows/s
against NumPy memmap fancy indexing (goal >= 5x) and against a ceiling of
--readers threads of random window-sized preads on the same file (goal >=
0.5x); and the time from batches(..., state=) at step 1,000,000 to the first
batch (goal <= 10 ms).

The per-call overhead line: the public call against the bare C call through
ctypes with prepared arguments, minus what ctypes itself costs for a trivial
call (bp_array_is_ready), i.e. the Python wrapper's own cost beyond the C++
call. Needs numpy; torch rows are skipped (and say why) without torch.
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import mmap
import os
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np

import backplane
from backplane import _lib

try:
    import torch
except ImportError:
    torch = None


def per_call(function: Callable[[Any], Any], offsets: List[Any], repeats: int = 5) -> float:
    """Median over `repeats` passes of the mean seconds per call."""
    function(offsets[0])
    passes = []
    for _ in range(repeats):
        start = time.perf_counter()
        for item in offsets:
            function(item)
        passes.append((time.perf_counter() - start) / len(offsets))
    return statistics.median(passes)


def drop_pages(path: str) -> None:
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        if any(line.rstrip().endswith(path) for line in maps):
            print(f"warning: {path} is still mapped here: its pages may stay cached")
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(descriptor)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=128 << 20, help="tokens in the file (default 128 Mi: 256 MiB)")
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--batches", default="32,256")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--compute-ms", type=float, default=5.0, help="the fake training step (busy wait)")
    parser.add_argument("--loop-steps", type=int, default=200)
    parser.add_argument("--readers", type=int, default=8, help="threads of the pread ceiling")
    parser.add_argument("--only-stream", action="store_true", help="only the batch stream's rows")
    args = parser.parse_args()
    window = args.context + 1
    runtime = backplane.Runtime.default()

    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "tokens.safetensors")
        values = np.random.default_rng(1).integers(0, 50257, size=args.tokens, dtype=np.uint16)
        backplane.safetensors.save(path, {"tokens": values})
        del values
        data_offset = backplane.safetensors.inspect(path).data_offset
        print(f"{args.tokens:,} uint16 tokens ({args.tokens * 2 / 2**20:.0f} MiB), T+1 = {window}, "
              f"{args.calls} calls a pass; backplane {backplane.version()} from {backplane.library_path()}")

        state: Dict[str, Any] = {}

        def open_maps() -> None:
            with runtime.default_device_scope("cpu"):
                state["tokens"] = backplane.safetensors.load(path, runtime=runtime)["tokens"]
            state["memmap"] = np.memmap(path, dtype=np.uint16, mode="r", offset=data_offset, shape=(args.tokens,))

        def close_maps() -> None:
            memmap = state.pop("memmap", None)
            if memmap is not None:
                memmap._mmap.madvise(mmap.MADV_DONTNEED)
            state.pop("tokens", None)
            del memmap
            drop_pages(path)

        rows: Dict[str, Callable[[Any], Any]] = {
            "backplane": lambda offsets: runtime.take_windows(state["tokens"], offsets, window, "cpu",
                                                              "int64").numpy(),
            "numpy": lambda offsets: state["memmap"][offsets[:, None] + np.arange(window)].astype(np.int64),
        }
        if torch is not None:
            T = args.context

            def nanogpt(ix: Any) -> Any:
                data = state["memmap"]
                x = torch.stack([torch.from_numpy((data[i:i + T]).astype(np.int64)) for i in ix])
                y = torch.stack([torch.from_numpy((data[i + 1:i + 1 + T]).astype(np.int64)) for i in ix])
                return x, y
            rows["nanogpt"] = nanogpt
            rows["torch.stack"] = lambda ix: torch.stack(
                [torch.from_numpy(state["memmap"][i:i + window].astype(np.int64)) for i in ix])
        else:
            print(f"skipped: nanogpt and torch.stack rows: {sys.executable} cannot import torch")

        batches_list = [int(b) for b in args.batches.split(",")]
        stream_rows(runtime, path, data_offset, args, batches_list)
        if args.only_stream:
            return 0
        rng = np.random.default_rng(2)
        for batch in batches_list:
            print(f"\nB={batch}          warm µs/call   ratio    cold µs/call   ratio")
            results: Dict[str, List[float]] = {}
            for name, function in rows.items():
                offsets = [rng.integers(0, args.tokens - window, size=batch) for _ in range(args.calls)]
                open_maps()
                warm = per_call(function, offsets)
                cold_passes = []
                for _ in range(3):
                    close_maps()
                    open_maps()
                    fresh = [rng.integers(0, args.tokens - window, size=batch) for _ in range(args.calls)]
                    start = time.perf_counter()
                    for item in fresh:
                        function(item)
                    cold_passes.append((time.perf_counter() - start) / len(fresh))
                close_maps()
                results[name] = [warm, statistics.median(cold_passes)]
            base_warm, base_cold = results["backplane"]
            for name, (warm, cold) in results.items():
                print(f"  {name:<12} {warm * 1e6:10.1f}  {warm / base_warm:6.2f}x  {cold * 1e6:12.1f}  "
                      f"{cold / base_cold:6.2f}x")
            print(f"  (ratio: row time / backplane time; numpy/backplane = {results['numpy'][0] / base_warm:.2f}x "
                  f"warm, {results['numpy'][1] / base_cold:.2f}x cold)")

        widening(runtime, window)
        overhead(runtime, path, window)
    return 0


def busy_wait(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def stream_rows(runtime: backplane.Runtime, path: str, data_offset: int, args: Any, batch_sizes: List[int]) -> None:
    """The batch stream against its baselines, each in this run."""
    import threading

    window = args.context + 1
    tokens_count = args.tokens
    print(f"\nbatch stream (load_tokens + batches, T={args.context}, int64):")

    # 1. The caller's time per step, warm, host target.
    tokens = backplane.load_tokens(pathlib.Path(path), runtime=runtime)
    memmap = np.memmap(path, dtype=np.uint16, mode="r", offset=data_offset, shape=(tokens_count,))
    # Warm both mappings of the file: a page in the page cache still costs
    # a fault the first time each mapping touches it.
    np.asarray(memmap).sum()
    np.from_dlpack(tokens).sum()
    rng = np.random.default_rng(7)
    for batch in batch_sizes:
        offsets = [rng.integers(0, tokens_count - window, size=batch) for _ in range(args.calls)]
        numpy_time = per_call(lambda ix: memmap[ix[:, None] + np.arange(window)].astype(np.int64), offsets)
        # The caller's own time: inside next() only, in a loop whose step
        # (a short busy wait) gives the producer the time a model would.
        with backplane.batches(tokens, batch, args.context, device="cpu", runtime=runtime, xy="views") as stream:
            iterator = iter(stream)
            next(iterator)
            inside = []
            for _ in range(args.calls):
                busy_wait(args.compute_ms / 1e3)
                start = time.perf_counter()
                next(iterator)
                inside.append(time.perf_counter() - start)
            ours = statistics.median(inside)
        print(f"  B={batch:<4} caller's time per step: stream next() {ours * 1e6:8.1f} µs, NumPy fancy indexing + "
              f"astype {numpy_time * 1e6:8.1f} µs: {numpy_time / ours:.2f}x (goal >= 3x)")

    # 2. A training loop with a fixed step.
    targets = ["cpu"] + [device for device in ("opencl:0",) if _has_device(runtime, device)]
    for target in targets:
        for batch in batch_sizes:
            # A device batch stays a device Array (the model would take it as is).
            keep = None if target == "cpu" else _Held
            # First use of a device builds its kernels (PoCL compiles the
            # widening kernel): not part of a steady loop's stall.
            with backplane.batches(tokens, batch, args.context, device=target, runtime=runtime, steps=3, xy="views",
                                   to=keep) as warm_up:
                for _ in warm_up:
                    pass
            with backplane.batches(tokens, batch, args.context, device=target, runtime=runtime, xy="views",
                                   steps=args.loop_steps, to=keep) as stream:
                for x, y in stream:
                    busy_wait(args.compute_ms / 1e3)
                stats = stream.stats()
            print(f"  training loop on {target:<8} B={batch:<4} ({args.compute_ms:.0f} ms step): data_stall_fraction "
                  f"{stats.data_stall_fraction:.4f} (goal <= 0.01), {stats.wait_seconds / stats.steps * 1e6:.0f} µs "
                  f"waited a step")
    del tokens, memmap, iterator, stream, warm_up
    gc.collect()

    # 3. Cold pages: the file's pages dropped before each pass (which needs
    # no mapping of the file left in this process).
    steps = max(8, args.calls // 2)
    for batch in batch_sizes:
        drop_pages(path)
        cold_map = np.memmap(path, dtype=np.uint16, mode="r", offset=data_offset, shape=(tokens_count,))
        plan = [rng.integers(0, tokens_count - window, size=batch) for _ in range(steps)]
        start = time.perf_counter()
        for ix in plan:
            cold_map[ix[:, None] + np.arange(window)].astype(np.int64)
        numpy_rate = batch * steps / (time.perf_counter() - start)
        del cold_map
        gc.collect()

        drop_pages(path)
        descriptor = os.open(path, os.O_RDONLY)
        flat = [int(o) for ix in plan for o in ix]
        position = iter(range(len(flat)))
        lock = threading.Lock()

        def reader() -> None:
            while True:
                with lock:
                    index = next(position, None)
                if index is None:
                    return
                os.pread(descriptor, window * 2, data_offset + flat[index] * 2)

        start = time.perf_counter()
        readers = [threading.Thread(target=reader) for _ in range(args.readers)]
        for thread in readers:
            thread.start()
        for thread in readers:
            thread.join()
        ceiling = batch * steps / (time.perf_counter() - start)
        os.close(descriptor)

        drop_pages(path)
        cold_tokens = backplane.load_tokens(pathlib.Path(path), runtime=runtime)
        with backplane.batches(cold_tokens, batch, args.context, device="cpu", runtime=runtime, xy="views", seed=batch,
                               steps=steps) as stream:
            start = time.perf_counter()
            for _ in stream:
                pass
            stream_rate = batch * steps / (time.perf_counter() - start)
        del cold_tokens, stream
        gc.collect()
        drop_pages(path)
        print(f"  cold B={batch:<4} windows/s: stream {stream_rate:9.0f}, NumPy memmap {numpy_rate:9.0f} "
              f"({stream_rate / numpy_rate:.2f}x, goal >= 5x), ceiling of {args.readers} pread threads "
              f"{ceiling:9.0f} ({stream_rate / ceiling:.2f}x, goal >= 0.5x)")

    # 4. Resume at step 1,000,000.
    tokens = backplane.load_tokens(pathlib.Path(path), runtime=runtime)
    with backplane.batches(tokens, 256, args.context, device="cpu", runtime=runtime) as stream:
        next(iter(stream))
        saved = stream.state_dict()
    saved["step"] = 1_000_000
    samples = []
    for _ in range(7):
        start = time.perf_counter()
        with backplane.batches(tokens, 256, args.context, device="cpu", runtime=runtime, state=saved) as stream:
            next(iter(stream))
        samples.append(time.perf_counter() - start)
    print(f"  resume at step 1,000,000 to the first batch (B=256): {statistics.median(samples) * 1e3:.2f} ms "
          f"(goal <= 10 ms)")


class _Held:
    """A batch on a device kept as the Array it is: x and y are the same."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def __getitem__(self, _: Any) -> "_Held":
        return self


def _has_device(runtime: backplane.Runtime, selector: str) -> bool:
    try:
        runtime.device(selector)
        return True
    except backplane.Error:
        return False


def widening(runtime: backplane.Runtime, window: int) -> None:
    """U16 -> I64 of the same contiguous tokens: take_windows' host widening
    against NumPy's astype (both read warm memory, both allocate the output)."""
    print("\nwidening U16 -> I64 of contiguous tokens (one window), warm:")
    for count in (32 * window, 256 * window):
        values = np.random.default_rng(4).integers(0, 50257, size=count + 1, dtype=np.uint16)
        tokens = runtime.array(values, device="cpu")
        start = np.zeros(1, dtype=np.int64)
        ours = per_call(lambda _: runtime.take_windows(tokens, start, count, "cpu", "int64").wait(), [None] * 200)
        numpy_time = per_call(lambda _: values[:count].astype(np.int64), [None] * 200)
        print(f"  {count:>8,} tokens: backplane {ours * 1e6:8.1f} µs ({count * 10 / ours / 1e9:5.1f} GB/s moved), "
              f"numpy astype {numpy_time * 1e6:8.1f} µs: ratio numpy/backplane {numpy_time / ours:.2f}x")


def overhead(runtime: backplane.Runtime, path: str, window: int) -> None:
    """The wrapper's own cost: public call vs prepared bare C call."""
    with runtime.default_device_scope("cpu"):
        tokens = backplane.safetensors.load(path, runtime=runtime)["tokens"]
    offsets = np.random.default_rng(3).integers(0, tokens.shape[0] - window, size=32)
    cpu = backplane.Device("cpu", 0)._to_c()
    handle = ctypes.c_void_p()
    lib = _lib.lib
    arguments = (runtime._live_handle(), tokens._live(), offsets.__array_interface__["data"][0], len(offsets),
                 window, ctypes.byref(cpu), 5, ctypes.byref(handle))
    ready = ctypes.c_int32()
    ready_arguments = (tokens._live(), ctypes.byref(ready))

    def bare(_: Any) -> None:
        lib.bp_take_windows(*arguments)
        lib.bp_array_destroy(handle)

    def public(_: Any) -> None:
        runtime.take_windows(tokens, offsets, window, "cpu", "int64")

    def trivial(_: Any) -> None:
        lib.bp_array_is_ready(*ready_arguments)
        lib.bp_array_is_ready(*ready_arguments)

    calls = [None] * 2000
    samples = []
    for _ in range(5):  # interleaved so that drift hits both alike
        t_bare = per_call(bare, calls, 3)
        t_public = per_call(public, calls, 3)
        t_trivial = per_call(trivial, calls, 3)
        samples.append((t_bare, t_public, t_trivial))
    t_bare, t_public, t_trivial = (statistics.median(s[i] for s in samples) for i in range(3))
    # The bare call = the C++ call + one ctypes crossing (+ one for destroy).
    cxx = t_bare - t_trivial
    print(f"\nper-call overhead, B=32 T+1={window} U16->I64 on cpu (median of 5 x 3 x 2000 calls):")
    print(f"  bare C call via ctypes {t_bare * 1e6:.2f} µs, ctypes crossing x2 {t_trivial * 1e6:.2f} µs, "
          f"so the C++ call ~{cxx * 1e6:.2f} µs")
    print(f"  public runtime.take_windows {t_public * 1e6:.2f} µs: overhead beyond the C++ call "
          f"{(t_public - cxx) * 1e6:.2f} µs (goal <= 5 µs)")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What a take_windows call from Python costs beyond the same call from C,
for each way of calling the library, in one run:

    bench_call_overhead.py [--program build/bench/python/take_windows_c]
                           [--tokens N] [--batch B] [--window T+1] [--calls K] [--rounds R]

  C                   take_windows_c: bp_take_windows + bp_array_destroy from C
                      (the baseline), and bp_array_is_ready
  ctypes, prepared    the generated ctypes prototypes, arguments made once
  cffi ABI, prepared  cffi.FFI().dlopen of the library over the header's
                      declarations, arguments made once (skipped, saying
                      why, when cffi is not installed)
  public              runtime.take_windows(tokens, offsets, window, "cpu", "int64")

Every row makes B windows of T+1 U16 tokens widened to I64 on cpu:0 from
the same host array at the same offsets. The rounds interleave the rows, so
that the machine's drift hits each alike; each figure is the fastest round
(the one least disturbed by the rest of the machine; the C program's rounds
run in a process of their own, so a median would compare different
moments), and each row prints its difference from the C call (goal for the
public call: <= 5 µs). Two clocks: wall time, and the calling thread's CPU
time, which leaves out the waits for the library's transfer threads (on a
busy machine those waits vary by far more than the call costs).
"""
from __future__ import annotations

import argparse
import ctypes
import pathlib
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

import backplane
from backplane import _lib

ROOT = pathlib.Path(__file__).resolve().parents[2]

# What the cffi row declares: the header's own declarations for the calls it
# makes (cffi's ABI mode reads C declarations; it cannot read the header's
# macros).
CFFI_DECLARATIONS = """
typedef struct bp_device { char backend[%d]; int32_t ordinal; } bp_device;
int32_t bp_take_windows(void* runtime, const void* tokens, const int64_t* offsets, size_t count, int64_t length,
                        const bp_device* device, int32_t output, void** out);
void bp_array_destroy(void* array);
int32_t bp_array_is_ready(const void* array, int32_t* out);
""" % _lib.BACKEND_NAME_CAPACITY


def per_call(function: Callable[[], Any], calls: int) -> Tuple[float, float]:
    """Mean seconds per call of `calls` calls: wall time, this thread's CPU time."""
    start, start_cpu = time.perf_counter(), time.thread_time()
    for _ in range(calls):
        function()
    return (time.perf_counter() - start) / calls, (time.thread_time() - start_cpu) / calls


def c_round(program: str, arguments: argparse.Namespace) -> Dict[str, float]:
    """One round of the C program: its take_windows and is_ready seconds per call."""
    run = subprocess.run([program, str(arguments.tokens), str(arguments.batch), str(arguments.window),
                          str(arguments.calls), "1"], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"bench_call_overhead: {program} failed: {run.stderr.strip()}")
    return {name: float(value) * 1e-9 for name, value in (line.split() for line in run.stdout.splitlines())}


def cffi_rows(library: str, runtime: int, tokens: int, offsets: np.ndarray[Any, Any], count: int,
              window: int) -> Optional[Dict[str, Callable[[], Any]]]:
    try:
        import cffi  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError as error:
        print(f"cffi rows skipped: {error} (Debian's /usr/bin/python3 has python3-cffi)")
        return None
    ffi = cffi.FFI()
    ffi.cdef(CFFI_DECLARATIONS)
    c = ffi.dlopen(library)
    device = ffi.new("bp_device*")
    device.backend = b"cpu"
    out = ffi.new("void**")
    ready = ffi.new("int32_t*")
    runtime_pointer, tokens_pointer = ffi.cast("void*", runtime), ffi.cast("void*", tokens)
    offsets_pointer = ffi.cast("int64_t*", offsets.ctypes.data)

    def take() -> None:
        c.bp_take_windows(runtime_pointer, tokens_pointer, offsets_pointer, count, window, device, 5, out)
        c.bp_array_destroy(out[0])

    return {"cffi ABI, prepared": take, "cffi ABI is_ready": lambda: c.bp_array_is_ready(tokens_pointer, ready)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--program", default=str(ROOT / "build" / "bench" / "python" / "take_windows_c"))
    parser.add_argument("--tokens", type=int, default=1 << 22)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--window", type=int, default=1025)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=15)
    arguments = parser.parse_args()
    if not pathlib.Path(arguments.program).exists():
        print(f"bench_call_overhead: no C baseline at {arguments.program}; build it (ninja -C build) or pass "
              "--program", file=sys.stderr)
        return 2
    runtime = backplane.Runtime()
    count, window = arguments.batch, arguments.window
    index = np.arange(arguments.tokens, dtype=np.int64)
    values = ((index * 2654435761) % (1 << 32) >> 16).astype(np.uint16)  # the C program's tokens
    tokens = runtime.array(values, device="cpu")
    offsets = (np.arange(count, dtype=np.int64) * 7919 * window) % (arguments.tokens - window)
    cpu = backplane.Device("cpu", 0)._to_c()
    handle = ctypes.c_void_p()
    ready = ctypes.c_int32()
    lib = _lib.lib
    runtime_handle, tokens_handle = runtime._live_handle(), tokens._live()
    address = offsets.ctypes.data

    def ctypes_take() -> None:
        lib.bp_take_windows(runtime_handle, tokens_handle, address, count, window, ctypes.byref(cpu), 5,
                            ctypes.byref(handle))
        lib.bp_array_destroy(handle)

    rows: Dict[str, Callable[[], Any]] = {
        "ctypes, prepared": ctypes_take,
        "ctypes is_ready": lambda: lib.bp_array_is_ready(tokens_handle, ctypes.byref(ready)),
        "public": lambda: runtime.take_windows(tokens, offsets, window, "cpu", "int64"),
    }
    rows.update(cffi_rows(_lib.library_path(), runtime_handle.value or 0, tokens_handle.value or 0, offsets, count,
                          window) or {})
    for function in rows.values():
        function()  # warm: the allocator's cache, the first crossing
    wall: Dict[str, List[float]] = {name: [] for name in ["C", "C is_ready", *rows]}
    cpu_time: Dict[str, List[float]] = {name: [] for name in ["C", *rows]}
    for _ in range(arguments.rounds):
        c = c_round(arguments.program, arguments)
        wall["C"].append(c["take_windows_ns"])
        cpu_time["C"].append(c["take_windows_cpu_ns"])
        wall["C is_ready"].append(c["is_ready_ns"])
        for name, function in rows.items():
            wall[name].append(per_call(function, arguments.calls)[0])
            cpu_time[name].append(per_call(function, arguments.calls)[1])
    print(f"take_windows, B={count} T+1={window} U16->I64 on cpu:0, fastest of {arguments.rounds} rounds of "
          f"{arguments.calls} calls ({sys.implementation.name} {sys.version.split()[0]}):")
    for clock, samples in (("wall time", wall), ("calling thread's CPU time", cpu_time)):
        fastest = {name: min(values) for name, values in samples.items()}
        print(f" {clock}:")
        print(f"  {'C (baseline)':<22} {fastest['C'] * 1e6:8.2f} µs")
        for name in [name for name in rows if "is_ready" not in name]:
            difference = fastest[name] - fastest["C"]
            print(f"  {name:<22} {fastest[name] * 1e6:8.2f} µs: {difference * 1e6:+6.2f} µs beyond C, "
                  f"ratio {fastest[name] / fastest['C']:.2f}x" + (" (goal <= +5 µs)" if name == "public" else ""))
    fastest = {name: min(values) for name, values in wall.items()}
    print("one trivial call (bp_array_is_ready), wall time:")
    for name in [name for name in wall if "is_ready" in name]:
        print(f"  {name:<22} {fastest[name] * 1e9:8.0f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())

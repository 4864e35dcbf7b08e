#!/usr/bin/env python3
"""Our CPU load against the reference package (PyPI safetensors), same file, same run.

    bench_reference.py BENCH_BINARY PLUGIN_DIR [--mib=512] [--repeats=5] [--dir=/tmp]

The reference's numpy loaders copy the data into a NumPy array; ours maps the
file and reads nothing until it is used. So two comparisons are printed:
opening (ours: load; reference: safe_open) and having all the data in memory
(ours: load + reading every page; reference: load_file and
safe_open + get_tensor). Prints "skipped: ..." and exits 77 where
`import safetensors, numpy` fails.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def flag(name, default):
    for argument in sys.argv[3:]:
        if argument.startswith(f"--{name}="):
            return type(default)(argument.split("=", 1)[1])
    return default


def median_seconds(repeats, body):
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        body()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import numpy as np
        from safetensors import safe_open
        from safetensors.numpy import load_file, save_file
    except ImportError as error:
        print(f"skipped: the reference cannot be imported ({error}); scripts/pip-test-packages installs it")
        return 77
    binary, plugin_dir = sys.argv[1], sys.argv[2]
    mib, repeats = flag("mib", 512), flag("repeats", 5)
    directory = flag("dir", tempfile.gettempdir())
    path = os.path.join(directory, f"bench-reference-{os.getpid()}.safetensors")
    try:
        tokens = np.random.default_rng(1).integers(0, 50257, size=(mib << 20) // 2, dtype=np.uint16)
        save_file({"tokens": tokens}, path)
        del tokens
        load_file(path)  # warm the page cache

        def open_only():
            with safe_open(path, "np") as handle:
                handle.keys()

        def open_and_get():
            with safe_open(path, "np") as handle:
                handle.get_tensor("tokens")

        reference_open = median_seconds(repeats * 10, open_only)
        reference_load_file = median_seconds(repeats, lambda: load_file(path))
        reference_get = median_seconds(repeats, open_and_get)
        ours = json.loads(subprocess.run(
            [binary, plugin_dir, f"--time-cpu-load={path}", f"--repeats={repeats}", "--touch"],
            check=True, capture_output=True, text=True).stdout)
        print(f"3. CPU load of a {mib} MiB token file against the reference (safetensors "
              f"{__import__('safetensors').__version__}, numpy), warm page cache, medians of {repeats}")
        print(f"  open:        ours load {ours['load'] * 1e6:9.1f} us   safe_open {reference_open * 1e6:9.1f} us"
              f"   speed-up {reference_open / ours['load']:.1f}x")
        print(f"  all data:    ours load + read every page {ours['load_and_touch'] * 1e3:8.1f} ms   "
              f"load_file {reference_load_file * 1e3:8.1f} ms ({reference_load_file / ours['load_and_touch']:.1f}x)   "
              f"safe_open + get_tensor {reference_get * 1e3:8.1f} ms ({reference_get / ours['load_and_touch']:.1f}x)")
        print("  (all data: the reference copies the file into a NumPy array; ours maps it and faults every page in)")
    finally:
        if os.path.exists(path):
            os.remove(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

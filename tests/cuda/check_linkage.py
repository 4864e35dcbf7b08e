#!/usr/bin/env python3
"""backplane-cuda.so exports only the entry symbol and needs only the C/C++ runtime.

It must load on a machine without the CUDA toolkit or the NVIDIA driver, so no
libcuda, libcudart or anything else may appear among its DT_NEEDED entries.
Usage: check_linkage.py PLUGIN.so   Prints one doctest-style summary line.
"""
import re
import subprocess
import sys

ENTRY = "backplane_plugin_entry"
# glibc (with its loader), libgcc and libstdc++.
RUNTIME = re.compile(
    r"^(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+)\.so\.\d+$|^ld-linux[-\w.]*\.so\.\d+$")


def run(*command):
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def main(path):
    failures = []
    symbols = [line.split()[-1] for line in run("nm", "-D", "--defined-only", path).splitlines()
               if line.strip()]
    if symbols == [ENTRY]:
        print(f"ok: {path} exports only {ENTRY}")
    else:
        failures.append(f"exports {len(symbols)} symbols: {', '.join(symbols[:20])}")

    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run("readelf", "-d", path))
    foreign = [library for library in needed if not RUNTIME.match(library)]
    if foreign:
        failures.append(f"needs libraries beyond the C/C++ runtime: {', '.join(foreign)}")
    else:
        print(f"ok: {path} needs only {', '.join(needed)}")

    for failure in failures:
        print(f"FAIL: {path} {failure}")
    passed = 2 - len(failures)
    print(f"[doctest] test cases: 2 | {passed} passed | {len(failures)} failed | 0 skipped")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))

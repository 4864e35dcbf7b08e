#!/usr/bin/env python3
"""Each plugin exports exactly one dynamic symbol: backplane_plugin_entry.

Usage: check_exports.py PLUGIN.so...   Prints one doctest-style summary line.
"""
import subprocess
import sys

ENTRY = "backplane_plugin_entry"


def exported_symbols(path):
    output = subprocess.run(["nm", "-D", "--defined-only", path], check=True,
                            capture_output=True, text=True).stdout
    return [line.split()[-1] for line in output.splitlines() if line.strip()]


def main(paths):
    failed = 0
    for path in paths:
        symbols = exported_symbols(path)
        if symbols == [ENTRY]:
            print(f"ok: {path} exports only {ENTRY}")
        else:
            failed += 1
            print(f"FAIL: {path} exports {len(symbols)} symbols: {', '.join(symbols[:20])}")
    print(f"[doctest] test cases: {len(paths)} | {len(paths) - failed} passed | {failed} failed | 0 skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""with_pjrt_library.py DISTRIBUTION COMMAND...: runs COMMAND with every
@PJRT_LIBRARY@ in its arguments replaced by the PJRT plugin library that
DISTRIBUTION installed for the python3 on PATH (plugins/pjrt/find_pjrt.py).
Without the wheel it prints why and exits 77, which meson counts as skipped."""
import os
import subprocess
import sys

FINDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "plugins", "pjrt", "find_pjrt.py")


def main(arguments):
    if len(arguments) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    found = subprocess.run([sys.executable, FINDER, "--library", arguments[0]], capture_output=True, text=True)
    if found.returncode != 0:
        print(f"skipped: {found.stderr.strip()} (scripts/pip-test-packages installs it)")
        return 77
    library = found.stdout.splitlines()[0]
    command = [argument.replace("@PJRT_LIBRARY@", library) for argument in arguments[1:]]
    return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

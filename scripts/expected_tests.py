#!/usr/bin/env python3
"""Names the tests of the normal build that were expected and did not run.

A suite whose feature a build did not detect (the cuda, opencl or pjrt plugin,
Debian's python3, the docs' interpreter) is simply absent from that build:
meson registers no test for it and says nothing. This compares the tests that
ran (meson's testlog.json) with the ones a full set-up has, and prints one
line naming each missing test with the reason meson's summary gave for its
feature. It also writes one meson-style testlog entry for
scripts/test_summary.py: skipped where tests are missing, failed where they
are missing and --require is given (.ci/run: there every feature is set up).

usage: expected_tests.py BUILD_DIR OUT_TESTLOG.json [--require]
"""
import json
import os
import re
import sys

# test name -> the line of meson's summary (meson.build's `summary`) whose
# value says whether, and why not, its feature was built.
EXPECTED = {
    "cuda": "cuda plugin",
    "cuda-emulator": "cuda plugin",
    "opencl": "opencl plugin",
    "opencl-placement": "opencl plugin",
    "pjrt": "pjrt plugin",
    "pjrt-backend": "pjrt plugin",
    "c-pjrt": "pjrt plugin",
    "python-system": None,
    "code-blocks": None,
}


def summary_values(build_dir):
    """The `key : value` lines of the last summary in meson's log."""
    values = {}
    log = os.path.join(build_dir, "meson-logs", "meson-log.txt")
    try:
        text = open(log, encoding="utf-8", errors="replace").read()
    except OSError:
        return values
    for key, value in re.findall(r"^\s{4}(\S[^:\n]*?)\s*:\s(.*)$", text, re.M):
        values[key] = value.strip()
    return values


def ran_tests(build_dir):
    names = set()
    try:
        with open(os.path.join(build_dir, "meson-logs", "testlog.json"), encoding="utf-8") as log:
            for line in log:
                # "project:suite / name", as meson writes it.
                names.add(json.loads(line)["name"].rpartition(" / ")[2])
    except OSError:
        pass
    return names


def main(argv):
    build_dir, out = argv[1], argv[2]
    require = "--require" in argv[3:]
    ran = ran_tests(build_dir)
    summary = summary_values(build_dir)
    missing = [name for name in EXPECTED if name not in ran]
    lines = []
    for name in missing:
        feature = EXPECTED[name]
        why = f"{feature}: {summary[feature]}" if feature and feature in summary else "not registered by this build"
        lines.append(f"not run: {name} ({why})")
    if missing:
        lines.append(f"expected tests not run in {build_dir}: {', '.join(missing)}"
                     + (" (failed: every feature is required here)" if require else ""))
    result = "OK" if not missing else ("FAIL" if require else "SKIP")
    with open(out, "w", encoding="utf-8") as log:
        log.write(json.dumps({"name": "expected tests ran", "result": result, "stdout": "\n".join(lines)}) + "\n")
    print("\n".join(lines) if lines else f"expected tests: all {len(EXPECTED)} ran in {build_dir}")
    return 0 if result != "FAIL" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Prints 'tests: N passed, M failed[, K skipped]' from meson testlog.json files.

meson counts executables; each doctest executable reports its own test cases
('[doctest] test cases: 12 | 11 passed | 1 failed | 0 skipped'), so those
counts are summed. A test without doctest output counts as one case.
Usage: test_summary.py TESTLOG.json...   Exit status 0 when nothing failed.
"""
import json
import re
import sys

DOCTEST = re.compile(r"\[doctest\] test cases:\s*(\d+) \|\s*(\d+) passed \|\s*(\d+) failed \|\s*(\d+) skipped")


def counts_of(entry):
    """(passed, failed, skipped) for one meson test entry."""
    result = entry.get("result", "")
    summaries = DOCTEST.findall(entry.get("stdout", "") or "")
    if summaries and result not in ("TIMEOUT", "ERROR"):
        _, ok, bad, skip = map(int, summaries[-1])
        # doctest counts the cases a -tc filter left out as skipped; a
        # filtered run (the sanitizer builds' subsets) skipped nothing.
        if any(arg.startswith(("-tc=", "--test-case=")) for arg in entry.get("command", [])):
            skip = 0
        # A crash after doctest's summary still fails the binary.
        if result == "FAIL" and bad == 0:
            bad = 1
        return ok, bad, skip
    if result == "SKIP":
        return 0, 0, 1
    if result in ("OK", "EXPECTEDFAIL"):
        return 1, 0, 0
    return 0, 1, 0


def main(log_paths):
    passed = failed = skipped = 0
    for path in log_paths:
        with open(path, encoding="utf-8") as log:
            for line in log:
                ok, bad, skip = counts_of(json.loads(line))
                passed, failed, skipped = passed + ok, failed + bad, skipped + skip
    line = f"tests: {passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

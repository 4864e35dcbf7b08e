#!/usr/bin/env python3
"""Prints 'tests: N passed, M failed[, K skipped]' from meson's testlog.json.

meson counts executables; each doctest executable reports its own test cases
('[doctest] test cases: 12 | 11 passed | 1 failed | 0 skipped'), so those
counts are summed. A test without doctest output counts as one case.
Exit status: 0 when nothing failed.
"""
import json
import re
import sys

DOCTEST = re.compile(r"\[doctest\] test cases:\s*(\d+) \|\s*(\d+) passed \|\s*(\d+) failed \|\s*(\d+) skipped")


def main(log_path):
    passed = failed = skipped = 0
    with open(log_path, encoding="utf-8") as log:
        for line in log:
            entry = json.loads(line)
            result = entry.get("result", "")
            counts = DOCTEST.findall(entry.get("stdout", "") or "")
            if counts and result not in ("TIMEOUT", "ERROR"):
                _, ok, bad, skip = map(int, counts[-1])
                passed, failed, skipped = passed + ok, failed + bad, skipped + skip
                # A crash after doctest's summary still fails the binary.
                if result == "FAIL" and bad == 0:
                    failed += 1
            elif result == "SKIP":
                skipped += 1
            elif result in ("OK", "EXPECTEDFAIL"):
                passed += 1
            else:
                failed += 1
    line = f"tests: {passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

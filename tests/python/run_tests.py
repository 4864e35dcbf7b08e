#!/usr/bin/env python3
"""Runs tests/python/test_*.py with unittest and prints a doctest-style
summary line that scripts/test_summary.py counts:
'[doctest] test cases: N | P passed | F failed | S skipped'."""
import pathlib
import sys
import unittest

here = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(here))
suite = unittest.defaultTestLoader.discover(str(here), pattern="test_*.py", top_level_dir=str(here))
result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
skipped = len(result.skipped)
print(f"python: {sys.executable} {sys.version.split()[0]}")
for test, reason in result.skipped:
    print(f"skipped: {test.id()}: {reason}")
print(f"[doctest] test cases: {result.testsRun} | {result.testsRun - failed - skipped} passed | {failed} failed | "
      f"{skipped} skipped")
sys.exit(0 if failed == 0 else 1)

#!/usr/bin/env python3
"""scripts/expected_tests.py names each test a fully set-up machine runs that
a build did not, with meson's reason, and fails only under --require: run
here on made-up build directories (a testlog.json and meson's log)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(sys.argv.pop(1) if len(sys.argv) > 1 else ".", "scripts", "expected_tests.py")
EXPECTED = ["cuda", "cuda-emulator", "opencl", "opencl-placement", "pjrt", "pjrt-backend", "c-pjrt", "python-system",
            "code-blocks"]


def build_dir(root, ran, summary):
    os.makedirs(os.path.join(root, "meson-logs"))
    with open(os.path.join(root, "meson-logs", "testlog.json"), "w", encoding="utf-8") as log:
        for name in ran:
            log.write(json.dumps({"name": f"backplane:core / {name}", "result": "OK"}) + "\n")
    with open(os.path.join(root, "meson-logs", "meson-log.txt"), "w", encoding="utf-8") as log:
        log.write("backplane 0.1.0\n\n  backplane\n" + "".join(f"    {key:<20}: {value}\n"
                                                            for key, value in summary.items()))
    return root


def check(root, *extra):
    out = os.path.join(root, "expected.json")
    done = subprocess.run([sys.executable, SCRIPT, root, out, *extra], capture_output=True, text=True)
    with open(out, encoding="utf-8") as log:
        return done.returncode, done.stdout, json.loads(log.read())


class ExpectedTestsTest(unittest.TestCase):
    def test_every_expected_test_ran(self):
        with tempfile.TemporaryDirectory() as scratch:
            root = build_dir(os.path.join(scratch, "build"), EXPECTED + ["core"], {})
            code, output, entry = check(root, "--require")
            self.assertEqual((code, entry["result"]), (0, "OK"), output)
            self.assertIn("all 9 ran", output)

    def test_a_missing_suite_is_named_with_meson_s_reason_skipped_here_and_failed_under_require(self):
        with tempfile.TemporaryDirectory() as scratch:
            ran = [name for name in EXPECTED if "pjrt" not in name]
            root = build_dir(os.path.join(scratch, "build"), ran,
                             {"pjrt plugin": "not built: the header is missing", "opencl plugin": "built"})
            code, output, entry = check(root)
            self.assertEqual((code, entry["result"]), (0, "SKIP"), output)
            self.assertIn("not run: pjrt (pjrt plugin: not built: the header is missing)", output)
            self.assertIn("not run: c-pjrt (pjrt plugin: not built: the header is missing)", output)
            self.assertNotIn("opencl", output)
            code, output, entry = check(root, "--require")
            self.assertEqual((code, entry["result"]), (1, "FAIL"), output)
            self.assertIn("expected tests not run in", output)


if __name__ == "__main__":
    unittest.main()

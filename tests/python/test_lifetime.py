"""close() racing calls on the same object from other threads: every call
either completes or raises a clean error naming what was closed; the
interpreter never crashes. The races run in a child interpreter so that a
crash is reported as this test failing, with its signal."""
import os
import subprocess
import sys
import textwrap
import unittest

from support import plugin_dirs

RACES = textwrap.dedent("""
    import struct, sys, threading
    import backplane

    PLUGINS = sys.argv[1].split(__import__("os").pathsep)
    ROUNDS, THREADS = int(sys.argv[2]), 4
    unexpected = []

    def clean_close_error(error):
        # What a call racing close() may raise: the Python wrapper's check
        # or the library's refusal of a destroyed handle.
        text = str(error)
        return isinstance(error, ValueError) and (
            "used after close()" in text or "is not a live handle (destroyed?)" in text
            or "is NULL" in text)

    def race(use, close):
        started = threading.Barrier(THREADS + 1)
        def worker():
            started.wait()
            for _ in range(10000):
                try:
                    use()
                except Exception as error:
                    if not clean_close_error(error):
                        unexpected.append(f"{type(error).__name__}: {error}")
                    return
            unexpected.append("no call saw the close()")
        threads = [threading.Thread(target=worker) for _ in range(THREADS)]
        for thread in threads:
            thread.start()
        started.wait()
        close()
        for thread in threads:
            thread.join()

    tokens_bytes = struct.pack("<256H", *range(256))
    kept = backplane.Runtime(plugin_paths=PLUGINS, ignore_environment=True, skip_default_paths=True)
    for _ in range(ROUNDS):
        runtime = backplane.Runtime(plugin_paths=PLUGINS, ignore_environment=True, skip_default_paths=True)
        tokens = runtime.array(tokens_bytes, "U16", (256,), device="cpu")
        def use_runtime():
            runtime.default_device()
            windows = runtime.take_windows(tokens, [0, 5], 8, "cpu", "int64")
            assert windows.to_bytes()[8:16] == struct.pack("<q", 1)
            runtime.is_available("cpu")
        race(use_runtime, runtime.close)

        array = kept.array(tokens_bytes, "U16", (256,), device="cpu")
        def use_array():
            assert array.to_bytes() == tokens_bytes
            assert array.nbytes == 512
            array.slice(1, 3).close()
        race(use_array, array.close)
        tokens.close()
    print("unexpected:", unexpected[:5])
    sys.exit(1 if unexpected else 0)
""")


class CloseRaceTest(unittest.TestCase):
    def test_close_racing_calls_in_other_threads_never_crashes(self):
        environment = dict(os.environ)
        # A crash in the child must not hang the suite: bounded time.
        child = subprocess.run([sys.executable, "-c", RACES, os.pathsep.join(plugin_dirs()), "150"],
                               env=environment, capture_output=True, text=True, timeout=240)
        self.assertEqual(child.returncode, 0,
                         f"the close() races ended with {child.returncode} (negative: killed by that signal)\n"
                         f"stdout: {child.stdout[-2000:]}\nstderr: {child.stderr[-2000:]}")


if __name__ == "__main__":
    unittest.main()

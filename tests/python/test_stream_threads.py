"""A BatchStream shared by threads: next() from any thread hands each step to
exactly one caller, with the batch that step holds."""
import threading
import unittest

import backplane
from support import isolated_runtime, optional_module

numpy = optional_module("numpy")

STEPS = 300
THREADS = 8


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class StreamThreadsTest(unittest.TestCase):
    def setUp(self):
        self.runtime = isolated_runtime()
        self.tokens = self.runtime.array(numpy.arange(50_000, dtype=numpy.uint16), device="cpu:0")

    def tearDown(self):
        self.runtime.close()

    def stream(self, **options):
        return backplane.batches(self.tokens, 4, 16, device="cpu:0", seed=11, steps=STEPS, **options)

    def test_every_step_goes_to_exactly_one_thread(self):
        for xy in ("copies", "views"):
            with self.subTest(xy=xy):
                expected = sorted(tuple(x[:, 0].tolist()) for x, _ in self.stream())
                self.assertEqual(len(set(expected)), STEPS)  # the steps' batches differ: a repeat would show
                shared = self.stream(xy=xy)
                taken, errors = [[] for _ in range(THREADS)], []
                start = threading.Barrier(THREADS)

                def take(mine):
                    start.wait()
                    try:
                        for x, y in shared:
                            self.assertEqual(x[:, 1:].tolist(), y[:, :-1].tolist())  # this step's own y
                            mine.append(tuple(x[:, 0].tolist()))
                    except Exception as error:  # reported below, with the thread's batches
                        errors.append(error)

                threads = [threading.Thread(target=take, args=(taken[index],)) for index in range(THREADS)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                self.assertEqual(errors, [])
                self.assertEqual(sorted(row for rows in taken for row in rows), expected)
                self.assertEqual(shared.step, STEPS)
                self.assertEqual(shared.stats().steps, STEPS)
                shared.close()


if __name__ == "__main__":
    unittest.main()

"""fork(): what torch's DataLoader(num_workers>0) does on Linux. A child of a
process that has run transfers works on host devices, and a device backend
set up before the fork fails with a clear error, never a hang."""
import os
import select
import tempfile
import threading
import time
import unittest

import backplane
from support import optional_module, plugin_dirs

numpy = optional_module("numpy")
torch = optional_module("torch")
CHILD_TIMEOUT_S = 60


def cpu_runtime(directory, devices=2):
    """cpu with `devices` devices (so cpu:0 -> cpu:1 runs on transfer
    threads) and the simulated accelerator."""
    config = os.path.join(directory, "fork.toml")
    with open(config, "w", encoding="utf-8") as file:
        file.write(f"[backend.cpu]\ndevices = {devices}\n")
    return backplane.Runtime(plugin_paths=plugin_dirs(), config_file=config, ignore_environment=True,
                             skip_default_paths=True)


def run_in_child(function):
    """Runs function() in a forked child; returns (exit code, its output).
    A child that does not finish in time is killed and reported as hung."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into unittest
        os.close(read_end)
        code = 0
        try:
            message = function()
        except BaseException as error:  # every failure must reach the parent as text
            message, code = f"{type(error).__name__}: {error}", 1
        os.write(write_end, str(message).encode())
        os._exit(code)
    os.close(write_end)
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    chunks = []
    while True:
        finished, status = os.waitpid(pid, os.WNOHANG)
        ready, _, _ = select.select([read_end], [], [], 0.05)
        if ready:
            chunk = os.read(read_end, 65536)
            if chunk:
                chunks.append(chunk)
        if finished:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            os.close(read_end)
            raise AssertionError(f"child hung for {CHILD_TIMEOUT_S} s")
    while True:
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode(errors="replace")


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
@unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"), "fork under a preloaded sanitizer runtime")
class ForkTest(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.TemporaryDirectory()
        self.runtime = cpu_runtime(self.scratch.name)
        self.tokens = self.runtime.array(numpy.arange(1 << 22, dtype=numpy.uint16), device="cpu:0")

    def tearDown(self):
        self.runtime.close()
        self.scratch.cleanup()

    def test_a_child_after_large_transfers_works_on_host_devices(self):
        big = self.runtime.array(numpy.ones(16 << 20, dtype=numpy.uint8), device="cpu:0")
        moved = big.device_put("cpu:1").wait()  # a transfer on the transfer threads
        self.assertEqual(moved.device, backplane.Device("cpu", 1))

        def child():
            again = big.device_put("cpu:1").wait()
            batch = self.runtime.take_windows(self.tokens, numpy.array([5, 9]), 4, "cpu:1", "int64").wait()
            total = int(numpy.asarray(again.device_put("cpu:0").wait()).sum())
            return f"{total} {batch.device_put('cpu:0').wait().numpy().tolist()}"

        code, output = run_in_child(child)
        self.assertEqual(code, 0, output)
        self.assertEqual(output, f"{16 << 20} [[5, 6, 7, 8], [9, 10, 11, 12]]")

    def test_a_device_backend_set_up_before_fork_fails_clearly_in_the_child(self):
        on_device = self.runtime.array(numpy.arange(4, dtype=numpy.int32), device="sim")
        self.assertEqual(on_device.to_bytes(), numpy.arange(4, dtype=numpy.int32).tobytes())

        def child():
            self.runtime.array(numpy.arange(4, dtype=numpy.int32), device="sim")
            return "allocated"

        code, output = run_in_child(child)
        self.assertEqual(code, 1, output)
        self.assertIn("UnavailableError", output)
        self.assertIn("before fork()", output)
        self.assertIn("'spawn'", output)

    def test_the_process_default_runtime_works_in_the_child(self):
        backplane.Runtime.default().backends()

        def child():
            runtime = backplane.Runtime.default()
            tokens = runtime.array(numpy.arange(16, dtype=numpy.uint16), device="cpu")
            return runtime.take_windows(tokens, [2], 3, "cpu", "int64").numpy().tolist()

        code, output = run_in_child(child)
        self.assertEqual((code, output), (0, "[[2, 3, 4]]"))

    def test_a_stream_forked_while_another_thread_is_inside_next_refuses_at_once_in_the_child(self):
        # The other thread is inside next() for as long as the test holds it:
        # its conversion (to=, a callable) waits for `release`. No timing.
        inside, release = threading.Event(), threading.Event()

        def convert(array):
            inside.set()
            release.wait(CHILD_TIMEOUT_S)
            return array.numpy()

        stream = backplane.batches(self.tokens, batch_size=2, context=8, to=convert, device="cpu:0",
                                   runtime=self.runtime)
        first = next(stream)  # the stream has run a step before the fork
        self.assertEqual(first[0].shape, (2, 8))
        release.clear()
        inside.clear()
        consumer = threading.Thread(target=lambda: next(stream))
        consumer.start()
        try:
            self.assertTrue(inside.wait(CHILD_TIMEOUT_S), "the consumer thread never reached the conversion")

            def child():
                try:
                    next(stream)
                    return "next() handed out a step in the child"
                except backplane.UnavailableError as error:
                    refused = str(error)
                return f"{refused} | state at step {stream.state_dict()['step']}"

            code, output = run_in_child(child)
        finally:
            release.set()
            consumer.join(CHILD_TIMEOUT_S)
        self.assertEqual(code, 0, output)
        self.assertIn("made in the parent process before fork()", output)
        self.assertIn("make a new stream here (from state() if it should continue)", output)
        self.assertRegex(output, r"\| state at step \d+$")
        stream.close()


class _Windows:
    """A map-style dataset whose items are take_windows batches."""

    def __init__(self, runtime, tokens):
        self.runtime, self.tokens = runtime, tokens

    def __len__(self):
        return 8

    def __getitem__(self, index):
        batch = self.runtime.take_windows(self.tokens, [index, index + 100], 5, "cpu:1", "int64")
        return torch.from_dlpack(batch.device_put("cpu:0").wait())


@unittest.skipIf(torch is None or numpy is None, "torch and numpy are needed (Debian: python3-torch)")
@unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"), "fork under a preloaded sanitizer runtime")
class DataLoaderTest(unittest.TestCase):
    def test_dataloader_workers_forked_after_transfers_sample_batches(self):
        with tempfile.TemporaryDirectory() as scratch:
            runtime = cpu_runtime(scratch)
            tokens = runtime.array(numpy.arange(1 << 20, dtype=numpy.uint16), device="cpu:0")
            runtime.array(numpy.ones(8 << 20, dtype=numpy.uint8), device="cpu:0").device_put("cpu:1").wait()
            loader = torch.utils.data.DataLoader(_Windows(runtime, tokens), batch_size=None, num_workers=2,
                                                 multiprocessing_context="fork", timeout=CHILD_TIMEOUT_S)
            batches = [batch.tolist() for batch in loader]
            self.assertEqual(len(batches), 8)
            for index, batch in enumerate(batches):
                self.assertEqual(batch, [list(range(index, index + 5)), list(range(index + 100, index + 105))])
            runtime.close()


if __name__ == "__main__":
    unittest.main()

"""Default-device scopes under asyncio, generators, threads and misuse."""
import asyncio
import contextlib
import threading
import unittest

import backplane
from support import isolated_runtime

CPU = backplane.Device("cpu", 0)
SIM = backplane.Device("sim", 0)


class ScopeTest(unittest.TestCase):
    def setUp(self):
        self.runtime = isolated_runtime()
        self.automatic = self.runtime.default_device().device  # sim:0, the highest priority

    def tearDown(self):
        self.runtime.close()

    def default(self):
        return self.runtime.default_device().device

    def test_asyncio_tasks_each_see_their_own_scope(self):
        seen = {}

        async def worker(name, selector, entered, other_entered):
            with self.runtime.default_device_scope(selector):
                entered.set()
                await other_entered.wait()  # both scopes are open now
                seen[name] = self.default()
                await asyncio.sleep(0)
                seen[name + " after yield"] = self.default()

        async def main():
            first, second = asyncio.Event(), asyncio.Event()
            await asyncio.gather(worker("a", "cpu", first, second), worker("b", "sim", second, first))
            seen["outside"] = self.default()

        asyncio.run(main())
        self.assertEqual(seen["a"], CPU)
        self.assertEqual(seen["a after yield"], CPU)
        self.assertEqual(seen["b"], SIM)
        self.assertEqual(seen["b after yield"], SIM)
        self.assertEqual(seen["outside"], self.automatic)

    def test_a_task_created_inside_a_scope_inherits_it(self):
        async def child():
            return self.default()

        async def main():
            with self.runtime.default_device_scope("cpu"):
                return await asyncio.create_task(child())

        self.assertEqual(asyncio.run(main()), CPU)

    def test_a_generator_does_not_leak_its_scope_to_the_consumer(self):
        def generator():
            with self.runtime.default_device_scope("cpu"):
                yield self.default()  # inside: its own scope
                yield self.default()

        items = generator()
        self.assertEqual(next(items), CPU)
        self.assertEqual(self.default(), self.automatic)  # the consumer, while the generator is suspended
        with self.runtime.default_device_scope("sim"):
            self.assertEqual(next(items), CPU)  # the generator's own scope is innermost for its code
            self.assertEqual(self.default(), SIM)
        items.close()  # exits the generator's scope after the consumer's: no error, both gone
        self.assertEqual(self.default(), self.automatic)

    def test_a_consumer_scope_applies_inside_a_generator_without_one(self):
        def generator():
            yield self.default()

        with self.runtime.default_device_scope("cpu"):
            self.assertEqual(next(generator()), CPU)

    def test_contextmanager_helpers_and_exit_stacks_apply_to_their_with_block(self):
        @contextlib.contextmanager
        def on_cpu():
            with self.runtime.default_device_scope("cpu"):
                yield

        with on_cpu():
            self.assertEqual(self.default(), CPU)
        self.assertEqual(self.default(), self.automatic)
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.runtime.default_device_scope("cpu"))
            self.assertEqual(self.default(), CPU)
        self.assertEqual(self.default(), self.automatic)

    def test_threads_are_independent(self):
        seen = {}
        entered, checked = threading.Event(), threading.Event()

        def other():
            entered.wait()
            seen["other thread"] = self.default()
            checked.set()

        thread = threading.Thread(target=other)
        thread.start()
        with self.runtime.default_device_scope("cpu"):
            entered.set()
            checked.wait(30)
        thread.join()
        self.assertEqual(seen["other thread"], self.automatic)

    def test_out_of_order_exit_names_both_scopes_and_pops_nothing(self):
        outer = self.runtime.default_device_scope("cpu")
        inner = self.runtime.default_device_scope("sim")
        outer.__enter__()
        inner.__enter__()
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            outer.__exit__(None, None, None)
        message = caught.exception.message
        self.assertIn("default-device scope cpu:0", message)
        self.assertIn("while scope sim:0", message)
        self.assertIn("test_scopes.py", message)  # where each was entered
        self.assertIn("exit scopes innermost first", message)
        self.assertEqual(self.default(), SIM)  # nothing was popped
        inner.__exit__(None, None, None)
        self.assertEqual(self.default(), CPU)
        outer.__exit__(None, None, None)
        self.assertEqual(self.default(), self.automatic)

    def test_exiting_twice_or_reentering_is_an_error(self):
        scope = self.runtime.default_device_scope("cpu")
        with scope:
            with self.assertRaises(backplane.InvalidArgumentError) as caught:
                scope.__enter__()
            self.assertIn("already open", caught.exception.message)
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            scope.__exit__(None, None, None)
        self.assertIn("without being entered", caught.exception.message)
        with scope:  # reusable once exited
            self.assertEqual(self.default(), CPU)

    def test_a_scope_selects_the_device_of_calls_without_one(self):
        tokens = self.runtime.array(bytes(range(64)), "U8", device="cpu")
        with self.runtime.default_device_scope("cpu"):
            batch = self.runtime.take_windows(tokens, [0, 8], 4)
        self.assertEqual(batch.device, CPU)
        self.assertEqual(self.runtime.take_windows(tokens, [0], 4).device, self.automatic)

    def test_a_bad_selector_fails_when_the_scope_is_made(self):
        with self.assertRaises(backplane.NotFoundError) as caught:
            self.runtime.default_device_scope("cdua")
        self.assertIn("cdua", caught.exception.message)


if __name__ == "__main__":
    unittest.main()

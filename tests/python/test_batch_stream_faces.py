"""One message per bad argument on every face: each case of
tests/batches/bad_stream_arguments.json fed to batches() raises exactly the
status and message the file names, the ones the C++ BatchStream and the C
bp_batch_stream_create give (tests/batches/test_stream_faces.cpp checks
those against the same file). Also: what Python alone must turn away, and
the names it shares with the other faces."""
import json
import math
import os
import pathlib
import tempfile
import unittest

import backplane
from support import optional_module, plugin_dirs

numpy = optional_module("numpy")

SOURCE = pathlib.Path(os.environ.get("BACKPLANE_TEST_SOURCE_DIR") or pathlib.Path(__file__).resolve().parents[2])
CASES = SOURCE / "tests" / "batches" / "bad_stream_arguments.json"


def nested_state(field, depth):
    return ('{"format": "backplane.batch_stream", "version": 1, "%s": ' % field) + "[" * depth + "]" * depth + "}"


@unittest.skipIf(numpy is None, "numpy is not installed for this interpreter")
class BatchStreamFacesTest(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.TemporaryDirectory()
        config = os.path.join(self.scratch.name, "cpu.toml")
        with open(config, "w", encoding="utf-8") as file:
            file.write("[backend.cpu]\ndevices = 4\n")
        self.runtime = backplane.Runtime(plugin_paths=plugin_dirs(), config_file=config, ignore_environment=True,
                                         skip_default_paths=True)
        self.file = json.loads(CASES.read_text(encoding="utf-8"))
        tokens = self.file["tokens"]
        self.tokens = self.runtime.array(numpy.arange(tokens, dtype=numpy.uint16) % 65521, device="cpu:0")

    def tearDown(self):
        self.runtime.close()
        self.scratch.cleanup()

    def stream(self, options, state=None):
        options = dict(options)
        if "weight_schedule" in options:
            options["weights"] = [(step, weights) for step, weights in options.pop("weight_schedule")]
        if "layout" in options:
            layout = options.pop("layout")
            (rank,) = layout["ranks"]
            options["layout"] = backplane.Layout(dict(layout["mesh"]), batch=tuple(layout["batch"]),
                                                 sequence=tuple(layout.get("sequence", ())), rank=rank,
                                                 sequence_order=layout.get("sequence_order", "contiguous"))
            if isinstance(options.get("devices"), list) and len(options["devices"]) == 1:
                options["devices"] = options["devices"][0]  # a layout's one device, as batches() takes it
        return backplane.batches(self.tokens, options.pop("batch_size"), options.pop("context"),
                                 device=options.pop("devices"), dtype=options.pop("dtype", None), state=state,
                                 **options)

    def state_of(self, case, defaults):
        if "state_text" in case:
            return case["state_text"]
        if "state_nested" in case:
            return nested_state(case["state_nested"]["field"], case["state_nested"]["depth"])
        if "saved_with" in case:
            with self.stream({**defaults, **case["saved_with"]}) as saved:
                state = saved.state_dict()
            state["step"] = case.get("saved_step", 0)
            return state
        if "state_step" in case:
            with self.stream({**defaults, **case["options"]}) as saved:
                state = saved.state_dict()
            state["step"] = case["state_step"]
            return state
        return None

    def test_every_bad_argument_reads_as_the_other_faces_read_it(self):
        defaults = self.file["defaults"]
        self.assertGreaterEqual(len(self.file["cases"]), 20)
        for case in self.file["cases"]:
            if "not_python" in case:
                continue  # an argument batches() does not take: the case says why
            with self.subTest(case=json.dumps(case)[:120]):
                state = self.state_of(case, defaults)
                with self.assertRaises(backplane.Error) as caught:
                    self.stream({**defaults, **case["options"]}, state)
                self.assertEqual(caught.exception.status_name, case["status"])
                self.assertEqual(caught.exception.message, case["message"])

    def test_the_zeros_c_reads_as_defaults_are_refused_in_the_cores_words(self):
        # 0 is "the default" in the C struct, a value here: refused as the
        # C++ face refuses it.
        defaults = self.file["defaults"]
        for option, message in (("prefetch", "BatchStream: prefetch must be in [1, 64], got 0"),
                                ("world_size", "BatchStream: world_size must be at least 1, got 0")):
            with self.subTest(option=option):
                with self.assertRaises(backplane.InvalidArgumentError) as caught:
                    self.stream({**defaults, option: 0})
                self.assertEqual(caught.exception.message, message)

    def test_values_no_c_field_holds_are_refused_here_naming_the_argument(self):
        defaults = self.file["defaults"]
        cases = [
            (dict(batch_size=2**63),
             "batches(): batch_size must be a positive int below 2**63, got 9223372036854775808"),
            (dict(rank=-2**63 - 1), "batches(): rank must be an int of at least -2**63, got -9223372036854775809"),
            (dict(prefetch=2**64), "batches(): prefetch must be an int in [1, 64], got 18446744073709551616"),
            (dict(context="16"), "batches(): context must be a positive int, got '16'"),
            (dict(weights=[True]), "batches(): weights[0] = True is not a number"),
            (dict(weights=[(0, [1.0]), (5, ["x"])]), "batches(): weights[1][1][0] = 'x' is not a number"),
            (dict(weights=[(0, [1.0]), (5, "1")]), "batches(): weights[1] = (5, '1') is not (step, [weight, ...])"),
            (dict(schedule=[(0, 4)]), "batches(): schedule[0] = (0, 4) is not (step, batch_size, context)"),
            (dict(schedule=[(0, 4, 1.5)]), "batches(): schedule[0] context must be a positive int, got 1.5"),
        ]
        for options, message in cases:
            with self.subTest(options=options):
                with self.assertRaises(backplane.InvalidArgumentError) as caught:
                    self.stream({**defaults, **options})
                self.assertEqual(caught.exception.message, message)

    def test_an_empty_schedule_is_none_and_then_batch_size_and_context_are_needed(self):
        with self.assertRaises(TypeError) as caught:
            backplane.batches(self.tokens, device="cpu:1", schedule=[])
        self.assertIn("needs batch_size and context, or schedule=", str(caught.exception))
        with backplane.batches(self.tokens, 4, 15, device="cpu:1", schedule=[]) as stream:
            self.assertEqual(len(stream.windows(0)), 4)
            self.assertIn("B=4 T=15", repr(stream))
        with backplane.batches(self.tokens, 4, 15, device="cpu:1", schedule=[(0, 4, 15), (9, 8, 15)]) as stream:
            self.assertIn("B=4 T=15 at first (a schedule)", repr(stream))

    def test_a_weight_beyond_a_double_is_infinite_and_the_core_refuses_it(self):
        second = self.runtime.array(numpy.arange(1000, dtype=numpy.uint16), device="cpu:0")
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            backplane.batches([self.tokens, second], 4, 15, device="cpu:1", weights=[10**400, 1])
        self.assertEqual(caught.exception.message, "BatchStream: weight inf (of source 0) is not a finite number >= 0")

    def test_a_deep_state_is_a_short_error_never_a_crash(self):
        text = nested_state("weights", 100_000)
        with self.assertRaises(backplane.InvalidFileError) as caught:
            backplane.batches(self.tokens, 4, 15, device="cpu:1", state=text)
        self.assertEqual(caught.exception.message, 'batch stream state: field "weights" nests deeper than 16 levels')
        deep = []
        for _ in range(100_000):
            deep = [deep]
        with self.assertRaises(backplane.InvalidArgumentError) as caught:
            backplane.batches(self.tokens, 4, 15, device="cpu:1", state={"weights": deep})
        self.assertEqual(caught.exception.message, "batches(): state is not JSON-serialisable: it nests too deeply")

    def test_the_step_and_the_seed_come_from_the_library(self):
        with backplane.batches(self.tokens, 4, 15, device="cpu:1", seed=11) as first:
            for _ in range(3):
                next(first)
            state = first.state_dict()
            self.assertEqual(first.step, 3)
            # seed=None: the state's seed, which the library takes from the state.
            with backplane.batches(self.tokens, 4, 15, device="cpu:1", state=state) as resumed:
                self.assertEqual(resumed.step, 3)
                self.assertEqual(resumed.state_dict()["seed"], 11)
                self.assertEqual(resumed.windows(5), first.windows(5))

    def test_one_name_per_concept(self):
        self.assertIs(backplane.BatchStats, backplane.BatchStreamStats)
        self.assertIs(backplane.batches, backplane.BatchStream)
        from backplane import _batches, _lib
        self.assertEqual(_batches.MAX_PREFETCH, _lib.BP_BATCH_STREAM_MAX_PREFETCH)
        with backplane.batches(self.tokens, 4, 15, device="cpu:1", steps=1) as stream:
            list(stream)
            self.assertIsInstance(stream.stats(), backplane.BatchStreamStats)

    def test_the_last_step_is_handed_out_then_the_stream_stops(self):
        from backplane import _lib_gen
        last = _lib_gen.BP_BATCH_STREAM_LAST_STEP
        self.assertEqual(last, 2**63 - 129)
        with backplane.batches(self.tokens, 4, 15, device="cpu:1") as stream:
            state = stream.state_dict()
        state["step"] = last
        with backplane.batches(self.tokens, 4, 15, device="cpu:1", state=state) as stream:
            self.assertEqual(stream.step, last)
            x, _ = next(stream)
            self.assertEqual([int(row[0]) for row in x], [window.start for window in stream.windows(last)])
            with self.assertRaises(backplane.OutOfRangeError) as caught:
                next(stream)
            self.assertEqual(caught.exception.message,
                             f"BatchStream: step {last} was the last a stream hands out (2^63 - 129)")


if __name__ == "__main__":
    unittest.main()

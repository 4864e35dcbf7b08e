"""The story's training loop with tracing on, on cpu, opencl:0 and cuda:0
(over the libcuda.so.1 emulator): the file is a valid Chrome trace whose
tracks Perfetto can draw, it holds the discovery, allocation, transfer and
wait events with the bytes the stream reports, and `backplane trace summary`
agrees with it.

Each case runs in a child interpreter: the emulator must be on
LD_LIBRARY_PATH when the process starts, and the trace must start before the
runtime discovers its plugins."""
import collections
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

EMULATOR = os.environ.get("BACKPLANE_TEST_CUDA_EMULATOR_DIR", "")
TOOL = os.environ.get("BACKPLANE_TEST_TOOL", "")
HERE = os.path.dirname(os.path.abspath(__file__))
BATCH, CONTEXT, STEPS = 8, 64, 24

# The story's loop: a stream of int64 batches onto the target while a "model"
# computes for a millisecond a step. Prints the stream's stats as JSON.
LOOP = """
import json, sys, time
import backplane
from support import plugin_dirs
path, target, batch, context, steps = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
with backplane.trace(path):
    runtime = backplane.Runtime(plugin_paths=plugin_dirs(), ignore_environment=True, skip_default_paths=True)
    if not runtime.is_available(target.split(":")[0]):
        print(json.dumps({"skip": [(b.name, b.status, b.reason) for b in runtime.backends()]}))
        sys.exit(0)

    class Whole:  # the batch as the Array itself: no framework needed on any device
        def __init__(self, array):
            self.array = array

        def __getitem__(self, key):
            return self.array

    tokens = runtime.array(bytes(range(256)) * 512, "U16", (65536,), device="cpu")
    stream = backplane.batches(tokens, batch, context, device=target, seed=3, steps=steps, runtime=runtime, to=Whole,
                               xy="views")
    for x, y in stream:
        time.sleep(0.001)
    stats = stream.stats()
    stream.close()
    print(json.dumps({"steps": stats.steps, "bytes": stats.bytes}))
    del tokens, stream, x, y
    runtime.close()
"""

REQUIRED = ("name", "cat", "ph", "ts", "pid", "tid", "args")


def complete_events(trace):
    return [event for event in trace["traceEvents"] if event["ph"] == "X"]


def overlapping(events):
    """Pairs of complete events on one track that overlap without nesting,
    which Perfetto cannot draw. Times are microseconds with three decimals."""
    slack = 0.002
    found = []
    by_track = collections.defaultdict(list)
    for event in events:
        by_track[(event["pid"], event["tid"])].append(event)
    for track in by_track.values():
        track.sort(key=lambda event: (event["ts"], -event["dur"]))
        open_events = []
        for event in track:
            end = event["ts"] + event["dur"]
            while open_events and open_events[-1]["ts"] + open_events[-1]["dur"] <= event["ts"] + slack:
                open_events.pop()
            if open_events and end > open_events[-1]["ts"] + open_events[-1]["dur"] + slack:
                found.append((open_events[-1], event))
            open_events.append(event)
    return found


@unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"), "a child interpreter under a preloaded sanitizer runtime")
class TracedStoryTest(unittest.TestCase):
    def run_story(self, target, extra_environment=None):
        directory = tempfile.mkdtemp()
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", directory], check=False))
        path = os.path.join(directory, "story.json")
        environment = dict(os.environ, **(extra_environment or {}))
        environment["PYTHONPATH"] = os.pathsep.join(
            [HERE] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
        result = subprocess.run([sys.executable, "-c", LOOP, path, target, str(BATCH), str(CONTEXT), str(STEPS)],
                                env=environment, capture_output=True, text=True, timeout=180)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        stats = json.loads(result.stdout.strip().splitlines()[-1])
        if "skip" in stats:
            self.skipTest(f"{target} is not available here: {stats['skip']}")
        with open(path, encoding="utf-8") as file:
            trace = json.load(file)  # valid JSON, or this raises
        return path, trace, stats

    def check_story(self, target):
        path, trace, stats = self.run_story(target, self.environment_for(target))
        events = trace["traceEvents"]
        for event in events:
            for field in REQUIRED:
                self.assertIn(field, event, f"{field} missing from {event}")
            if event["ph"] == "X":
                self.assertGreaterEqual(event["dur"], 0, event)
        self.assertEqual(overlapping(complete_events(trace)), [], "complete events overlap on a track")
        self.assertEqual(trace["otherData"]["dropped_events"], 0)

        def named(category, name=None):
            return [event for event in complete_events(trace)
                    if event["cat"] == category and (name is None or event["name"] == name)]

        backend = target.split(":")[0]
        discovered = {event["name"]: event["args"] for event in named("discovery")}
        self.assertIn(f"discover {backend}", discovered)
        self.assertEqual(discovered[f"discover {backend}"]["status"], "available")
        self.assertIn("discover cpu", discovered)

        allocations = [event for event in named("allocation", "allocate") if event["args"]["device"] == target]
        self.assertTrue(allocations, f"no allocation on {target}")
        self.assertTrue(all(event["args"]["bytes"] > 0 for event in allocations), allocations)

        self.assertEqual(stats["steps"], STEPS)
        waits = named("batch_stream", "wait")
        steps = named("batch_stream", "step")
        self.assertEqual(sorted(event["args"]["step"] for event in waits), list(range(STEPS)))
        self.assertEqual(len(steps), STEPS)
        span_us = max(e["ts"] + e["dur"] for e in steps) - min(e["ts"] for e in steps)
        self.assertGreater(span_us, STEPS * 1000 * 0.9, "each step sleeps a millisecond")
        gathers = named("batch_stream", "gather")
        self.assertEqual(len(gathers), len({event["args"]["step"] for event in gathers}))
        # Bytes as stats() counts them: what a step hands out (int64), not what it read (uint16).
        self.assertTrue(all(event["args"]["bytes"] == stats["bytes"] // STEPS for event in gathers), gathers[:2])
        handed_out_gathers = [event for event in gathers if event["args"]["step"] < STEPS]
        self.assertEqual(sum(event["args"]["bytes"] for event in handed_out_gathers), stats["bytes"])
        # Every event of the stream names it, and the thread that gathers is named for it.
        self.assertEqual({event["args"]["stream"] for event in named("batch_stream")}, {gathers[0]["args"]["stream"]})
        tracks = {event["tid"]: event["args"]["name"] for event in events if event["name"] == "thread_name"}
        producer = tracks[gathers[0]["tid"]]
        self.assertTrue(producer.startswith(f"batch stream {gathers[0]['args']['stream']} producer ("), producer)
        transfers = named("batch_stream", "transfer")
        if backend != "cpu":  # on a host device the gather is the transfer
            per_step = stats["bytes"] // STEPS
            self.assertEqual(per_step, BATCH * (CONTEXT + 1) * 8)  # one [B, T+1] int64 array; x, y are views
            handed_out = [event for event in transfers if event["args"]["step"] < STEPS]
            self.assertEqual(len(handed_out), STEPS)
            self.assertTrue(all(event["args"]["bytes"] == per_step for event in handed_out), handed_out[:2])
            self.assertTrue(all(0 < event["dur"] < span_us for event in handed_out))
        self.check_summary(path, trace)

    def check_summary(self, path, trace):
        if not TOOL:
            return
        result = subprocess.run([TOOL, "trace", "summary", "--json", path], capture_output=True, text=True,
                                timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        summary = json.loads(result.stdout)
        expected = collections.defaultdict(lambda: {"events": 0, "time_us": 0.0, "bytes": 0})
        for event in complete_events(trace):
            if event["cat"] in ("discovery", "batch_stream"):
                continue
            args = event["args"]
            device = args.get("device", args.get("target", "host"))
            figures = expected[(device, event["cat"])]
            figures["events"] += 1
            figures["time_us"] += event["dur"]
            figures["bytes"] += args.get("bytes", 0)
        for (device, category), figures in expected.items():
            reported = summary["devices"][device][category]
            self.assertEqual(reported["events"], figures["events"], (device, category))
            self.assertEqual(reported["bytes"], figures["bytes"], (device, category))
            self.assertAlmostEqual(reported["time_us"], figures["time_us"], delta=0.01 * figures["events"] + 1e-6)
        waits = sum(e["dur"] for e in complete_events(trace) if e["cat"] == "batch_stream" and e["name"] == "wait")
        steps = [e for e in complete_events(trace) if e["cat"] == "batch_stream" and e["name"] == "step"]
        span = max(e["ts"] + e["dur"] for e in steps) - min(e["ts"] for e in steps)
        self.assertAlmostEqual(summary["batch_stream"]["data_stall_fraction"], waits / span, places=3)
        # One stream, so its own row says the same.
        self.assertEqual(len(summary["streams"]), 1)
        (row,) = summary["streams"].values()
        self.assertAlmostEqual(row["data_stall_fraction"], waits / span, places=3)
        self.assertEqual(row["step"]["events"], len(steps))

    def environment_for(self, target):
        if not target.startswith("cuda"):
            return {}
        return {"LD_LIBRARY_PATH": os.pathsep.join(
            [EMULATOR] + [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]),
            "BP_FAKE_CUDA_DEVICES": "1"}

    def test_cpu(self):
        self.check_story("cpu:0")

    def test_opencl(self):
        self.check_story("opencl:0")

    @unittest.skipUnless(EMULATOR and os.path.isdir(EMULATOR), "the cuda plugin and its driver emulator were not built")
    def test_cuda_emulated(self):
        self.check_story("cuda:0")


if __name__ == "__main__":
    unittest.main()

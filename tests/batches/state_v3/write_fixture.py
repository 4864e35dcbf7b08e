"""Writes tests/batches/state_v3: a version-3 batch stream state with a
schedule (a batch-size ramp, then a longer context), a weight schedule and
documents, saved at step 1500 (past an entry of each schedule, before the
context change) by the backplane of the day version 3 was the newest
(2026-12), and the windows that stream drew at chosen steps, so that every
later backplane is tested to resume it to the same windows (the growth rule
of docs/batch-stream.md). Never rerun it to "update" the fixture: a change in
its output is the regression the fixture exists to catch. It ran once, from
a build:

    PYTHONPATH=python BACKPLANE_LIBRARY=build/core/libbackplane.so \\
        python3 tests/batches/state_v3/write_fixture.py

The sources are the version-1 fixture's (tokens_0, tokens_1) and the
documents the version-2 fixture's (every multiple of 37 in source 0, of 23
in source 1), which tests/batches/test_state_fixtures.cpp computes the same
way."""
import json
import os
import struct

import backplane

HERE = os.path.dirname(os.path.abspath(__file__))
OPTIONS = {"schedule": [[0, 6, 31], [50, 8, 31], [2000, 8, 63]], "seed": 31337,
           "weights": [[0, [0.6, 0.4]], [1000, [0.3, 0.7]]]}
STEPS = [5, 49, 50, 999, 1000, 1500, 1501, 1999, 2000, 1000000, 123456789]
SAVED_AT = 1500  # past the schedule's entry at 50 and the weights' at 1000


def tokens_0():
    """20,000 U16 tokens: i mod 65521."""
    return struct.pack("<20000H", *(index % 65521 for index in range(20000)))


def tokens_1():
    """7,000 U16 tokens: i * 40503 mod 65536."""
    return struct.pack("<7000H", *((index * 40503) % 65536 for index in range(7000)))


def main():
    runtime = backplane.Runtime()
    sources = [runtime.array(tokens_0(), "U16", (20000,), device="cpu:0"),
               runtime.array(tokens_1(), "U16", (7000,), device="cpu:0")]
    stream = backplane.BatchStream(sources, device="cpu:0", runtime=runtime,
                                   documents=[list(range(0, 20000, 37)), list(range(0, 7000, 23))],
                                   schedule=[tuple(entry) for entry in OPTIONS["schedule"]], seed=OPTIONS["seed"],
                                   weights=[(step, weights) for step, weights in OPTIONS["weights"]])
    for _ in range(SAVED_AT):
        next(iter(stream))
    state = stream.state_dict()
    windows = {str(step): [[window.source, window.start] for window in stream.windows(step)] for step in STEPS}
    stream.close()
    with open(os.path.join(HERE, "state.json"), "w", encoding="utf-8") as file:
        json.dump(state, file, sort_keys=True)
        file.write("\n")
    with open(os.path.join(HERE, "windows.json"), "w", encoding="utf-8") as file:
        file.write('{\n "options": ' + json.dumps(OPTIONS) + ',\n "documents": {"every": [37, 23]},\n "windows": {\n')
        file.write(",\n".join(f'  "{step}": ' + json.dumps(drawn, separators=(",", ":"))
                               for step, drawn in windows.items()))
        file.write("\n }\n}\n")


if __name__ == "__main__":
    main()

"""Writes tests/batches/state_v2: a version-2 batch stream state with
documents, saved by the backplane of the day version 2 was the newest
(2026-12), and the windows that stream drew at chosen steps, so that every
later backplane is tested to resume it to the same windows (the growth rule
of docs/batch-stream.md). Never rerun it to "update" the fixture: a change in
its output is the regression the fixture exists to catch. It ran once, from
a build:

    PYTHONPATH=python BACKPLANE_LIBRARY=build/core/libbackplane.so \\
        python3 tests/batches/state_v2/write_fixture.py

The sources are the functions tokens_0 and tokens_1 below (the version-1
fixture's), and the documents start at every multiple of 37 in source 0 and
of 23 in source 1 (starts_0, starts_1), which tests/batches/test_state_fixtures.cpp
computes the same way."""
import json
import os
import struct

import backplane

HERE = os.path.dirname(os.path.abspath(__file__))
OPTIONS = {"batch_size": 6, "context": 31, "seed": 424242, "weights": [0.6, 0.4]}
STEPS = [5, 6, 7, 1000, 1000000, 123456789]


def tokens_0():
    """20,000 U16 tokens: i mod 65521."""
    return struct.pack("<20000H", *(index % 65521 for index in range(20000)))


def tokens_1():
    """7,000 U16 tokens: i * 40503 mod 65536."""
    return struct.pack("<7000H", *((index * 40503) % 65536 for index in range(7000)))


def starts_0():
    return list(range(0, 20000, 37))


def starts_1():
    return list(range(0, 7000, 23))


def main():
    runtime = backplane.Runtime()
    sources = [runtime.array(tokens_0(), "U16", (20000,), device="cpu:0"),
               runtime.array(tokens_1(), "U16", (7000,), device="cpu:0")]
    stream = backplane.BatchStream(sources, device="cpu:0", runtime=runtime, documents=[starts_0(), starts_1()],
                                   **OPTIONS)
    for _ in range(5):
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

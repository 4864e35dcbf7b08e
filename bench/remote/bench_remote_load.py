#!/usr/bin/env python3
"""load_tokens from an s3:// object against curl reading the same object from
the same server, in the same run (the baseline): one GET of the whole
object, and 8 ranged GETs of it at once (what load_tokens does).

    python3 tests/remote/object_servers.py -- python3 bench/remote/bench_remote_load.py [--mib 256] [--repeats 3]

Runs inside tests/remote/object_servers.py (a SeaweedFS server on
127.0.0.1), with the package on PYTHONPATH and BACKPLANE_LIBRARY set, as the
python test suites do. Prints each figure's best of --repeats and the ratio
of load_tokens to each baseline (goal: >= 0.9 of 8 ranged GETs).
"""
from __future__ import annotations

import argparse
import os
import pathlib
import socket
import subprocess
import tempfile
import time
from typing import Callable, List

import numpy

import backplane


def put(key: str, path: str) -> None:
    control = int(os.environ["BACKPLANE_TEST_S3_CONTROL"])
    with socket.create_connection(("127.0.0.1", control)) as connection:
        connection.sendall(f"put {key} {path}\n".encode())
        answer = connection.makefile().readline().strip()
    if answer != "ok":
        raise SystemExit(f"bench_remote_load: putting {key}: {answer}")


def curl(url: str, byte_range: str = "") -> subprocess.Popen[bytes]:
    user = f"{os.environ['AWS_ACCESS_KEY_ID']}:{os.environ['AWS_SECRET_ACCESS_KEY']}"
    command = ["curl", "--silent", "--fail", "--output", "/dev/null", "--aws-sigv4", "aws:amz:us-east-1:s3",
               "--user", user, url]
    if byte_range:
        command += ["--range", byte_range]
    return subprocess.Popen(command)


def best(repeats: int, run: Callable[[], None]) -> float:
    times: List[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    endpoint = os.environ["BACKPLANE_TEST_S3_ENDPOINT"]
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    size = args.mib << 20
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "tokens.u16")
        numpy.random.default_rng(0).integers(0, 50257, size=size // 2, dtype=numpy.uint16).tofile(path)
        put("bench/tokens.u16", path)
        local = backplane.load_tokens(pathlib.Path(path), dtype="uint16")
        url = f"{endpoint}/tokens/bench/tokens.u16"

        def whole() -> None:
            if curl(url).wait() != 0:
                raise SystemExit("bench_remote_load: curl failed")

        def ranged() -> None:
            part = (size + 7) // 8
            processes = [curl(url, f"{begin}-{min(begin + part, size) - 1}") for begin in range(0, size, part)]
            if any(process.wait() != 0 for process in processes):
                raise SystemExit("bench_remote_load: curl failed")

        def load() -> None:
            array = backplane.load_tokens("s3://tokens/bench/tokens.u16", dtype="uint16")
            assert len(array) == len(local)

        loaded = backplane.load_tokens("s3://tokens/bench/tokens.u16", dtype="uint16")
        assert isinstance(loaded, backplane.Array)
        assert (loaded.numpy() == local.numpy()).all(), "the object's tokens differ from the file's"
        del loaded
        times = {"curl, one GET": best(args.repeats, whole), "curl, 8 ranged GETs": best(args.repeats, ranged),
                 "load_tokens(s3://)": best(args.repeats, load)}
    ours = times["load_tokens(s3://)"]
    print(f"{args.mib} MiB object, SeaweedFS on 127.0.0.1, best of {args.repeats}")
    for name, seconds in times.items():
        print(f"  {name:22s} {seconds:7.3f} s  {args.mib / 1024 / seconds:6.2f} GiB/s  "
              f"load_tokens speed / this one's: {seconds / ours:5.2f}")


if __name__ == "__main__":
    main()

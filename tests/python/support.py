"""Shared helpers: an isolated runtime over the build tree's plugins, and
the launch of a job of worker processes."""
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile

import backplane


def plugin_dirs():
    value = os.environ.get("BACKPLANE_TEST_PLUGIN_DIRS", "")
    return [path for path in value.split(os.pathsep) if path]


def isolated_runtime():
    """The build's plugins and the fixture plugins (sim outranks cpu), no
    environment, no config file."""
    return backplane.Runtime(plugin_paths=plugin_dirs(), ignore_environment=True, skip_default_paths=True)


def free_port():
    """A TCP port on 127.0.0.1 that was free just now, for a coordinator or a
    process group's rendezvous."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def optional_module(name):
    try:
        return __import__(name)
    except ImportError:
        return None


def plugin_runtime(directory, *plugins, config=""):
    """A runtime over the given plugin files only, with `config` as its
    config file (written into `directory`), no environment."""
    path = os.path.join(directory, "plugins.toml")
    with open(path, "w", encoding="utf-8") as file:
        file.write(config)
    return backplane.Runtime(plugin_paths=list(plugins), config_file=path, ignore_environment=True,
                             skip_default_paths=True)


def sim_runtime(directory):
    """The cpu plugin and the simulated accelerator with two devices. The
    simulator declares DLPack's kDLExtDev (12), so device-memory exchange
    runs without a GPU and without the core knowing the backend by name."""
    return plugin_runtime(directory, os.environ["BACKPLANE_TEST_CPU_PLUGIN"],
                          os.environ["BACKPLANE_TEST_SIM_PLUGIN"], config="[backend.sim]\ndevices = 2\n")


HERE = pathlib.Path(__file__).resolve().parent


def worker_environment(drop=(), **values):
    """os.environ for a worker script of this directory: this directory on
    PYTHONPATH (for support.py), the variables in `drop` unset (a launcher's
    RANK, say), and `values` set."""
    environment = dict(os.environ, **values)
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(HERE)] + [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path])
    for name in drop:
        environment.pop(name, None)
    return environment


def run_processes(worker, count, arguments, environment, timeout_s, what="process"):
    """Runs `count` copies of the worker script at once, process i with
    arguments(i, out) where `out` is the JSON file it must write, and
    returns what each wrote. A process that fails or does not finish in
    timeout_s raises AssertionError with its output; none outlives the
    call."""
    with tempfile.TemporaryDirectory() as scratch:
        outs = [os.path.join(scratch, f"process{index}.json") for index in range(count)]
        logs = [open(os.path.join(scratch, f"process{index}.log"), "w+", encoding="utf-8") for index in range(count)]
        processes = [subprocess.Popen([sys.executable, str(HERE / worker)] + arguments(index, outs[index]),
                                      env=environment, stdout=logs[index], stderr=subprocess.STDOUT)
                     for index in range(count)]
        try:
            for index, process in enumerate(processes):
                try:
                    code = process.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    code = None
                logs[index].seek(0)
                output = logs[index].read()
                if code is None:
                    raise AssertionError(f"{what} {index} did not finish in {timeout_s} s:\n{output}")
                if code != 0:
                    raise AssertionError(f"{what} {index} exited {code}:\n{output}")
        finally:
            for process in processes:
                if process.poll() is None:
                    process.kill()
                    process.wait()
            for log in logs:
                log.close()
        reports = []
        for out in outs:
            with open(out, encoding="utf-8") as file:
                reports.append(json.load(file))
        return reports

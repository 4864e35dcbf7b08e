"""Shared helpers: an isolated runtime over the build tree's plugins."""
import os
import socket

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

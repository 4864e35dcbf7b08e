"""Shared helpers: an isolated runtime over the build tree's plugins."""
import os

import backplane


def plugin_dirs():
    value = os.environ.get("BACKPLANE_TEST_PLUGIN_DIRS", "")
    return [path for path in value.split(os.pathsep) if path]


def isolated_runtime():
    """The build's plugins and the fixture plugins (sim outranks cpu), no
    environment, no config file."""
    return backplane.Runtime(plugin_paths=plugin_dirs(), ignore_environment=True, skip_default_paths=True)


def optional_module(name):
    try:
        return __import__(name)
    except ImportError:
        return None


def fake_cuda_runtime(directory):
    """A runtime whose "cuda" backend is the simulated accelerator built under
    that name (tests/plugins/fake_cuda) with two devices, ahead of the real
    cuda plugin, so the kDLCUDA paths run without a GPU. Its config file is
    written into `directory`."""
    config = os.path.join(directory, "fake_cuda.toml")
    with open(config, "w", encoding="utf-8") as file:
        file.write("[backend.cuda]\ndevices = 2\n")
    return backplane.Runtime(plugin_paths=[os.environ["BACKPLANE_TEST_FAKE_CUDA_DIR"]] + plugin_dirs(),
                             config_file=config, ignore_environment=True, skip_default_paths=True)

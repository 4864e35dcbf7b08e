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

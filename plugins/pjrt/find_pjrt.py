#!/usr/bin/env python3
"""Finds files of PJRT wheels installed for this Python, without importing them.

    find_pjrt.py --header
        The pjrt_c_api.h that the xla-cpu-pjrt wheel ships
        (xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h). The pjrt plugin is
        built against it; no copy of the header lives in the repository.
        Meson runs this with the Python that runs the build (pip's isolated
        build environment, or python3 for scripts/build), whose packages
        are the ones that count.
    find_pjrt.py --requirement
        The pinned requirement that installs that wheel ("xla-cpu-pjrt==0.0.1"),
        as pyproject.toml's build requirements write it: the one place the
        version is written, which scripts/build installs from.
    find_pjrt.py --library DISTRIBUTION
        The PJRT plugin library (.so) that DISTRIBUTION installed under its
        jax_plugins/ or xla_plugins/ package ("xla-cpu-pjrt",
        "jax-cuda12-pjrt"), then its version on a second line.

Only the distribution's metadata and its list of files are read (importlib.metadata),
never the package's code. Prints the path and exits 0, or prints why not to
stderr and exits 1.
"""
import os
import re
import sys
from importlib import metadata

HEADER = "xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h"
HEADER_DISTRIBUTION = "xla-cpu-pjrt"
PLUGIN_PACKAGES = ("jax_plugins/", "xla_plugins/")
PYPROJECT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "pyproject.toml")


def pinned_requirement():
    """The header distribution's exact pin in pyproject.toml, or None. A
    pattern, not a TOML parser: tomllib is Python 3.11's, and the build's
    Python may be older."""
    try:
        with open(PYPROJECT, encoding="utf-8") as file:
            text = file.read()
    except OSError:
        return None
    found = re.search(r'"(' + re.escape(HEADER_DISTRIBUTION) + r'==[^";\s]+)', text)
    return found.group(1) if found else None


def distribution(name):
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


def installed_file(found, wanted):
    """The absolute path of the first of the distribution's files that `wanted` accepts."""
    for file in found.files or ():
        if wanted(file.as_posix()):
            path = found.locate_file(file)
            if path.is_file():
                return str(path.resolve())
    return None


def fail(message):
    print(f"find_pjrt.py: {message}", file=sys.stderr)
    return 1


def emit(text):
    """Prints `text`; a reader that stops after the first line is no error."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # what is left to flush at exit goes nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def main(arguments):
    if arguments == ["--header"]:
        found = distribution(HEADER_DISTRIBUTION)
        if found is None:
            pin = pinned_requirement() or HEADER_DISTRIBUTION
            return fail(f"the {HEADER_DISTRIBUTION} wheel, which ships pjrt_c_api.h, is not installed for "
                        f"{sys.executable} (install it: {sys.executable} -m pip install --no-deps '{pin}')")
        path = installed_file(found, lambda name: name == HEADER)
        if path is None:
            return fail(f"{HEADER_DISTRIBUTION} {found.version} lists no {HEADER}")
        return emit(f"{path}\n")
    if arguments == ["--requirement"]:
        pin = pinned_requirement()
        if pin is None:
            return fail(f"{os.path.normpath(PYPROJECT)} pins no {HEADER_DISTRIBUTION}==VERSION")
        return emit(f"{pin}\n")
    if len(arguments) == 2 and arguments[0] == "--library":
        found = distribution(arguments[1])
        if found is None:
            return fail(f"the {arguments[1]} wheel is not installed for {sys.executable}")
        path = installed_file(found, lambda name: name.startswith(PLUGIN_PACKAGES) and name.endswith(".so"))
        if path is None:
            return fail(f"{arguments[1]} {found.version} installs no .so under jax_plugins/ or xla_plugins/")
        return emit(f"{path}\n{found.version}\n")
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Every module of python/backplane is in python/meson.build's install list:
the tests import the package from the checkout, so a module left out of the
list passes them all and is missing only from the wheel and the install
(`import backplane` then fails with ModuleNotFoundError)."""
import os
import re
import sys
import unittest

ROOT = sys.argv.pop(1) if len(sys.argv) > 1 else "."


class PythonSourcesListedTest(unittest.TestCase):
    def test_every_module_of_the_package_is_installed(self):
        package = os.path.join(ROOT, "python", "backplane")
        modules = {name for name in os.listdir(package) if name.endswith(".py")}
        with open(os.path.join(ROOT, "python", "meson.build"), encoding="utf-8") as build:
            listed = set(re.findall(r"'backplane/([A-Za-z0-9_]+\.py)'", build.read()))
        self.assertEqual(sorted(modules - listed), [], "in python/backplane but not in python/meson.build's list")
        self.assertEqual(sorted(listed - modules), [], "listed in python/meson.build but not in python/backplane")


if __name__ == "__main__":
    unittest.main()

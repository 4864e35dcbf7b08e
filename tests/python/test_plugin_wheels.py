"""Plugins found in installed Python packages, without running them: the
site directories a runtime scans (sys.path by default), what each backend
says of where it came from, and, end to end, real wheels pip installs into
a fresh venv: one built offline from the pyproject.toml recipe of
docs/plugin-authors.md, one written as a wheel file holding a broken entry
point, a PJRT plugin package and a package whose __init__ must never run."""
import base64
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

import numpy

import backplane
from backplane import __main__ as backplane_main

from support import plugin_dirs

SOURCE = pathlib.Path(os.environ["BACKPLANE_TEST_SOURCE_DIR"])
SIM_PLUGIN = pathlib.Path(os.environ["BACKPLANE_TEST_SIM_PLUGIN"])
FIXTURES = pathlib.Path(SIM_PLUGIN).parent
FAKE_PJRT = FIXTURES / "pjrt" / "backplane-pjrt.so"  # the stand-in pjrt adapter


def fake_site(root):
    """A site directory as pip leaves it: a plugin package (a copy of the
    simulated accelerator), one entry point whose package is missing, and a
    PJRT plugin package under jax_plugins/."""
    site = pathlib.Path(root) / "site"
    info = site / "vendor-2.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vendor\nVersion: 2.1\n")
    (info / "entry_points.txt").write_text("[backplane.plugins]\nvendor = vendor_plugins\ngone = vendor_gone\n")
    (site / "vendor_plugins").mkdir()
    shutil.copy(SIM_PLUGIN, site / "vendor_plugins" / "backplane-sim.so")
    return site


class SiteDirectoryTest(unittest.TestCase):
    def test_python_paths_are_scanned_and_each_backend_says_where_it_came_from(self):
        with tempfile.TemporaryDirectory() as root:
            site = fake_site(root)
            with backplane.Runtime(ignore_environment=True, skip_default_paths=True, python_paths=[site]) as runtime:
                backends = {backend.name: backend for backend in runtime.backends()}
                self.assertEqual(backends["sim"].status, "available")
                self.assertEqual(backends["sim"].origin_detail, "vendor 2.1 (entry point backplane.plugins:vendor)")
                self.assertEqual(backends["sim"].plugin_path, str(site / "vendor_plugins" / "backplane-sim.so"))
                self.assertEqual(backends["sim"].library, "")
                self.assertEqual(backends["gone"].status, "failed")
                self.assertIn("package vendor_gone is not installed", backends["gone"].reason)
                self.assertEqual(runtime.device_info("sim:0").memory_kinds, ["device", "pinned_host"])

    def test_the_default_is_sys_path_unless_only_named_plugins_are_asked_for(self):
        with tempfile.TemporaryDirectory() as root:
            site = str(fake_site(root))
            sys.path.append(site)
            try:
                with backplane.Runtime(ignore_environment=True) as runtime:
                    self.assertIn("vendor 2.1 (entry point backplane.plugins:vendor)",
                                  [backend.origin_detail for backend in runtime.backends()])
                with backplane.Runtime(ignore_environment=True, skip_default_paths=True) as runtime:
                    self.assertEqual(runtime.backends(), [])
                with backplane.Runtime(ignore_environment=True, python_paths=[]) as runtime:
                    self.assertNotIn("sim", [backend.name for backend in runtime.backends()])
            finally:
                sys.path.remove(site)

    def test_memory_kinds_and_an_empty_origin_for_the_search_path_plugins(self):
        with backplane.Runtime(plugin_paths=plugin_dirs(), ignore_environment=True, skip_default_paths=True,
                               python_paths=[]) as runtime:
            cpu = [backend for backend in runtime.backends() if backend.name == "cpu"][0]
            self.assertEqual(cpu.origin_detail, "")
            self.assertEqual(runtime.device_info("cpu:0").memory_kinds, ["host"])


def docs_recipe():
    """The pyproject.toml of docs/plugin-authors.md, as written there."""
    text = (SOURCE / "docs" / "plugin-authors.md").read_text(encoding="utf-8")
    section = text[text.index("## Shipping a plugin as a Python wheel"):]
    return re.search(r"```toml\n(.*?)```", section, re.S).group(1)


def write_wheel(directory, name, version, files, entry_points):
    """A wheel file, as the wheel format has it: the files, METADATA, WHEEL,
    entry_points.txt and a RECORD with each file's hash."""
    path = pathlib.Path(directory) / f"{name}-{version}-py3-none-any.whl"
    dist_info = f"{name}-{version}.dist-info"
    contents = dict(files)
    contents[f"{dist_info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    contents[f"{dist_info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    contents[f"{dist_info}/entry_points.txt"] = entry_points.encode()
    record = []
    for member, data in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{member},sha256={digest},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    contents[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(path, "w") as wheel:
        for member, data in contents.items():
            wheel.writestr(member, data)
    return path


def can_build_offline():
    try:
        import build  # noqa: F401
        import setuptools  # noqa: F401
        import wheel  # noqa: F401
    except ImportError as missing:
        return f"{missing.name} is not installed (scripts/pip-test-packages installs it)"
    return None


class InstalledWheelTest(unittest.TestCase):
    """pip installs the wheels into a fresh venv; the venv's `python -m
    backplane info` and `import backplane` list them."""

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.TemporaryDirectory()
        root = pathlib.Path(cls.work.name)
        cls.ran = root / "sneaky-ran"
        sneaky_init = b"import os\nopen(os.environ['SNEAKY_RAN'], 'w').close()\n"
        wheels = [write_wheel(root, "sneaky", "0.1", {
            "sneaky/__init__.py": sneaky_init,
            "sneaky/backplane-sim.so": SIM_PLUGIN.read_bytes(),
            "sneaky/backplane-pjrt.so": FAKE_PJRT.read_bytes(),
            "jax_plugins/fakepjrt/__init__.py": sneaky_init,
            "jax_plugins/fakepjrt/fake_pjrt_plugin.so": b"reason=a PJRT plugin from a wheel\ndevices=2\n",
        }, "[backplane.plugins]\nsneaky = sneaky\nmissing = not_installed_package\n"
           "[jax_plugins]\nfakepjrt = jax_plugins.fakepjrt\n")]
        cls.built = can_build_offline()
        if cls.built is None:
            project = root / "backplane-mine"
            (project / "backplane_mine").mkdir(parents=True)
            (project / "pyproject.toml").write_text(docs_recipe())
            (project / "backplane_mine" / "__init__.py").write_bytes(sneaky_init)
            shutil.copy(FIXTURES / "backplane-unavailable.so", project / "backplane_mine" / "backplane-unavailable.so")
            subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(root / "dist"),
                            str(project)], check=True, capture_output=True)
            wheels += sorted((root / "dist").glob("*.whl"))
        cls.venv = root / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(cls.venv)], check=True, capture_output=True)
        cls.python = str(cls.venv / "bin" / "python")
        subprocess.run([cls.python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                        "--disable-pip-version-check"] + [str(wheel) for wheel in wheels],
                       check=True, capture_output=True)
        cls.environment = {key: value for key, value in os.environ.items() if not key.startswith("BACKPLANE_")
                           and key not in ("PJRT_NAMES_AND_LIBRARY_PATHS", "PYTHONPATH")}
        # backplane and its one dependency, NumPy, as this interpreter has them
        # (the venv has neither: pip installs only the wheels, offline).
        parents = {str(pathlib.Path(module.__file__).resolve().parent.parent) for module in (backplane, numpy)}
        cls.environment.update({
            "PYTHONPATH": os.pathsep.join(sorted(parents)),
            "BACKPLANE_LIBRARY": backplane.library_path(),
            "BACKPLANE_TOOL": backplane_main.tool_path(),
            "XDG_CONFIG_HOME": str(root / "no-config"),
            "SNEAKY_RAN": str(cls.ran),
        })

    @classmethod
    def tearDownClass(cls):
        cls.work.cleanup()

    def run_in_venv(self, *arguments):
        return subprocess.run([self.python] + list(arguments), env=self.environment, capture_output=True, text=True,
                              timeout=120)

    def test_python_m_backplane_info_lists_the_wheels_with_their_distribution(self):
        info = self.run_in_venv("-m", "backplane", "info")
        self.assertEqual(info.returncode, 0, info.stderr)
        self.assertIn(f"python packages: asked {self.python}:", info.stdout)
        self.assertRegex(info.stdout, r"\n  sim +available")
        self.assertIn("from: sneaky 0.1 (entry point backplane.plugins:sneaky)", info.stdout)
        self.assertRegex(info.stdout, r"\n  missing +failed")
        self.assertIn("package not_installed_package is not installed", info.stdout)
        self.assertRegex(info.stdout, r"\n  pjrt_fakepjrt +available")
        self.assertIn("a PJRT plugin from a wheel", info.stdout)
        self.assertIn("from: sneaky 0.1 (entry point jax_plugins:fakepjrt)", info.stdout)
        self.assertIn("pjrt_fakepjrt:1", info.stdout)
        if self.built is None:
            self.assertRegex(info.stdout, r"\n  unavailable +unavailable")
            self.assertIn("from: backplane-mine 1.0.0 (entry point backplane.plugins:mine)", info.stdout)
        self.assertFalse(self.ran.exists(), "a package's __init__.py ran")

    def test_import_backplane_lists_a_broken_entry_as_failed_and_runs_no_package_code(self):
        program = ("import backplane\n"
                   "for backend in backplane.backends():\n"
                   "    print(backend.name, backend.status, backend.origin_detail, sep='|')\n")
        listed = self.run_in_venv("-c", program)
        self.assertEqual(listed.returncode, 0, listed.stderr)
        rows = {line.split("|")[0]: line.split("|")[1:] for line in listed.stdout.splitlines()}
        self.assertEqual(rows["missing"][0], "failed")
        self.assertEqual(rows["sim"], ["available", "sneaky 0.1 (entry point backplane.plugins:sneaky)"])
        self.assertEqual(rows["pjrt_fakepjrt"][0], "available")
        self.assertFalse(self.ran.exists(), "a package's __init__.py ran")

    def test_building_the_docs_recipe_offline(self):
        if self.built is not None:
            self.skipTest(f"the wheel of docs/plugin-authors.md cannot be built offline: {self.built}")
        listed = self.run_in_venv("-m", "pip", "show", "backplane-mine")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertIn("Version: 1.0.0", listed.stdout)


if __name__ == "__main__":
    unittest.main()

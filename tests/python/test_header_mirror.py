"""_lib_gen.py's ctypes declarations are generated from backplane.h
(python/generate_lib.py), checked here against the header itself: the file
is what the header generates now, every prototype has the header's number of
parameters and compatible types, every struct has the C compiler's size and
field offsets, and mypy --strict refuses a wrong call into the library."""
import ctypes
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import unittest.mock

from backplane import _lib, _lib_gen

SOURCE = pathlib.Path(os.environ.get("BACKPLANE_TEST_SOURCE_DIR") or pathlib.Path(__file__).resolve().parents[2])
INCLUDE = SOURCE / "core" / "include"
HEADER = INCLUDE / "backplane" / "backplane.h"

# C scalar types and the one ctypes type each crosses as.
SCALARS = {
    "bp_status": ctypes.c_int32, "int32_t": ctypes.c_int32, "bp_dtype": ctypes.c_int32,
    "bp_device_kind": ctypes.c_int32, "bp_device_source": ctypes.c_int32, "int": ctypes.c_int,
    "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64, "uint32_t": ctypes.c_uint32,
    "size_t": ctypes.c_size_t, "double": ctypes.c_double,
}


def header_functions():
    """{name: (result C type, [parameter C types])} for each BACKPLANE_API function."""
    text = re.sub(r"/\*.*?\*/", " ", HEADER.read_text(encoding="utf-8"), flags=re.S)
    found = {}
    for match in re.finditer(r"BACKPLANE_API\s+([^;]*?)\b(bp_\w+)\s*\(([^)]*)\)\s*;", text):
        result, name, parameters = match.groups()
        types = []
        for parameter in parameters.split(","):
            parameter = " ".join(parameter.split())
            if parameter in ("", "void"):
                continue
            # Drop the parameter's name: what follows the last '*' or space.
            parameter = re.sub(r"\s*\b\w+$", "", parameter) if re.search(r"[\w*]\s+\w+$", parameter) else parameter
            types.append(" ".join(parameter.replace("*", " * ").split()))
        found[name] = (" ".join(result.replace("*", " * ").split()), types)
    return found


def compatible(c_type, ctypes_type):
    """Whether `ctypes_type` may stand for the C type `c_type` in a call."""
    if c_type == "void":
        return ctypes_type is None
    if "*" not in c_type:
        base = c_type.replace("const ", "")
        if base in SCALARS:
            return ctypes_type is SCALARS[base]
        # A callback typedef crosses as a CFUNCTYPE.
        return isinstance(ctypes_type, type) and issubclass(ctypes_type, ctypes._CFuncPtr)
    if ctypes_type in (ctypes.c_void_p, ctypes.c_char_p):
        return True  # any pointer may cross as an address; char* as text
    pointee = c_type.rsplit("*", 1)[0].strip()
    if not (isinstance(ctypes_type, type) and issubclass(ctypes_type, ctypes._Pointer)):
        return False
    target = ctypes_type._type_
    if issubclass(target, ctypes.Structure):
        return pointee.replace("const ", "").strip() == target.__name__
    return compatible(pointee, target)


class HeaderMirrorTest(unittest.TestCase):
    def test_every_prototype_matches_the_header(self):
        header = header_functions()
        self.assertGreater(len(header), 80, "the header was read")
        self.assertEqual(sorted(_lib_gen.PROTOTYPES), sorted(header), "one prototype per function of the header")
        for name, (arguments, result) in _lib_gen.PROTOTYPES.items():
            with self.subTest(function=name):
                c_result, c_parameters = header[name]
                self.assertEqual(len(arguments), len(c_parameters), f"{name}: {c_parameters}")
                for index, (argument, c_type) in enumerate(zip(arguments, c_parameters)):
                    self.assertTrue(compatible(c_type, argument), f"{name} parameter {index}: {c_type} as {argument}")
                self.assertTrue(compatible(c_result, result), f"{name} result: {c_result} as {result}")

    def test_the_type_check_refuses_a_wrong_type(self):
        self.assertFalse(compatible("int64_t", ctypes.c_int32))
        self.assertFalse(compatible("const bp_device *", ctypes.POINTER(_lib_gen.bp_memory_stats)))
        self.assertFalse(compatible("size_t *", ctypes.POINTER(ctypes.c_int32)))
        self.assertTrue(compatible("bp_runtime * *", ctypes.POINTER(ctypes.c_void_p)))

    @unittest.skipIf(shutil.which("cc") is None, "no C compiler")
    @unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"), "the compiler would run under the preloaded sanitizer")
    def test_every_mirrored_struct_has_the_compilers_layout(self):
        structs = [value for name, value in vars(_lib_gen).items()
                   if name.startswith("bp_") and isinstance(value, type) and issubclass(value, ctypes.Structure)]
        self.assertEqual(len(structs), len(re.findall(r"typedef struct \w+ \{", HEADER.read_text(encoding="utf-8"))))
        lines = ["#include <backplane/backplane.h>", "#include <stddef.h>", "#include <stdio.h>", "int main(void) {"]
        for struct in structs:
            lines.append(f'  printf("{struct.__name__} size %zu\\n", sizeof({struct.__name__}));')
            for field, *_ in struct._fields_:
                lines.append(f'  printf("{struct.__name__}.{field} %zu\\n", offsetof({struct.__name__}, {field}));')
        lines += ["  return 0;", "}"]
        with tempfile.TemporaryDirectory() as directory:
            source = pathlib.Path(directory) / "layout.c"
            source.write_text("\n".join(lines) + "\n", encoding="utf-8")
            program = pathlib.Path(directory) / "layout"
            subprocess.run(["cc", "-std=c11", f"-I{INCLUDE}", str(source), "-o", str(program)], check=True,
                           capture_output=True, text=True)
            output = subprocess.run([str(program)], check=True, capture_output=True, text=True).stdout
        compiler = dict(line.rsplit(" ", 1) for line in output.splitlines())
        for struct in structs:
            self.assertEqual(int(compiler[f"{struct.__name__} size"]), ctypes.sizeof(struct), struct.__name__)
            for field, *_ in struct._fields_:
                self.assertEqual(int(compiler[f"{struct.__name__}.{field}"]), getattr(struct, field).offset,
                                 f"{struct.__name__}.{field}")


class LoadingTest(unittest.TestCase):
    class Library:
        """A library that exports every function but `lacking`."""

        def __init__(self, lacking):
            self._name = "/old/libbackplane.so"
            for name in set(_lib_gen.PROTOTYPES) - set(lacking):
                setattr(self, name, unittest.mock.Mock())

    def test_a_library_without_a_function_of_the_header_is_refused_naming_it(self):
        with self.assertRaises(ImportError) as raised:
            _lib._declare(self.Library(["bp_trace_stop", "bp_default_device_describe"]))
        message = str(raised.exception)
        self.assertIn("/old/libbackplane.so lacks bp_trace_stop:", message)
        self.assertNotIn("bp_default_device_describe", message)

    def test_the_optional_functions_may_be_missing(self):
        library = self.Library(_lib.OPTIONAL)
        self.assertIs(_lib._declare(library), library)
        self.assertEqual(library.bp_take_windows.argtypes, _lib_gen.PROTOTYPES["bp_take_windows"][0])
        self.assertIs(library.bp_version.restype, ctypes.c_char_p)


GENERATOR = SOURCE / "python" / "generate_lib.py"


class GeneratedModuleTest(unittest.TestCase):
    def generate(self, header_text):
        with tempfile.TemporaryDirectory() as directory:
            header = pathlib.Path(directory) / "backplane.h"
            output = pathlib.Path(directory) / "_lib_gen.py"
            header.write_text(header_text, encoding="utf-8")
            run = subprocess.run([sys.executable, str(GENERATOR), "--header", str(header), "--output", str(output)],
                                 capture_output=True, text=True)
            return run, (output.read_text(encoding="utf-8") if output.exists() else "")

    def test_the_committed_module_is_what_the_header_generates(self):
        run = subprocess.run([sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)

    def test_the_check_names_a_stale_module(self):
        with tempfile.TemporaryDirectory() as directory:
            stale = pathlib.Path(directory) / "_lib_gen.py"
            stale.write_text(pathlib.Path(_lib_gen.__file__).read_text(encoding="utf-8").replace(
                "bp_take_windows", "bp_take_window"), encoding="utf-8")
            run = subprocess.run([sys.executable, str(GENERATOR), "--check", "--output", str(stale)],
                                 capture_output=True, text=True)
        self.assertEqual(run.returncode, 1)
        self.assertIn(f"{stale} is not what", run.stderr)
        self.assertIn("run python3 python/generate_lib.py", run.stderr)

    def test_a_new_function_in_the_header_gets_a_prototype_and_a_typed_method(self):
        header = HEADER.read_text(encoding="utf-8").replace(
            "#ifdef __cplusplus\n}", "BACKPLANE_API bp_status bp_new(bp_runtime* runtime, const int64_t* values, "
            "size_t count, bp_device* out);\n#ifdef __cplusplus\n}")
        run, text = self.generate(header)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn('"bp_new": ([ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(bp_device)], '
                      "ctypes.c_int32)", text)
        self.assertIn("def bp_new(self, runtime: VoidPointer, values: VoidPointer, count: int, "
                      "out: Pointer[bp_device], /) -> int: ...", text)

    def test_a_struct_field_pointing_to_arrays_of_numbers_is_a_typed_pointer(self):
        # bp_batch_stream_options.document_starts: one int64_t array per source.
        header = HEADER.read_text(encoding="utf-8").replace(
            "#ifdef __cplusplus\n}", "typedef struct bp_new { size_t struct_size; const int64_t* const* starts; "
            "const double* const* weights; } bp_new;\n#ifdef __cplusplus\n}")
        run, text = self.generate(header)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn('("starts", ctypes.POINTER(ctypes.POINTER(ctypes.c_int64))),', text)
        self.assertIn('("weights", ctypes.POINTER(ctypes.POINTER(ctypes.c_double))),', text)
        starts = _lib_gen.bp_batch_stream_options.document_starts
        self.assertEqual(starts.size, ctypes.sizeof(ctypes.c_void_p))

    def test_a_declaration_it_cannot_read_is_an_error_naming_it(self):
        header = HEADER.read_text(encoding="utf-8").replace(
            "#ifdef __cplusplus\n}", "BACKPLANE_API bp_status bp_odd(long double value);\n#ifdef __cplusplus\n}")
        run, _ = self.generate(header)
        self.assertEqual(run.returncode, 1)
        self.assertIn("'long double'", run.stderr)

    @unittest.skipIf(subprocess.run([sys.executable, "-m", "mypy", "--version"], capture_output=True).returncode != 0,
                     "mypy is not installed for this interpreter")
    def test_mypy_refuses_a_wrong_call_into_the_library(self):
        # _lib_gen.py on its own (it needs only ctypes), so that mypy reads
        # neither the package nor NumPy's stubs.
        program = "\n".join([
            "import ctypes",
            "from _lib_gen import Library, bp_device, bp_memory_stats",
            "def calls(lib: Library, handle: ctypes.c_void_p) -> None:",
            "    device = bp_device()",
            "    lib.bp_take_windows(handle, handle, 0, 1, 8, ctypes.byref(device), 5, ctypes.byref(handle))",
            "    lib.bp_take_windows(handle, handle, 0, 1, 8, ctypes.byref(device), 5)",
            "    lib.bp_device_resolve(handle, 'cpu', ctypes.byref(device))",
            "    lib.bp_memory_stats_get(handle, bp_memory_stats(), None)",
        ]) + "\n"
        with tempfile.TemporaryDirectory() as directory:
            shutil.copy(_lib_gen.__file__, directory)
            source = pathlib.Path(directory) / "calls.py"
            source.write_text(program, encoding="utf-8")
            cache = str(pathlib.Path(directory) / "cache")
            run = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", cache, "calls.py",
                                  "_lib_gen.py"], capture_output=True, text=True, cwd=directory)
        errors = [line for line in run.stdout.splitlines() if ": error:" in line]
        self.assertEqual([line.split(":")[:2] for line in errors],
                         [["calls.py", "6"], ["calls.py", "7"], ["calls.py", "8"]], run.stdout)
        self.assertIn('Too few arguments for "bp_take_windows" of "Library"', errors[0])
        self.assertIn('Argument 2 to "bp_device_resolve" of "Library" has incompatible type "str"', errors[1])
        self.assertIn('Argument 2 to "bp_memory_stats_get" of "Library" has incompatible type "bp_memory_stats"',
                      errors[2])

if __name__ == "__main__":
    unittest.main()

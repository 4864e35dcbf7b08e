"""_lib.py's ctypes declarations are a mirror of backplane.h, checked here
against the header itself: every prototype it declares has the header's
number of parameters and compatible types, and every struct it mirrors has
the C compiler's size and field offsets."""
import ctypes
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import unittest

from backplane import _lib

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
        declared = dict(_lib._PROTOTYPES, **_lib._OPTIONAL_PROTOTYPES)
        for name, (arguments, result) in declared.items():
            with self.subTest(function=name):
                self.assertIn(name, header, f"{name} is declared in _lib.py but not in backplane.h")
                c_result, c_parameters = header[name]
                self.assertEqual(len(arguments), len(c_parameters), f"{name}: {c_parameters}")
                for index, (argument, c_type) in enumerate(zip(arguments, c_parameters)):
                    self.assertTrue(compatible(c_type, argument), f"{name} parameter {index}: {c_type} as {argument}")
                self.assertTrue(compatible(c_result, result), f"{name} result: {c_result} as {result}")

    def test_the_type_check_refuses_a_wrong_type(self):
        self.assertFalse(compatible("int64_t", ctypes.c_int32))
        self.assertFalse(compatible("const bp_device *", ctypes.POINTER(_lib.bp_memory_stats)))
        self.assertFalse(compatible("size_t *", ctypes.POINTER(ctypes.c_int32)))
        self.assertTrue(compatible("bp_runtime * *", ctypes.POINTER(ctypes.c_void_p)))

    @unittest.skipIf(shutil.which("cc") is None, "no C compiler")
    @unittest.skipIf(os.environ.get("BACKPLANE_TEST_SANITIZER"), "the compiler would run under the preloaded sanitizer")
    def test_every_mirrored_struct_has_the_compilers_layout(self):
        structs = [value for name, value in vars(_lib).items()
                   if name.startswith("bp_") and isinstance(value, type) and issubclass(value, ctypes.Structure)]
        self.assertGreaterEqual(len(structs), 8)
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


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/env python3
"""Writes python/backplane/_lib_gen.py from core/include/backplane/backplane.h:
the C API's constants, structs, callback types and ctypes prototypes, and
`Library`, a Protocol with one typed method per function, so that mypy
--strict checks every call into the library.

    python/generate_lib.py           rewrite _lib_gen.py
    python/generate_lib.py --check   fail (naming the file) when it is stale

The header is read as written: its declarations follow a few shapes
(`typedef struct X {...} X;`, `typedef struct X X;`, `typedef R (*X)(...);`,
`BACKPLANE_API R name(...);`, `#define NAME ((type)N)`), and anything else
that looks like a declaration is an error here, never skipped.

How a C parameter crosses (the struct fields follow the same rules, except
that a pointer to numbers, or to pointers to numbers, stays a typed POINTER
there, read by index):
- a handle (a struct the header does not define, void) is a c_void_p;
- a const pointer to numbers or pointers is an input array, a pointer before
  a `capacity` parameter is a buffer the caller fills, and `char *` is a
  buffer too: each is a c_void_p, so a NumPy array's address passes as it is;
- a pointer to a pointer to numbers (`const int64_t **`) receives the
  address of numbers the library owns: POINTER(c_void_p);
- `const char **` followed by a `size_t *` is text with a size (it may hold
  NUL bytes): POINTER(c_void_p), read with ctypes.string_at; a struct's
  `const char *` field with a `<field>_size` sibling likewise is a c_void_p.
"""
from __future__ import annotations

import argparse
import pathlib
import re
import sys
from typing import Dict, List, NamedTuple, Tuple

ROOT = pathlib.Path(__file__).resolve().parents[1]
HEADER = ROOT / "core" / "include" / "backplane" / "backplane.h"
OUTPUT = ROOT / "python" / "backplane" / "_lib_gen.py"

# C scalar types: (ctypes name, Python type a call takes and returns).
SCALARS = {
    "int32_t": ("ctypes.c_int32", "int"), "int64_t": ("ctypes.c_int64", "int"),
    "uint32_t": ("ctypes.c_uint32", "int"), "uint64_t": ("ctypes.c_uint64", "int"),
    "size_t": ("ctypes.c_size_t", "int"), "int": ("ctypes.c_int", "int"),
    "double": ("ctypes.c_double", "float"),
}
C_LIMITS = {"UINT64_MAX": 2**64 - 1}


class Declared(NamedTuple):
    """One parameter or field: its C type, normalised, and its name."""
    c_type: str
    name: str


class HeaderError(Exception):
    pass


def _normalise(c_type: str) -> str:
    return " ".join(c_type.replace("*", " * ").split())


def _declared(text: str) -> Declared:
    """`const char* const* names` -> Declared('const char * const *', 'names')."""
    match = re.fullmatch(r"(.*?[\w*\s])\s*\b(\w+)", " ".join(text.split()))
    if not match or not match.group(1).strip():
        raise HeaderError(f"cannot read the declaration {text!r}")
    return Declared(_normalise(match.group(1)), match.group(2))


class Header:
    """The declarations of backplane.h, by kind."""

    def __init__(self, text: str) -> None:
        self.constants: Dict[str, int] = {}
        self.scalars: Dict[str, str] = {}  # typedef name -> its scalar C type
        self.opaque: List[str] = []
        self.structs: Dict[str, List[Declared]] = {}
        self.arrays: Dict[Tuple[str, str], str] = {}  # (struct, field) -> its extent's name
        self.callbacks: Dict[str, Tuple[str, List[Declared]]] = {}
        self.functions: Dict[str, Tuple[str, List[Declared]]] = {}
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        for name, value in re.findall(r"^#define\s+(BP_\w+)\s+(.+?)\s*$", text, flags=re.M):
            number = re.fullmatch(r"\(\(\w+\)\s*(-?\d+)\)|(-?\d+)|(UINT64_MAX)", value)
            if number is None:
                raise HeaderError(f"#define {name} {value}: not a number this generator knows")
            self.constants[name] = (C_LIMITS[number.group(3)] if number.group(3)
                                    else int(number.group(1) or number.group(2)))
        body = re.sub(r"^\s*#.*$", " ", text, flags=re.M)
        body = re.sub(r'extern\s+"C"\s*\{', " ", body)
        body = re.sub(r"^\s*\}\s*$", " ", body, flags=re.M)  # extern "C"'s closing brace
        # A struct's body holds ';' itself: read the structs first.
        struct = r"typedef\s+struct\s+(bp_\w+)\s*\{(.*?)\}\s*(bp_\w+)\s*;"
        for match in re.finditer(struct, body, flags=re.S):
            self._struct(*match.groups())
        for statement in (" ".join(part.split()) for part in re.sub(struct, " ", body, flags=re.S).split(";")):
            if statement:
                self._statement(statement)

    def _struct(self, name: str, fields: str, alias: str) -> None:
        if name != alias:
            raise HeaderError(f"typedef struct {name} {{...}} {alias}: the names differ")
        self.structs[name] = []
        for field in (" ".join(part.split()) for part in fields.split(";")):
            if not field:
                continue
            array = re.fullmatch(r"(.+?)\[(\w+)\]", field)
            declared = _declared(array.group(1) if array else field)
            if array:
                self.arrays[(name, declared.name)] = array.group(2)
            self.structs[name].append(declared)

    def _statement(self, statement: str) -> None:
        match = re.fullmatch(r"typedef ((?:u?int)(?:32|64)_t) (bp_\w+)", statement)
        if match:
            self.scalars[match.group(2)] = match.group(1)
            return
        match = re.fullmatch(r"typedef struct (bp_\w+) (bp_\w+)", statement)
        if match and match.group(1) == match.group(2):
            self.opaque.append(match.group(1))
            return
        match = re.fullmatch(r"struct (\w+)", statement)
        if match:  # a forward declaration (DLManagedTensor): a handle
            self.opaque.append(f"struct {match.group(1)}")
            return
        match = re.fullmatch(r"typedef (.+?) \( ?\* ?(bp_\w+) ?\) ?\((.*)\)", statement)
        if match:
            self.callbacks[match.group(2)] = (_normalise(match.group(1)), _parameters(match.group(3)))
            return
        match = re.fullmatch(r"BACKPLANE_API (.+?) ?\b(bp_\w+) ?\((.*)\)", statement)
        if match:
            self.functions[match.group(2)] = (_normalise(match.group(1)), _parameters(match.group(3)))
            return
        raise HeaderError(f"a declaration this generator cannot read: {statement[:120]!r}")


def _parameters(text: str) -> List[Declared]:
    text = text.strip()
    return [] if text in ("", "void") else [_declared(part) for part in text.split(",")]


class Crossing(NamedTuple):
    """How one C type crosses: the ctypes expression and the Python type."""
    ctypes: str
    python: str


class Generator:
    def __init__(self, header: Header) -> None:
        self.header = header

    def _base(self, c_type: str) -> str:
        return c_type.replace("const ", "").replace(" const", "").strip()

    def _is_handle(self, base: str) -> bool:
        return base == "void" or base in self.header.opaque

    def scalar(self, c_type: str) -> Crossing:
        base = self._base(c_type)
        base = self.header.scalars.get(base, base)
        if base in SCALARS:
            return Crossing(*SCALARS[base])
        if base in self.header.callbacks:
            return Crossing(base, "Optional[ctypes._CFunctionType]")
        raise HeaderError(f"the C type {c_type!r} is none this generator knows")

    def pointer(self, c_type: str) -> Crossing:
        """A pointer a Python caller reads or writes through (one level)."""
        pointee = c_type.rsplit("*", 1)[0].strip()
        base = self._base(pointee)
        if "*" in pointee:
            inner = self._base(pointee.rsplit("*", 1)[0])
            if inner == "char":
                return Crossing("ctypes.POINTER(ctypes.c_char_p)", "Pointer[ctypes.c_char_p]")
            if self._is_handle(inner):
                return Crossing("ctypes.POINTER(ctypes.c_void_p)", "Pointer[ctypes.c_void_p]")
            if self.header.scalars.get(inner, inner) in SCALARS:
                # Numbers the library owns, handed out by address: read with ctypes or NumPy.
                return Crossing("ctypes.POINTER(ctypes.c_void_p)", "Pointer[ctypes.c_void_p]")
            raise HeaderError(f"the C type {c_type!r} is none this generator knows")
        if base == "char":
            return Crossing("ctypes.c_char_p", "Optional[bytes]")
        if self._is_handle(base):
            return Crossing("ctypes.c_void_p", "VoidPointer")
        if base in self.header.structs:
            return Crossing(f"ctypes.POINTER({base})", f"Pointer[{base}]")
        ctype = self.scalar(base).ctypes
        return Crossing(f"ctypes.POINTER({ctype})", f"Pointer[{ctype}]")

    def parameter(self, parameters: List[Declared], index: int) -> Crossing:
        c_type = parameters[index].c_type
        if "*" not in c_type:
            return self.scalar(c_type)
        pointee = c_type.rsplit("*", 1)[0].strip()
        base = self._base(pointee)
        names = [declared.name for declared in parameters]
        before_capacity = "capacity" in names[index + 1:]
        following = parameters[index + 1].c_type if index + 1 < len(parameters) else ""
        if base == "char" and "*" not in pointee:
            if pointee.startswith("const"):
                return Crossing("ctypes.c_char_p", "Optional[bytes]")
            return Crossing("ctypes.c_void_p", "VoidPointer")  # a buffer the caller fills
        if pointee.endswith("* const") or (pointee.startswith("const") and base in SCALARS):
            return Crossing("ctypes.c_void_p", "VoidPointer")  # an input array
        if before_capacity and not self._is_handle(base):
            return Crossing("ctypes.c_void_p", "VoidPointer")  # an array the caller fills
        if self._base(pointee) == "char *" and following == "size_t *":
            return Crossing("ctypes.POINTER(ctypes.c_void_p)", "Pointer[ctypes.c_void_p]")  # text with a size
        if self._base(pointee) == "char *":
            return Crossing("ctypes.POINTER(ctypes.c_char_p)", "Pointer[ctypes.c_char_p]")
        return self.pointer(c_type)

    def result(self, c_type: str) -> Crossing:
        if c_type == "void":
            return Crossing("None", "None")
        if c_type == "const char *":
            return Crossing("ctypes.c_char_p", "Optional[bytes]")
        if "*" in c_type:
            raise HeaderError(f"a result of type {c_type!r}: none this generator knows")
        return self.scalar(c_type)

    def field(self, struct: str, fields: List[Declared], index: int) -> str:
        declared = fields[index]
        extent = self.header.arrays.get((struct, declared.name))
        if extent is not None:
            return f"{self.scalar(declared.c_type).ctypes if declared.c_type != 'char' else 'ctypes.c_char'} * {extent}"
        if "*" not in declared.c_type:
            return self.scalar(declared.c_type).ctypes
        if declared.c_type == "const char *" and f"{declared.name}_size" in [f.name for f in fields]:
            return "ctypes.c_void_p"  # text with a size: it may hold NUL bytes
        pointee = declared.c_type.rsplit("*", 1)[0].strip()
        inner = self._base(pointee.rsplit("*", 1)[0]) if "*" in pointee else ""
        if self.header.scalars.get(inner, inner) in SCALARS:  # arrays of numbers the caller gives, one per item
            return f"ctypes.POINTER(ctypes.POINTER({self.scalar(inner).ctypes}))"
        return self.pointer(declared.c_type).ctypes

    def write(self) -> str:
        header = self.header
        out = [PREAMBLE]
        out.append("# ---- constants ----\n")
        for name, value in header.constants.items():
            out.append(f"{name} = {value}\n")
        out.append("\n# ---- callbacks ----\n")
        for name, (result, parameters) in header.callbacks.items():
            types = [self.result(result).ctypes] + [self.scalar(p.c_type).ctypes if "*" not in p.c_type
                                                    else self.pointer(p.c_type).ctypes for p in parameters]
            out.append(_wrapped(f"{name} = ctypes.CFUNCTYPE(", types, ")", 4))
        out.append("\n# ---- structs ----\n")
        for name, fields in header.structs.items():
            out.append(f"\n\nclass {name}(ctypes.Structure):\n    _fields_ = [\n")
            for index, declared in enumerate(fields):
                out.append(f'        ("{declared.name}", {self.field(name, fields, index)}),\n')
            out.append("    ]\n")
        out.append("\n\n# ---- functions: name -> (argument types, result type) ----\n")
        out.append("PROTOTYPES: Dict[str, Tuple[List[Any], Any]] = {\n")
        signatures = []
        for name, (result, parameters) in header.functions.items():
            crossings = [self.parameter(parameters, index) for index in range(len(parameters))]
            returned = self.result(result)
            out.append(_wrapped(f'    "{name}": ([', [c.ctypes for c in crossings], f"], {returned.ctypes}),", 8))
            arguments = ["self"] + [f"{p.name}: {c.python}" for p, c in zip(parameters, crossings)]
            signatures.append(_wrapped(f"    def {name}(", arguments + (["/"] if parameters else []),
                                       f") -> {returned.python}: ...", 8))
        out.append("}\n\n\nclass Library(Protocol):\n")
        out.append('    """libbackplane as ctypes calls it, once PROTOTYPES is declared."""\n\n')
        out.extend(signatures)
        return "".join(out)


def _wrapped(opening: str, items: List[str], closing: str, indent: int) -> str:
    """`opening items closing` on one line, or one item a line past 120 columns."""
    line = f"{opening}{', '.join(items)}{closing}"
    if len(line) <= 120:
        return line + "\n"
    inner = "".join(f"{' ' * indent}{item},\n" for item in items)
    return f"{opening}\n{inner}{' ' * (indent - 4)}{closing.lstrip()}\n"


PREAMBLE = '''"""The C API (backplane.h) as ctypes declares it: generated from the header by
python/generate_lib.py. Do not edit; run `python3 python/generate_lib.py`.

tests/python/test_header_mirror.py fails when this file is not what the
header generates, and checks the structs against the C compiler's layout.
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Protocol, Tuple, TypeVar, Union

if TYPE_CHECKING:
    _T = TypeVar("_T", bound=ctypes._CData)
    # What ctypes takes for a POINTER(T) parameter: a pointer, byref(), the
    # T itself (passed by reference) or None (NULL).
    Pointer = Union["ctypes._Pointer[_T]", ctypes._CArgObject, _T, None]
    # What ctypes takes for a c_void_p parameter: an address, NULL, or any
    # ctypes object that is one.
    VoidPointer = Union[int, None, ctypes.c_void_p, ctypes._CArgObject, "ctypes._Pointer[Any]",
                        "ctypes.Array[Any]"]

'''


def generate(header_text: str) -> str:
    return Generator(Header(header_text)).write()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when _lib_gen.py is stale")
    parser.add_argument("--header", type=pathlib.Path, default=HEADER)
    parser.add_argument("--output", type=pathlib.Path, default=OUTPUT)
    options = parser.parse_args()
    try:
        text = generate(options.header.read_text(encoding="utf-8"))
    except HeaderError as error:
        print(f"generate_lib.py: {options.header}: {error}", file=sys.stderr)
        return 1
    if options.check:
        if not options.output.exists() or options.output.read_text(encoding="utf-8") != text:
            print(f"generate_lib.py: {options.output} is not what {options.header} generates; "
                  "run python3 python/generate_lib.py", file=sys.stderr)
            return 1
        return 0
    options.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

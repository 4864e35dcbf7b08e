#!/usr/bin/env python3
"""libbackplane.so exports its API and nothing else: every function declared
in backplane.h, and public backplane:: C++ names (with their typeinfo and
vtables). No backplane::detail or backplane::c_api internals, and no fmt,
toml++, nlohmann::json or std instantiations that a program linking other
copies of those libraries could bind to.

Usage: check_library_exports.py LIBBACKPLANE.so BACKPLANE_H
Prints one doctest-style summary line.
"""
import re
import subprocess
import sys

# Kinds of symbol that belong to a class rather than to a function.
CLASS_DATA = ("typeinfo for ", "typeinfo name for ", "vtable for ")
INTERNAL = ("backplane::detail::", "backplane::c_api::", "backplane::safetensors::detail::")
# A few names the public API cannot do without: an empty export table must fail.
REQUIRED_CPP = ("backplane::Runtime::Runtime(", "typeinfo for backplane::Error",
                "backplane::device_put(", "backplane::BatchStream::next(")


def exported(path):
    """(mangled, demangled) for each defined dynamic symbol."""
    def names(*flags):
        output = subprocess.run(["nm", "-D", "--defined-only", *flags, path], check=True, capture_output=True,
                                text=True).stdout
        return [line.split(" ", 2)[2] for line in output.splitlines() if line.count(" ") >= 2]
    mangled, demangled = names(), names("-C")
    if len(mangled) != len(demangled):
        sys.exit("nm printed different symbol counts with and without -C")
    return list(zip(mangled, demangled))


def declared_c_functions(header):
    text = open(header, encoding="utf-8").read()
    return set(re.findall(r"^BACKPLANE_API\b[^;(]*?\b(bp_\w+)\(", text, re.MULTILINE))


def verdict(mangled, demangled):
    """None when the symbol may be exported, else why not."""
    if mangled == demangled:  # a C name
        return None if mangled.startswith("bp_") else "a C symbol outside the bp_ API"
    name = demangled
    for prefix in CLASS_DATA:
        if name.startswith(prefix):
            name = name[len(prefix):]
    if not name.startswith("backplane::"):
        return "not backplane's API (a dependency's or the standard library's instantiation)"
    if any(part in name for part in INTERNAL):
        return "an internal namespace"
    return None


def main(library, header):
    symbols = exported(library)
    failures = []
    for mangled, demangled in symbols:
        why = verdict(mangled, demangled)
        if why:
            failures.append(f"{demangled}: {why}")
    c_exported = {mangled for mangled, demangled in symbols if mangled == demangled}
    declared = declared_c_functions(header)
    if not declared:
        failures.append(f"no BACKPLANE_API function found in {header}")
    failures += [f"{name}: declared in backplane.h but not exported" for name in sorted(declared - c_exported)]
    failures += [f"{name}: exported but not declared in backplane.h" for name in sorted(c_exported - declared)]
    for required in REQUIRED_CPP:
        if not any(demangled.startswith(required) for _, demangled in symbols):
            failures.append(f"{required}: not exported")
    for failure in failures[:60]:
        print(f"FAIL: {failure}")
    if len(failures) > 60:
        print(f"... and {len(failures) - 60} more")
    cpp = len(symbols) - len(c_exported)
    print(f"{library}: {len(symbols)} exported symbols ({len(c_exported)} C, {cpp} C++), {len(failures)} not allowed")
    print(f"[doctest] test cases: 1 | {0 if failures else 1} passed | {1 if failures else 0} failed | 0 skipped")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))

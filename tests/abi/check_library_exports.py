#!/usr/bin/env python3
"""libbackplane.so exports its API and nothing else: every function declared
in backplane.h, and public backplane:: C++ names (with their typeinfo and
vtables). No backplane::detail or backplane::c_api internals, no member of a
class's hidden implementation (a nested `Impl`, which a nested class of an
exported class would export with it), no STB_GNU_UNIQUE symbol (one stops
glibc from ever unloading the library), and no fmt, toml++, nlohmann::json
or std instantiations that a program linking other copies of those
libraries could bind to.

Usage: check_library_exports.py LIBBACKPLANE.so BACKPLANE_H
       check_library_exports.py --check-rules   (the rules refuse what they should)
Prints one doctest-style summary line.
"""
import re
import subprocess
import sys

# Kinds of symbol that belong to a class rather than to a function.
CLASS_DATA = ("typeinfo for ", "typeinfo name for ", "vtable for ")
INTERNAL = ("backplane::detail::", "backplane::c_api::", "backplane::safetensors::detail::")
# A class's private implementation, nested in it: "backplane::BatchStream::Impl::next()".
NESTED_IMPL = re.compile(r"::Impl(::|\(|$|\b)")
# A few names the public API cannot do without: an empty export table must fail.
REQUIRED_CPP = ("backplane::Runtime::Runtime(", "typeinfo for backplane::Error",
                "backplane::device_put(", "backplane::BatchStream::next(")


def exported(path):
    """(mangled, demangled, nm's type letter) for each defined dynamic symbol."""
    def names(*flags):
        output = subprocess.run(["nm", "-D", "--defined-only", *flags, path], check=True, capture_output=True,
                                text=True).stdout
        return [line.split(" ", 2)[1:] for line in output.splitlines() if line.count(" ") >= 2]
    mangled, demangled = names(), names("-C")
    if len(mangled) != len(demangled):
        sys.exit("nm printed different symbol counts with and without -C")
    return [(name, readable, kind) for (kind, name), (_, readable) in zip(mangled, demangled)]


def declared_c_functions(header):
    text = open(header, encoding="utf-8").read()
    return set(re.findall(r"^BACKPLANE_API\b[^;(]*?\b(bp_\w+)\(", text, re.MULTILINE))


def verdict(mangled, demangled, kind="T"):
    """None when the symbol may be exported, else why not. `kind` is nm's
    type letter ("u": an STB_GNU_UNIQUE object)."""
    if kind == "u":
        return "an STB_GNU_UNIQUE symbol (a function-local static of an inline function, or a template's static)"
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
    if NESTED_IMPL.search(name):
        return "a nested implementation class (keep it hidden)"
    return None


def check_rules():
    """The verdicts on names this checker exists to refuse, and on names it must let through."""
    refused = [
        ("_ZN9backplane11BatchStream4Impl4nextEv", "backplane::BatchStream::Impl::next()", "T"),
        ("_ZN9backplane11BatchStream4ImplC1Ev", "backplane::BatchStream::Impl::Impl()", "T"),
        ("_ZTIN9backplane7Runtime4ImplE", "typeinfo for backplane::Runtime::Impl", "V"),
        ("_ZZN9backplane11BatchStream4Impl13next_trace_idEvE7counter",
         "backplane::BatchStream::next_trace_id()::counter", "u"),
        ("_ZN9backplane6detail5Thing3getEv", "backplane::detail::Thing::get()", "T"),
        ("fmt_internal", "fmt_internal", "T"),
    ]
    allowed = [
        ("_ZN9backplane11BatchStream4nextEv", "backplane::BatchStream::next()", "T"),
        ("_ZN9backplane12ImplementingC1Ev", "backplane::Implementing::Implementing()", "T"),
        ("bp_batch_stream_step", "bp_batch_stream_step", "T"),
    ]
    failures = [f"{readable}: not refused" for name, readable, kind in refused if verdict(name, readable, kind) is None]
    failures += [f"{readable}: refused ({verdict(name, readable, kind)})" for name, readable, kind in allowed
                 if verdict(name, readable, kind) is not None]
    for failure in failures:
        print(f"FAIL: {failure}")
    print(f"rules: {len(refused)} names refused, {len(allowed)} let through, {len(failures)} wrong")
    print(f"[doctest] test cases: 1 | {0 if failures else 1} passed | {1 if failures else 0} failed | 0 skipped")
    return 1 if failures else 0


def main(library, header):
    symbols = exported(library)
    failures = []
    for mangled, demangled, kind in symbols:
        why = verdict(mangled, demangled, kind)
        if why:
            failures.append(f"{demangled}: {why}")
    c_exported = {mangled for mangled, demangled, _ in symbols if mangled == demangled}
    declared = declared_c_functions(header)
    if not declared:
        failures.append(f"no BACKPLANE_API function found in {header}")
    failures += [f"{name}: declared in backplane.h but not exported" for name in sorted(declared - c_exported)]
    failures += [f"{name}: exported but not declared in backplane.h" for name in sorted(c_exported - declared)]
    for required in REQUIRED_CPP:
        if not any(demangled.startswith(required) for _, demangled, _ in symbols):
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
    if sys.argv[1:] == ["--check-rules"]:
        sys.exit(check_rules())
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))

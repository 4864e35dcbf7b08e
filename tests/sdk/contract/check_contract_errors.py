"""Compiles tests/sdk/contract/backend_variants.cpp as written and with one
hook broken at a time, with the compiler the build uses: the complete
backend must compile, and each broken one must fail with output that names
the hook it broke.

Usage: check_contract_errors.py SOURCE INCLUDE_DIR COMPILER [ARG...]
"""

import subprocess
import sys

# (macro, what the compiler's output must contain)
BROKEN = [
    ("VARIANT_NO_QUERY", "backend hook query: missing or wrong signature"),
    ("VARIANT_ALLOCATE_SIZE_32_BITS", "backend hook allocate: missing or wrong signature"),
    ("VARIANT_RELEASE_BY_POINTER", "backend hook release: wrong signature"),
    ("VARIANT_WRAP_WITHOUT_CAPABILITY", "backend hook wrap: BP_CAPABILITY_WRAP_MEMORY is declared exactly"),
]


def start_variant(compiler: list[str], source: str, include: str, macro: str | None) -> "subprocess.Popen[str]":
    command = compiler + ["-std=c++20", "-fsyntax-only", "-I", include, source]
    if macro is not None:
        command.append("-D" + macro)
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def main() -> int:
    source, include, compiler = sys.argv[1], sys.argv[2], sys.argv[3:]
    # All variants at once: each is one short compile, and they are independent.
    complete = start_variant(compiler, source, include, None)
    broken = [(macro, expected, start_variant(compiler, source, include, macro)) for macro, expected in BROKEN]
    failures: list[str] = []
    output, _ = complete.communicate()
    if complete.returncode != 0:
        failures.append("the complete backend did not compile:\n" + output)
    for macro, expected, compiling in broken:
        output, _ = compiling.communicate()
        if compiling.returncode == 0:
            failures.append(f"{macro}: compiled, but a broken hook must not")
        elif expected not in output:
            failures.append(f"{macro}: the compiler's output does not say {expected!r}:\n{output}")
        else:
            print(f"ok: {macro}: {expected}")
    for failure in failures:
        print("FAIL: " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

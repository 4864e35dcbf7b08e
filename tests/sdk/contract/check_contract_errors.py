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


def compile_variant(compiler, source, include, macro):
    command = compiler + ["-std=c++20", "-fsyntax-only", "-I", include, source]
    if macro is not None:
        command.append("-D" + macro)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    return done.returncode, done.stdout + done.stderr


def main():
    source, include, compiler = sys.argv[1], sys.argv[2], sys.argv[3:]
    failures = []
    status, output = compile_variant(compiler, source, include, None)
    if status != 0:
        failures.append("the complete backend did not compile:\n" + output)
    for macro, expected in BROKEN:
        status, output = compile_variant(compiler, source, include, macro)
        if status == 0:
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

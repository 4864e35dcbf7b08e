#!/usr/bin/env python3
"""Each module of core/src, and the tool (tools/), compiles against its include
view: an include of a module the view lacks (one its row in
docs/architecture.md's table does not name) is a missing file when the
module is compiled, and every module it may include is found. The probe is compiled with the very command ninja runs for one of
the module's own sources (compile_commands.json), from a temporary
directory, so nothing is written into the tree.

Usage: test_include_views.py SOURCE_DIR BUILD_DIR   Prints one doctest-style summary line."""
import json
import pathlib
import shlex
import subprocess
import sys
import tempfile


def module_table(source):
    """[(module, view)] in table order, from scripts/check-layering --modules."""
    result = subprocess.run([sys.executable, str(source / "scripts" / "check-layering"), "--modules"],
                            capture_output=True, text=True, check=True)
    rows = []
    for line in result.stdout.splitlines():
        name, _, view = line.split(":")
        rows.append((name, set(view.split(","))))
    return rows


def compile_command(entries, source, module):
    """A module source's compile command as ninja runs it, and its directory."""
    prefix = str(source / module if module == "tools" else source / "core" / "src" / module) + "/"
    for entry in entries:
        path = pathlib.Path(entry["directory"], entry["file"]).resolve()
        if str(path).startswith(prefix):
            return shlex.split(entry["command"]), entry["directory"], entry["file"]
    return None


def probe_command(command, source_file, probe, mode):
    """The command with the probe for its source, preprocessing (-E) or checking the
    syntax, writing nothing."""
    arguments = []
    skip = False
    for argument in command:
        if skip:
            skip = False
            continue
        if argument in ("-o", "-MQ", "-MF"):
            skip = True
            continue
        if argument in ("-MD", "-c", "ccache") or argument == source_file:
            continue
        arguments.append(argument)
    return arguments + [mode, str(probe)]


def a_header(source, module):
    headers = sorted((source / "core" / "src" / module).glob("*.hpp"))
    return f"{module}/{headers[0].name}" if headers else None


def main(source, build):
    source = pathlib.Path(source).resolve()
    entries = json.loads((pathlib.Path(build) / "compile_commands.json").read_text(encoding="utf-8"))
    table = module_table(source)
    headers = {name: a_header(source, name) for name, _ in table}
    failed = 0
    total = 0

    def check(name, ok, detail):
        nonlocal failed, total
        total += 1
        if ok:
            print(f"ok: {name}")
        else:
            failed += 1
            print(f"FAIL: {name}: {detail}")

    with tempfile.TemporaryDirectory() as directory:
        probe = pathlib.Path(directory) / "probe.cpp"
        for module, view in table:
            found = compile_command(entries, source, module)
            if found is None:
                check(f"{module} has a compile command", False, f"no source of {module} in compile_commands.json")
                continue
            command, cwd, source_file = found
            # Which headers the module's own command finds: the view, and no more.
            lines = []
            for other, header in headers.items():
                if header:
                    lines += [f'#if __has_include("{header}")', f"reachable {other}", "#endif"]
            # The directories above the modules are not on the path (a "../" include, which would
            # walk out of the view, is check-layering's to refuse).
            for escape in ("src/util/log.hpp", "core/src/util/log.hpp"):
                lines += [f'#if __has_include("{escape}")', f"escapes {escape}", "#endif"]
            probe.write_text("\n".join(lines) + "\n", encoding="utf-8")
            result = subprocess.run(probe_command(command, source_file, probe, "-E") + ["-P", "-o", "-"],
                                    cwd=cwd, capture_output=True, text=True)
            reached = {line.split()[1] for line in result.stdout.splitlines() if line.startswith("reachable ")}
            expected = {other for other in view if headers.get(other)}
            check(f"{module} finds exactly its view's modules", result.returncode == 0 and reached == expected,
                  f"exit {result.returncode}, finds {sorted(reached)}, its view is {sorted(expected)}\n"
                  f"{result.stderr}")
            escapes = [line for line in result.stdout.splitlines() if line.startswith("escapes ")]
            check(f"{module} finds no core/src file by another path", not escapes, ", ".join(escapes))
            # And a real include of a module its row does not name stops the compile, naming the
            # file: one above it, and one below that it skips (a skip-level include).
            names = [other for other, _ in table]
            outside = [other for other in names if other not in view and headers.get(other)]
            below = set(names[:names.index(module)])
            for other in [next((o for o in outside if o not in below), None),
                          next((o for o in outside if o in below), None)]:
                if other is None:
                    continue
                probe.write_text(f'#include "{headers[other]}"\n', encoding="utf-8")
                result = subprocess.run(probe_command(command, source_file, probe, "-fsyntax-only"), cwd=cwd,
                                        capture_output=True, text=True)
                check(f"{module}: #include \"{headers[other]}\" fails to compile",
                      result.returncode != 0 and headers[other] in result.stderr and
                      "No such file" in result.stderr, f"exit {result.returncode}\n{result.stderr}")
    print(f"[doctest] test cases: {total} | {total - failed} passed | {failed} failed | 0 skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))

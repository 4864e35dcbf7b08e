#!/usr/bin/env python3
"""scripts/check-layering refuses an upward include, a module without a rule
and a rule naming no module, and accepts a tree that keeps to its table.
Each case builds a small tree with its own docs/architecture.md.

Usage: test_check_layering.py SOURCE_DIR   Prints one doctest-style summary line."""
import pathlib
import subprocess
import sys
import tempfile

TABLE = """| directory | holds | may include |
| --- | --- | --- |
| `core/src/util/` | basics | public headers |
| `core/src/loader/` | loading | util |
| `core/src/c_api/` | entry points | everything above |
"""


def run(script, files, table=TABLE):
    with tempfile.TemporaryDirectory() as directory:
        root = pathlib.Path(directory)
        (root / "docs").mkdir()
        (root / "docs" / "architecture.md").write_text(table, encoding="utf-8")
        for name, text in files.items():
            path = root / "core" / "src" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        result = subprocess.run([sys.executable, str(script), "--source", str(root)], capture_output=True, text=True)
        return result.returncode, result.stdout


def main(source):
    script = pathlib.Path(source) / "scripts" / "check-layering"
    good = {"util/log.hpp": '#include <string>\n#include "backplane/backplane.hpp"\n',
            "loader/plugin.cpp": '#include "loader/plugin.hpp"\n#include "util/log.hpp"\n',
            "loader/plugin.hpp": "",
            "c_api/c_api.cpp": '#include "loader/plugin.hpp"\n#include "util/log.hpp"\n'}
    cases = {
        "a tree that keeps to its table passes": (good, TABLE, 0, "keeps to"),
        "an upward include fails, naming file, line and rule": (
            dict(good, **{"util/log.cpp": '#include "util/log.hpp"\n#include "loader/plugin.hpp"\n'}), TABLE, 1,
            "core/src/util/log.cpp:2: includes loader/plugin.hpp, but util may include only the public headers"),
        "a module without a row fails": (
            dict(good, **{"extra/x.cpp": '#include "util/log.hpp"\n'}), TABLE, 1,
            "core/src/extra/: no row in architecture.md's module table"),
        "a rule naming no module fails": (
            good, TABLE.replace("| loading | util |", "| loading | util, nonesuch |"), 1,
            "may include 'nonesuch', which is no module of core/src"),
    }
    failed = 0
    for name, (files, table, status, expected) in cases.items():
        code, output = run(script, files, table)
        if code != status or expected not in output:
            failed += 1
            print(f"FAIL: {name}: exit {code} (expected {status}), output:\n{output}")
        else:
            print(f"ok: {name}")
    # And the real tree keeps to the real table.
    real = subprocess.run([sys.executable, str(script), "--source", source], capture_output=True, text=True)
    if real.returncode != 0:
        failed += 1
        print(f"FAIL: the source tree breaks its own table:\n{real.stdout}")
    else:
        print(f"ok: {real.stdout.strip()}")
    total = len(cases) + 1
    print(f"[doctest] test cases: {total} | {total - failed} passed | {failed} failed | 0 skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

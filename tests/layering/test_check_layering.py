#!/usr/bin/env python3
"""scripts/check-layering refuses an upward include, a skip-level one (a
header of a module the row names that reaches a module it does not), an
include outside the "MODULE/..." naming (relative, climbing, bare, but for
the tool's own files in tools/), a module without a rule, a rule naming no
module or one below its row and a call through the plugin's table outside
abi/ and conformance/, and accepts a tree that keeps to its table, whichever
column of it holds "may include". Each case builds a small tree with its own
docs/architecture.md and plugin.h.

Usage: test_check_layering.py SOURCE_DIR   Prints one doctest-style summary line."""
import pathlib
import subprocess
import sys
import tempfile

TABLE = """| directory | holds | may include |
| --- | --- | --- |
| `core/src/util/` | basics | public headers |
| `core/src/loader/` | loading | util |
| `core/src/abi/` | the door | util |
| `core/src/c_api/` | entry points | everything above |
"""

PLUGIN_H = """typedef struct BP_PluginApi {
  uint32_t struct_size;
  BP_Error* (*probe)(BP_ProbeArgs* args);
  void (*event_destroy)(BP_Backend* backend, BP_Event* event);
} BP_PluginApi;
"""


def run(script, files, table=TABLE, plugin_h=PLUGIN_H):
    with tempfile.TemporaryDirectory() as directory:
        root = pathlib.Path(directory)
        (root / "docs").mkdir()
        (root / "docs" / "architecture.md").write_text(table, encoding="utf-8")
        (root / "core" / "include" / "backplane").mkdir(parents=True)
        (root / "core" / "include" / "backplane" / "plugin.h").write_text(plugin_h, encoding="utf-8")
        for name, text in files.items():
            path = root / name if name.startswith("tools/") else root / "core" / "src" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        result = subprocess.run([sys.executable, str(script), "--source", str(root)], capture_output=True, text=True)
        return result.returncode, result.stdout


def main(source):
    script = pathlib.Path(source) / "scripts" / "check-layering"
    good = {"util/log.hpp": '#include <string>\n#include "backplane/backplane.hpp"\n',
            "loader/plugin.cpp": '#include "loader/plugin.hpp"\n#include "util/log.hpp"\n',
            "loader/plugin.hpp": "",
            "c_api/c_api.cpp": '#include "loader/plugin.hpp"\n#include "util/log.hpp"\n',
            "abi/client.cpp": "void f(const BP_PluginApi* api_) { api_->probe(&args); }\n"}
    cases = {
        "a tree that keeps to its table passes": (good, TABLE, 0, "keeps to"),
        "the rule is read from the column headed \"may include\"": (
            dict(good, **{"util/log.cpp": '#include "loader/plugin.hpp"\n'}),
            "\n".join(line + (" checked by |" if i == 0 else " --- |" if i == 1 else " build |")
                      for i, line in enumerate(TABLE.splitlines())) + "\n", 1,
            "core/src/util/log.cpp:1: includes loader/plugin.hpp, but util may include only the public headers"),
        "an upward include fails, naming file, line and rule": (
            dict(good, **{"util/log.cpp": '#include "util/log.hpp"\n#include "loader/plugin.hpp"\n'}), TABLE, 1,
            "core/src/util/log.cpp:2: includes loader/plugin.hpp, but util may include only the public headers"),
        "a module without a row fails": (
            dict(good, **{"extra/x.cpp": '#include "util/log.hpp"\n'}), TABLE, 1,
            "core/src/extra/: no row in architecture.md's module table"),
        "a rule naming no module fails": (
            good, TABLE.replace("| loading | util |", "| loading | util, nonesuch |"), 1,
            "may include 'nonesuch', which is no module of core/src"),
        "a relative include fails, naming file, line and include": (
            dict(good, **{"util/log.cpp": '#include "../loader/plugin.hpp"\n'}), TABLE, 1,
            "core/src/util/log.cpp:1: includes ../loader/plugin.hpp, which is no \"MODULE/...\" of core/src"),
        "an include that climbs out of its module's name fails": (
            dict(good, **{"util/log.cpp": '#include "util/../loader/plugin.hpp"\n'}), TABLE, 1,
            "core/src/util/log.cpp:1: includes util/../loader/plugin.hpp, which is no"),
        "an include by a bare name fails": (
            dict(good, **{"loader/plugin.cpp": '#include "plugin.hpp"\n'}), TABLE, 1,
            "core/src/loader/plugin.cpp:1: includes plugin.hpp, which is no"),
        "an upward include in angle brackets fails": (
            dict(good, **{"util/log.cpp": '#include <loader/plugin.hpp>\n#include <fmt/format.h>\n'}), TABLE, 1,
            "core/src/util/log.cpp:1: includes loader/plugin.hpp, but util may include only the public headers"),
        "a rule naming a module below its row fails": (
            good, TABLE.replace("| the door | util |", "| the door | util, c_api |"), 1,
            "core/src/abi/ may include 'c_api', which is not above it in the table"),
        "a table call outside abi/ fails, naming file, line and call": (
            dict(good, **{"c_api/c_api.cpp": "int n = table->struct_size;\nvoid g() { api().event_destroy(b, e); }\n"}),
            TABLE, 1, "core/src/c_api/c_api.cpp:2: calls the plugin's event_destroy through its table"),
    }
    # A registry that may include loader alone, whose header includes util.
    layered = TABLE.replace("| `core/src/c_api/`", "| `core/src/registry/` | backends | loader |\n| `core/src/c_api/`")
    reaching = dict(good, **{"loader/plugin.hpp": '#include "util/log.hpp"\n',
                             "registry/backend.cpp": '#include <vector>\n#include "loader/plugin.hpp"\n'})
    cases["a skip-level include through a header fails, naming the chain"] = (
        reaching, layered, 1,
        "core/src/registry/backend.cpp:2: includes loader/plugin.hpp, which reaches util (loader/plugin.hpp:1 "
        "includes util/log.hpp), but registry may include loader")
    cases["a skip-level include is fine once the row names the module"] = (
        reaching, layered.replace("| backends | loader |", "| backends | util, loader |"), 0, "keeps to")
    tool = TABLE + "| `tools/` | the tool | loader |\n"
    tool_files = dict(good, **{"tools/main.cpp": '#include "commands.hpp"\n#include "loader/plugin.hpp"\n',
                               "tools/commands.hpp": ""})
    cases["the tool's row: its own files by their bare names and the modules its row names"] = (
        tool_files, tool, 0, "keeps to")
    cases["the tool's row: a module its row does not name fails"] = (
        dict(tool_files, **{"tools/main.cpp": '#include "commands.hpp"\n#include "abi/client.hpp"\n'}), tool, 1,
        "tools/main.cpp:2: includes abi/client.hpp, but tools may include loader")
    cases["the tool's row: a skip-level include fails"] = (
        dict(tool_files, **{"loader/plugin.hpp": '#include "util/log.hpp"\n'}), tool, 1,
        "tools/main.cpp:2: includes loader/plugin.hpp, which reaches util")
    cases["the tool's row: a bare name that is none of its files fails"] = (
        dict(tool_files, **{"tools/main.cpp": '#include "log.hpp"\n'}), tool, 1,
        "tools/main.cpp:1: includes log.hpp, which is no")
    failed = 0
    cases["a plugin.h without the table fails, naming it"] = (good, TABLE, 1, "no BP_PluginApi with function "
                                                               "pointers was found", "")
    for name, (files, table, status, expected, *plugin_h) in cases.items():
        code, output = run(script, files, table, *plugin_h)
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

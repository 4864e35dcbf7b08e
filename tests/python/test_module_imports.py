"""The package's modules import one way: no module of python/backplane
reaches, even only for type checking, a module that reaches it back, so that
each layer (the C library, errors, DLPack, arrays, the runtime, the features
on top) can be read without the ones above it."""
import ast
import os
import pathlib
import unittest

SOURCE = os.environ.get("BACKPLANE_TEST_SOURCE_DIR") or pathlib.Path(__file__).resolve().parents[2]
PACKAGE = pathlib.Path(SOURCE) / "python" / "backplane"


def package_imports(path):
    """The package modules `path` imports ("from . import x", "from .x import y")."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
    return found


def find_cycle(graph):
    visiting, done = [], set()

    def visit(module):
        if module in visiting:
            return visiting[visiting.index(module):] + [module]
        if module in done:
            return None
        visiting.append(module)
        for imported in sorted(graph.get(module, ())):
            cycle = visit(imported)
            if cycle:
                return cycle
        visiting.pop()
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = visit(module)
        if cycle:
            return cycle
    return None


class ModuleImportTest(unittest.TestCase):
    def test_no_two_modules_import_each_other(self):
        graph = {path.stem: package_imports(path) for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
        self.assertIn("_runtime", graph["_batches"], "the check reads the imports")  # it can see an edge
        self.assertEqual(find_cycle(graph), None)

    def test_the_check_finds_a_cycle(self):
        self.assertEqual(find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}), ["a", "b", "c", "a"])


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/env python3
"""The docs check (test_code_blocks.py) refuses what it should: each rule on
a small made-up document tree, with the message a contributor reads."""
import contextlib
import io
import os
import pathlib
import sys
import tempfile
import textwrap
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_code_blocks  # noqa: E402

BUILD_ROOT = os.environ.get("BACKPLANE_DOCS_BUILD_ROOT", ".")


def check(readme, guide=""):
    """The failures for a tree with this README.md and docs/guide.md."""
    with tempfile.TemporaryDirectory() as directory:
        root = pathlib.Path(directory)
        (root / "docs").mkdir()
        (root / "README.md").write_text(textwrap.dedent(readme), encoding="utf-8")
        (root / "docs" / "guide.md").write_text(textwrap.dedent(guide), encoding="utf-8")
        with contextlib.redirect_stdout(io.StringIO()):
            return test_code_blocks.check(root, BUILD_ROOT)


class CodeBlockRules(unittest.TestCase):
    def test_blocks_that_run_pass(self):
        errors = check("""\
            # title

            ```python
            import backplane

            print(backplane.load_tokens("tokens.safetensors").shape)
            ```

            ```sh
            test -f tokens.u16 && ls build >/dev/null
            ```

            <!-- not run: builds the project -->
            ```sh
            ./scripts/build
            ```

            ```toml
            not = "run"
            ```
            """)
        self.assertEqual(errors, [])

    def test_a_failing_python_block_names_file_line_and_error(self):
        errors = check("# title\n", """\
            text

            ```python
            model = ...
            model(1)
            ```
            """)
        self.assertEqual(len(errors), 1)
        self.assertIn("docs/guide.md:3: python block exited with 1 (error at docs/guide.md:5)", errors[0])
        self.assertIn("TypeError: 'ellipsis' object is not callable", errors[0])

    def test_a_failing_shell_block_names_file_line_and_error(self):
        errors = check("""\
            ```sh
            ls no-such-file
            ```
            """)
        self.assertEqual(len(errors), 1)
        self.assertIn("README.md:1: sh block exited with 2", errors[0])
        self.assertIn("no-such-file", errors[0])

    def test_a_block_that_never_ends_fails(self):
        saved, test_code_blocks.TIMEOUT_S = test_code_blocks.TIMEOUT_S, 2
        try:
            errors = check("```python\nwhile True:\n    pass\n```\n")
        finally:
            test_code_blocks.TIMEOUT_S = saved
        self.assertEqual(errors, ["README.md:1: python block did not finish in 2 s (a stream that never ends?)"])

    def test_a_block_that_times_out_leaves_no_process_behind(self):
        saved, test_code_blocks.TIMEOUT_S = test_code_blocks.TIMEOUT_S, 2
        with tempfile.TemporaryDirectory() as directory:
            witness = pathlib.Path(directory) / "late"
            try:
                errors = check(f"```sh\n(sleep 4; touch {witness}) &\nsleep 60\n```\n")
            finally:
                test_code_blocks.TIMEOUT_S = saved
            time.sleep(3)
            self.assertFalse(witness.exists())
        self.assertEqual(errors, ["README.md:1: sh block did not finish in 2 s (a stream that never ends?)"])

    def test_an_unmarked_build_is_refused_unrun(self):
        with tempfile.TemporaryDirectory() as directory:
            witness = pathlib.Path(directory) / "ran"
            errors = check(f"```sh\ntouch {witness}\n./scripts/build\n```\n")
            self.assertFalse(witness.exists())
        self.assertEqual(len(errors), 1)
        self.assertIn("README.md:1: sh block runs `scripts/build`", errors[0])
        self.assertIn("<!-- not run: WHY -->", errors[0])

    def test_marks_need_a_reason_and_a_runnable_block(self):
        errors = check("""\
            <!-- fragment: -->
            ```python
            x
            ```

            <!-- not run: a config file -->
            ```toml
            a = 1
            ```

            <!-- not run: slow -->
            ```python
            x
            ```

            <!-- fragment: nothing follows -->

            <!-- notrun builds -->
            ```sh
            true
            ```
            """)
        self.assertEqual(errors, [
            "README.md:1: the `fragment` mark gives no reason",
            "README.md:6: a `not run` mark before a toml block, which is never run",
            "README.md:11: a Python block is run or a fragment, never `not run`",
            "README.md:16: a mark with no code block on the next line",
            "README.md:18: a mark must read `<!-- fragment: WHY -->` or `<!-- not run: WHY -->`, "
            "got '<!-- notrun builds -->'",
        ])

    def test_fragments_stay_a_minority(self):
        fragment = "<!-- fragment: a synopsis -->\n```sh\nbackplane conformance PLUGIN\n```\n\n"
        runs = "```sh\ntrue\n```\n\n"
        self.assertEqual(check(fragment + runs + runs), [])
        self.assertEqual(check(fragment + fragment + runs + runs), [
            "2 of the 4 Python and shell blocks are marked fragments: fragments must stay fewer than half "
            "(make blocks run instead)"])

    def test_an_unclosed_block_is_an_error(self):
        self.assertEqual(check("```python\nprint(1)\n"), ["README.md:1: a code block that is never closed"])


if __name__ == "__main__":
    unittest.main(verbosity=2)

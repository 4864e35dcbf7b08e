"""docs/batch-stream.md's glossary names each batch-stream concept once per
face: every C++ name is declared in batch_stream.hpp, every C name in
backplane.h, and every Python name is one of the package's: a public name,
a batches() argument, a BatchStream method or a field of its stats."""
import dataclasses
import inspect
import os
import pathlib
import re
import unittest

import backplane

SOURCE = pathlib.Path(os.environ.get("BACKPLANE_TEST_SOURCE_DIR") or pathlib.Path(__file__).resolve().parents[2])


def glossary_rows():
    text = (SOURCE / "docs" / "batch-stream.md").read_text(encoding="utf-8")
    section = text.split("### Glossary", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[1].startswith("`"):
            rows.append([cells[0]] + [re.fullmatch(r"`([^`]+)`", cell).group(1) for cell in cells[1:]])
    return rows


class GlossaryTest(unittest.TestCase):
    def test_every_name_is_the_faces_own(self):
        rows = glossary_rows()
        self.assertGreaterEqual(len(rows), 10)
        cxx = (SOURCE / "core" / "include" / "backplane" / "batch_stream.hpp").read_text(encoding="utf-8")
        c = (SOURCE / "core" / "include" / "backplane" / "backplane.h").read_text(encoding="utf-8")
        python = set(backplane.__all__)
        python |= set(inspect.signature(backplane.BatchStream.__init__).parameters)
        python |= {name for name in dir(backplane.BatchStream) if not name.startswith("_")}
        python |= {field.name for field in dataclasses.fields(backplane.BatchStreamStats)}
        python |= set(inspect.signature(backplane.Layout.__init__).parameters)
        python |= {"batches"}
        for concept, cxx_name, c_name, python_name in rows:
            with self.subTest(concept=concept):
                self.assertRegex(cxx, rf"\b{re.escape(cxx_name)}\b", f"C++ {cxx_name}")
                self.assertRegex(c, rf"\b{re.escape(c_name)}\b", f"C {c_name}")
                self.assertIn(python_name, python, f"Python {python_name}")

    def test_a_name_that_is_not_there_is_found_missing(self):
        c = (SOURCE / "core" / "include" / "backplane" / "backplane.h").read_text(encoding="utf-8")
        self.assertNotRegex(c, r"\bbp_batch_documents\b")


if __name__ == "__main__":
    unittest.main()

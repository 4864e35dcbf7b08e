"""Every C API status has its Python exception class, with the number and
name backplane.h gives it, so an error never reaches Python as a bare
`Error` or under another code's class."""

import os
import re
import unittest
from pathlib import Path

from backplane import _errors, _lib

SOURCE = Path(os.environ.get("BACKPLANE_TEST_SOURCE_DIR", Path(__file__).parents[2]))


def statuses_in_header() -> dict:
    header = Path(SOURCE, "core", "include", "backplane", "backplane.h").read_text()
    return {
        name: int(value)
        for name, value in re.findall(r"#define BP_STATUS_([A-Z_]+) \(\(bp_status\)(\d+)\)", header)
    }


class ErrorCodeTests(unittest.TestCase):
    def test_every_header_status_has_its_own_class(self) -> None:
        statuses = statuses_in_header()
        self.assertGreaterEqual(len(statuses), 13)
        self.assertEqual(sorted(statuses.values()), sorted(_errors.STATUS_CLASSES))
        classes = list(_errors.STATUS_CLASSES.values())
        self.assertEqual(len(set(classes)), len(classes), "two statuses share a class")

    def test_class_names_follow_the_header(self) -> None:
        # The header names the status (OUT_OF_RANGE), the class is its
        # CamelCase + "Error"; IO is the one the Python side names by meaning.
        renamed = {"IO": "FileSystemError"}
        for name, value in statuses_in_header().items():
            expected = renamed.get(name, "".join(part.capitalize() for part in name.split("_")) + "Error")
            self.assertEqual(_errors.STATUS_CLASSES[value].__name__, expected, name)

    def test_the_library_names_every_status(self) -> None:
        library = _lib.lib
        for name, value in statuses_in_header().items():
            text = library.bp_status_name(value).decode()
            self.assertNotIn("unknown", text, name)
        self.assertEqual(library.bp_status_name(99).decode(), "unknown status")


if __name__ == "__main__":
    unittest.main()

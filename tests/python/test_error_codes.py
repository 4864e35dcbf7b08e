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


def plugin_codes_in_header() -> dict:
    header = Path(SOURCE, "core", "include", "backplane", "plugin.h").read_text()
    return {
        name: int(value)
        for name, value in re.findall(r"#define BP_ERROR_([A-Z_]+) \(\(BP_ErrorCode\)(\d+)\)", header)
    }


def error_code_table() -> str:
    return Path(SOURCE, "core", "src", "util", "error_codes.hpp").read_text()


class ErrorCodeTests(unittest.TestCase):
    def test_every_plugin_code_is_paired_with_its_status(self) -> None:
        # The core maps a plugin's code through one table; a BP_ERROR_* the
        # table lacks would reach users as a plugin fault (kPlugin).
        codes = plugin_codes_in_header()
        self.assertGreaterEqual(len(codes), 7)
        statuses = statuses_in_header()
        table = error_code_table()
        for name, value in codes.items():
            self.assertEqual(statuses.get(name), value, f"BP_ERROR_{name} and BP_STATUS_{name} differ")
            self.assertRegex(table, rf"BP_STATUS_{name}, BP_ERROR_{name}\}}", f"no row pairs BP_ERROR_{name}")
        newest = max(codes, key=codes.get)
        self.assertIn(f"kLastPluginCode = BP_ERROR_{newest};", table)

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

    def test_each_class_carries_its_status_and_the_librarys_name_for_it(self) -> None:
        library = _lib.lib
        for value, cls in _errors.STATUS_CLASSES.items():
            self.assertEqual(cls.status, value)
            self.assertEqual(cls.status_name, library.bp_status_name(value).decode(), cls.__name__)
            error = cls("what went wrong")
            self.assertEqual((error.status, error.message), (value, "what went wrong"))
            self.assertEqual(str(error), f"what went wrong [{cls.status_name}]")
        # A status newer than this package still raises, as Error with its number.
        unknown = _lib.error_for(99, "from a newer library", "newer status")
        self.assertIs(type(unknown), _errors.Error)
        self.assertEqual((unknown.status, unknown.status_name), (99, "newer status"))

    def test_the_library_names_every_status(self) -> None:
        library = _lib.lib
        for name, value in statuses_in_header().items():
            text = library.bp_status_name(value).decode()
            self.assertNotIn("unknown", text, name)
        self.assertEqual(library.bp_status_name(99).decode(), "unknown status")


if __name__ == "__main__":
    unittest.main()

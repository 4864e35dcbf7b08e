"""`python -m backplane info|inspect|load|conformance ...` and the
`backplane` console command: run the native CLI that ships with the package
(or that meson installed), with the same arguments and exit status, telling
it (BACKPLANE_PYTHON, unless already set) to list the packages installed for
this interpreter."""
from __future__ import annotations

import os
import sys
from typing import List, Optional

from . import _lib


def tool_path() -> str:
    """The native `backplane` executable next to the loaded library."""
    candidates = [os.environ.get("BACKPLANE_TOOL", ""), str(_lib.NATIVE_DIR / "bin" / "backplane")]
    try:
        from . import _install_paths  # type: ignore[attr-defined]
        candidates.append(str(getattr(_install_paths, "TOOL", "")))
    except ImportError:
        pass
    library_dir = os.path.dirname(_lib.library_path())
    candidates.append(os.path.join(os.path.dirname(library_dir), "tools", "backplane"))  # a build tree
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(f"backplane: the native CLI was not found (looked in: "
                            f"{', '.join(c for c in candidates if c)}); set BACKPLANE_TOOL to its path")


def main(argv: Optional[List[str]] = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    try:
        tool = tool_path()
    except FileNotFoundError as error:
        print(error, file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    # The CLI lists the packages this interpreter sees (its sys.path), not
    # those of whatever python3 comes first on PATH.
    os.environ.setdefault("BACKPLANE_PYTHON", sys.executable)
    os.execv(tool, [tool] + arguments)
    return 0  # not reached: execv replaces the process


if __name__ == "__main__":
    sys.exit(main())

"""The ``coniti`` command line: a thin layer over coniti's public library calls.

Entry points: the ``coniti`` console script and ``python -m coniti`` both call :func:`main`. The
command line needs click and rich (dependencies of coniti); if either is missing, :func:`main` says
so and returns 1.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command (``argv`` defaults to ``sys.argv[1:]``) and return its exit status.

    0 success; 1 a coniti or OS error, reported as one line on stderr; 2 a usage error. No traceback
    is printed unless ``--debug`` is given. Holds no state between calls.
    """
    try:
        from coniti.cli.app import run

        return run(argv)
    except ModuleNotFoundError as exc:
        package = (exc.name or "").partition(".")[0]
        if package in ("click", "rich"):
            print(
                f"coniti: the command line needs {package}: pip install click rich",
                file=sys.stderr,
            )
            return 1
        raise

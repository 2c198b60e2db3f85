#!/usr/bin/env python3
"""coniti's side-by-side benchmark: coniti's backends against raw LMDB and sqlite, in one run.

Usage (from the repository root)::

    .venv/bin/python tools/bench.py --quick              # N=2,000, 2 rounds, small counts: < 1 minute
    .venv/bin/python tools/bench.py --help               # systems, phases and counts

The code is the ``bench`` package beside this file: phases, systems and workload in ``bench/cli.py``'s
docstring; dated results in ``bench/RESULTS.md``.
"""

from bench.cli import main

if __name__ == "__main__":
    raise SystemExit(main())

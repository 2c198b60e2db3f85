#!/usr/bin/env python3
"""The ingest benchmark: engine ingest of Note objects against a columnar NoteBatch.

Usage (from the repository root)::

    .venv/bin/python tools/bench_ingest.py --quick   # N=5,000, 1 round
    .venv/bin/python tools/bench_ingest.py --help    # notes, rounds, memory, ways

The code and its full description: ``bench/ingest.py`` beside this file.
"""

from bench.ingest import main

if __name__ == "__main__":
    raise SystemExit(main())

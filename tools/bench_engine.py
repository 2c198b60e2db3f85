#!/usr/bin/env python3
"""The engine benchmark: ingest rate and ask latency for the flat and segment_tree structures.

Usage (from the repository root)::

    .venv/bin/python tools/bench_engine.py --quick   # N=2,000, 1 round, < 1 minute
    .venv/bin/python tools/bench_engine.py --help    # notes, rounds, queries, memory

The code and its full description: ``bench/engine.py`` beside this file.
"""

from bench.engine import main

if __name__ == "__main__":
    raise SystemExit(main())

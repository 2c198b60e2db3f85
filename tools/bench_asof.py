#!/usr/bin/env python3
"""As-of reads against current reads on a LogBackend with a long history.

Usage (from the repository root)::

    .venv/bin/python tools/bench_asof.py --quick     # 20,000 events: a smoke run, seconds
    .venv/bin/python tools/bench_asof.py --help      # events, orders, rounds

The code and its full description: ``bench/asof.py`` beside this file.
"""

from bench.asof import main

if __name__ == "__main__":
    raise SystemExit(main())

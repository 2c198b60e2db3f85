#!/usr/bin/env python3
"""The log write benchmark: LogBackend.put_batch of columnar batches, CPU and wall per record.

Usage (from the repository root)::

    .venv/bin/python tools/bench_log_put.py --quick                   # N=5,000, 1 round
    .venv/bin/python tools/bench_log_put.py --baseline-code DIR       # against the coniti in DIR

The code and its full description: ``bench/log_put.py`` beside this file.
"""

from bench.log_put import main

if __name__ == "__main__":
    raise SystemExit(main())

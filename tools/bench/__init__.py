"""coniti's benchmarks, as one package beside their three commands (run from the repository root):

* ``tools/bench.py`` (:mod:`bench.cli`): coniti's backends against raw LMDB and sqlite, phase by phase;
* ``tools/bench_asof.py`` (:mod:`bench.asof`): as-of reads against current ones on a long history;
* ``tools/bench_engine.py`` (:mod:`bench.engine`): engine ingest and ask, per structure.

Modules: :mod:`bench.common` (clock, gc settling, work directories, figures and their format),
:mod:`bench.workload` (the seeded records), :mod:`bench.systems` (the measured systems behind one
adapter), :mod:`bench.metrics` (metrics and targets), :mod:`bench.runner` (the rounds and phases),
:mod:`bench.peak` (peak memory in a child process), :mod:`bench.report` (table, header, JSON,
profiles). Dated results: ``tools/bench/RESULTS.md``.

Importing the package puts the repository root on ``sys.path`` (after the script's folder), so the
benchmarks measure this checkout's ``coniti`` whether or not it is installed.
"""

from __future__ import annotations

import sys

from .common import ROOT

if str(ROOT) not in sys.path:
    sys.path.insert(1, str(ROOT))

"""The log write benchmark: ``LogBackend.put_batch`` of columnar batches, CPU and wall clock per record.

Usage (from the repository root)::

    .venv/bin/python tools/bench_log_put.py                          # N=100,000, 3 rounds
    .venv/bin/python tools/bench_log_put.py --quick                  # N=5,000, 1 round
    .venv/bin/python tools/bench_log_put.py --baseline-code DIR      # also the coniti in DIR

Workload: the notes of ``bench/engine.py``'s :func:`~bench.engine.corpus` (seeded) with a seeded
``(N, 256)`` float32 matrix, as ``RecordBatch(NoteBatch(ids, texts, timestamps, metadata), vectors,
"local_hash", ())`` of 500 rows each, built before the clock starts (the batch's validation is not
the log's). Timed: every ``put_batch`` into one fresh store (``durability`` as given, default
``sync``: one durable commit per batch), i.e. the log's whole write path: payload encoding, digests,
the hash chain, the novelty check of the ids, the projections and the commit.

Every run is a fresh child process importing ``coniti`` from this checkout or, with
``--baseline-code DIR``, from ``DIR`` too (e.g. ``git archive main coniti | tar -x -C DIR``); the
codes alternate within a round and their order rotates between rounds. Figures: microseconds per
record of the process's CPU time (user and system, what to compare on a shared machine) and of
wall clock, median and [min..max] over rounds, and with a baseline each median as a ratio to the
baseline's (below 1: faster).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from .common import Figures, Spent, Stopwatch, run_child, summary_line, workdir

__all__ = ["main", "run_log_put"]

BATCH = 500
DIM = 256


def _put_all(n: int, seed: int, durability: str) -> Spent:
    """The time taken by the ``put_batch`` calls of the workload into a fresh store."""
    import numpy as np

    from coniti.batch import NoteBatch, RecordBatch
    from coniti.impl.log import LogBackend

    from .engine import corpus

    notes = corpus(n, seed)
    vectors = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    batches = [
        RecordBatch(
            NoteBatch(
                [x.id for x in notes[a : a + BATCH]], [x.text for x in notes[a : a + BATCH]],
                [x.timestamp for x in notes[a : a + BATCH]], [dict(x.metadata) for x in notes[a : a + BATCH]],
            ),
            vectors[a : a + BATCH], "local_hash", (),
        )
        for a in range(0, n, BATCH)
    ]  # fmt: skip
    with (
        workdir(None, "coniti-bench-log-put-") as tmp,
        LogBackend(Path(tempfile.mkdtemp(dir=tmp)) / "store", durability=durability) as store,
    ):
        clock = Stopwatch()
        for batch in batches:
            store.put_batch(batch)
        return clock.spent()


def _child(code: Path | None, n: int, seed: int, durability: str) -> Spent:
    """The time taken by one run in a fresh process importing ``coniti`` from ``code`` (None:
    this checkout), which is checked."""
    args = ["--child", "--n", str(n), "--seed", str(seed), "--durability", durability]
    return run_child(code, "log_put", args, "a run")


def run_log_put(n: int, rounds: int, seed: int, durability: str, baseline: Path | None = None) -> Figures:
    """Figures per (metric, code): ``cpu`` and ``wall`` in microseconds per record, one per round;
    codes ``this`` and, with ``baseline``, ``base``."""
    codes: list[tuple[str, Path | None]] = [("this", None)]
    if baseline is not None:
        codes.append(("base", baseline))
    results = Figures()
    for r in range(rounds):
        shift = r % len(codes)
        for label, code in [*codes[shift:], *codes[:shift]]:
            wall, cpu, _ = _child(code, n, seed, durability)
            results.add("cpu", label, cpu / n * 1e6)
            results.add("wall", label, wall / n * 1e6)
    return results


def table(results: Figures) -> str:
    labels = list(dict.fromkeys(code for _, code in results.values))
    med = {key: statistics.median(values) for key, values in results.values.items()}
    lines = [
        "| code | CPU us/record median | [min..max] | x base (CPU) | wall us/record median | [min..max] | x base (wall) |",
        "|---|---:|---|---:|---:|---|---:|",
    ]
    for code in labels:
        cells = []
        for metric in ("cpu", "wall"):
            values = results.values[(metric, code)]
            ratio = f"{med[(metric, code)] / med[(metric, 'base')]:.2f}" if (metric, "base") in med else "-"
            cells.append(f"{med[(metric, code)]:.1f} | [{min(values):.1f}..{max(values):.1f}] | {ratio}")
        lines.append(f"| {code} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=summary_line(__doc__))
    p.add_argument("--n", type=int, default=None, help="records (default 100,000; --quick 5,000)")
    p.add_argument("--rounds", type=int, default=None, help="rounds (default 3; --quick 1)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--durability", default="sync", choices=("sync", "nosync"))
    p.add_argument("--quick", action="store_true", help="small counts, under a minute")
    p.add_argument(
        "--baseline-code", type=Path, default=None,
        help="also run with the coniti package in this directory (e.g. an export of main)",
    )  # fmt: skip
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    n = args.n if args.n is not None else (5_000 if args.quick else 100_000)
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    if n < BATCH or rounds < 1:
        p.error(f"--n must be >= {BATCH} and --rounds >= 1")
    if args.child:
        import coniti

        spent = _put_all(n, args.seed, args.durability)
        print(json.dumps({**spent.json(), "coniti": str(Path(coniti.__file__).parent)}))
        return 0
    if args.baseline_code is not None and not (args.baseline_code / "coniti").is_dir():
        p.error(f"--baseline-code {args.baseline_code} holds no coniti package")
    started = time.perf_counter()
    results = run_log_put(n, rounds, args.seed, args.durability, args.baseline_code)
    print(
        f"coniti log write benchmark: N={n:,}, LogBackend.put_batch, batches of {BATCH}, dim {DIM}, "
        f"durability={args.durability}, rounds={rounds}, seed={args.seed}, "
        f"baseline={args.baseline_code}, {time.perf_counter() - started:.0f} s"
    )
    print(table(results))
    return 0

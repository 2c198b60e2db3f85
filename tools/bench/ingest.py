"""The ingest benchmark: engine ingest of the same notes given as Note objects and as a columnar NoteBatch.

Usage (from the repository root)::

    .venv/bin/python tools/bench_ingest.py                    # N=100,000, memory=log, 3 rounds
    .venv/bin/python tools/bench_ingest.py --quick            # N=5,000, 1 round
    .venv/bin/python tools/bench_ingest.py --n 1000000 --rounds 1 --memory in_memory

Workload: the notes of ``bench/engine.py``'s :func:`~bench.engine.corpus` (seeded), ingested through
``Container(memory=..., embedding=local_hash, structure=flat).engine.ingest_many`` in batches of 500
(embedding, admission, structures and the memory write included; with ``--memory log`` every batch
is one durable commit). Each round ingests all N notes once per way of giving them, into a fresh
container each, in an order that rotates from round to round:

* ``notes``: each batch built as validated ``Note(...)`` objects from the raw columns, then ingested
  (what a caller holding plain values does; the construction is timed);
* ``trusted``: the batches prebuilt with ``Note.trusted`` before the clock starts (what
  ``tools/bench_engine.py`` times; no validation counted);
* ``batch``: each batch built as ``NoteBatch(ids, texts, timestamps, metadata)`` from the raw
  columns (validated once per column), then ingested (the construction is timed).

Figures: notes/s of wall clock and of the process's CPU time (on a loaded shared machine the wall
clock waits for a core; CPU time much less so), median and [min..max] over rounds, and each way's
median as a ratio to ``notes`` and to ``trusted``. ``--variants`` limits the ways (e.g.
``notes,trusted`` to run an older coniti without ``coniti.batch`` via ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from coniti import Container, Note

from .common import Figures, summary_line, workdir
from .engine import corpus

__all__ = ["main", "run_ingest"]

BATCH = 500
VARIANTS = ("notes", "trusted", "batch")

Columns = tuple[list[str], list[str], list[float], list[dict[str, Any]]]


def _feeders(notes: list[Note]) -> dict[str, Callable[[], list[Any]]]:
    """Per way of giving the notes: a function returning the per-batch thunks to time."""
    columns: list[Columns] = [
        (
            [n.id for n in notes[a : a + BATCH]],
            [n.text for n in notes[a : a + BATCH]],
            [n.timestamp for n in notes[a : a + BATCH]],
            [dict(n.metadata) for n in notes[a : a + BATCH]],
        )
        for a in range(0, len(notes), BATCH)
    ]

    def validated() -> list[Any]:
        return [
            lambda c=c: [
                Note(id=i, text=t, timestamp=s, metadata=m) for i, t, s, m in zip(*c, strict=True)
            ]
            for c in columns
        ]

    def trusted() -> list[Any]:
        built = [notes[a : a + BATCH] for a in range(0, len(notes), BATCH)]
        return [lambda b=b: b for b in built]

    def batch() -> list[Any]:
        from coniti.batch import NoteBatch

        return [lambda c=c: NoteBatch(*c) for c in columns]

    return {"notes": validated, "trusted": trusted, "batch": batch}


def _ingest(make: Callable[[], list[Any]], memory: str, scratch: Path) -> tuple[float, float]:
    """(wall s, CPU s) to ingest every batch of ``make()`` into a fresh container."""
    options: dict[str, Any] = {}
    if memory == "log":
        options["path"] = Path(tempfile.mkdtemp(dir=scratch)) / "store"
    thunks = make()
    with Container(memory=memory, embedding="local_hash", structure="flat", **options) as c:
        engine = c.engine
        wall, cpu = time.perf_counter(), time.process_time()
        for thunk in thunks:
            engine.ingest_many(thunk())
        return time.perf_counter() - wall, time.process_time() - cpu


def run_ingest(
    n: int, rounds: int, memory: str, seed: int, variants: Sequence[str] = VARIANTS
) -> Figures:
    """Figures per (metric, variant): ``wall`` and ``cpu`` in notes/s, one per round."""
    notes = corpus(n, seed)
    feeders = _feeders(notes)
    results = Figures()
    with workdir(None, "coniti-bench-ingest-") as tmp:
        for r in range(rounds):
            shift = r % len(variants)
            for name in [*variants[shift:], *variants[:shift]]:
                wall, cpu = _ingest(feeders[name], memory, tmp)
                results.add("wall", name, n / wall)
                results.add("cpu", name, n / cpu)
    return results


def table(results: Figures, variants: Sequence[str]) -> str:
    lines = [
        "| way | notes/s wall median | [min..max] | x notes | x trusted | notes/s CPU median | "
        "x notes (CPU) | x trusted (CPU) |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    med = {(m, v): statistics.median(results.values[(m, v)]) for m in ("wall", "cpu") for v in variants}

    def ratio(metric: str, v: str, base: str) -> str:
        return f"{med[(metric, v)] / med[(metric, base)]:.2f}" if (metric, base) in med else "-"

    for v in variants:
        walls = results.values[("wall", v)]
        lines.append(
            f"| {v} | {med[('wall', v)]:,.0f} | [{min(walls):,.0f}..{max(walls):,.0f}] | "
            f"{ratio('wall', v, 'notes')} | {ratio('wall', v, 'trusted')} | {med[('cpu', v)]:,.0f} | "
            f"{ratio('cpu', v, 'notes')} | {ratio('cpu', v, 'trusted')} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=summary_line(__doc__))
    p.add_argument("--n", type=int, default=None, help="notes (default 100,000; --quick 5,000)")
    p.add_argument("--rounds", type=int, default=None, help="rounds (default 3; --quick 1)")
    p.add_argument("--memory", default="log", choices=("in_memory", "log"))
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--variants", default=",".join(VARIANTS), help="ways to give the notes")
    p.add_argument("--quick", action="store_true", help="small counts, under a minute")
    args = p.parse_args(argv)
    n = args.n if args.n is not None else (5_000 if args.quick else 100_000)
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    variants = [v for v in args.variants.split(",") if v]
    if n < BATCH or rounds < 1 or not variants or not set(variants) <= set(VARIANTS):
        p.error(f"--n must be >= {BATCH}, --rounds >= 1, --variants among {', '.join(VARIANTS)}")
    started = time.perf_counter()
    results = run_ingest(n, rounds, args.memory, args.seed, variants)
    print(
        f"coniti ingest benchmark: N={n:,}, memory={args.memory}, local_hash, flat, batches of "
        f"{BATCH}, rounds={rounds}, seed={args.seed}, {time.perf_counter() - started:.0f} s"
    )
    print(table(results, variants))
    return 0

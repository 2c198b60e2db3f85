"""The ingest benchmark: engine ingest of the same notes given as Note objects and as a columnar NoteBatch.

Usage (from the repository root)::

    .venv/bin/python tools/bench_ingest.py                    # N=100,000, memory=log, 3 rounds
    .venv/bin/python tools/bench_ingest.py --quick            # N=5,000, 1 round
    .venv/bin/python tools/bench_ingest.py --n 1000000 --rounds 1 --memory in_memory

Workload: the notes of ``bench/engine.py``'s :func:`~bench.engine.corpus` (seeded), ingested through
``Container(memory=..., embedding=local_hash, structure=flat).engine.ingest_many`` in batches of 500
(embedding, admission, structures and the memory write included; with ``--memory log`` every batch
is one durable commit; ``--batch`` sets another size). Each round ingests all N notes once per way of giving them, into a fresh
container each, in an order that rotates from round to round:

* ``notes``: each batch built as validated ``Note(...)`` objects from the raw columns, then ingested
  (what a caller holding plain values does; the construction is timed);
* ``trusted``: the batches prebuilt with ``Note.trusted`` before the clock starts (what
  ``tools/bench_engine.py`` times; no validation counted);
* ``batch``: each batch built as ``NoteBatch(ids, texts, timestamps, metadata)`` from the raw
  columns (validated once per column), then ingested (the construction is timed).

``--ids sequential`` gives the notes ascending ids instead of the corpus's random hex ones: the
difference is what a log's id index costs when each id of a batch lands on its own B-tree page.
``--batch 5000`` shows how much of that cost larger durable commits take off (fewer pages written
per note, and fewer flushes).

Inside the timer: building each batch from the raw Python lists (``notes`` and ``batch``), the
engine's ``ingest_many`` (embedding, admission, structures, keyword index, content index, memory
write and commit). Outside it: the corpus, the containers' creation and close. Before the clock
starts, what is alive is collected and frozen out of the garbage collector (``gc.freeze``): the
workload (and, for ``trusted``, the prebuilt notes) does not lengthen the collections being timed,
as a caller's own data would not be a million ``Note`` objects; a child process (``--baseline-code``)
keeps only its way's workload.

Figures: notes/s of wall clock and of the process's CPU time (on a loaded shared machine the wall
clock waits for a core; CPU time much less so), median and [min..max] over rounds, and each way's
median as a ratio to ``notes`` and to ``trusted``; then where the time went, in microseconds per
note (medians): ``kernel``, the CPU time spent in the kernel (system calls, page faults, writing
pages out), and ``waiting``, the wall clock the process spent on no core (waiting for the disk to
flush a commit, or for a core on a loaded machine). ``--variants`` limits the ways (e.g.
``notes,trusted`` to run an older coniti without ``coniti.batch`` via ``PYTHONPATH``).

``--baseline-code DIR`` also runs every way with the ``coniti`` package found in ``DIR`` (e.g. an
export of main: ``git archive main coniti | tar -x -C DIR``), as rows ``WAY@base``, and adds each
row's ratio to ``notes@base`` (wall and CPU): the speed-up a caller holding plain values sees. Then
every ingest, of either code, runs in a fresh child process of its own (the same interpreter and
workload; the child checks which ``coniti`` it imported), the ways and codes interleaved within a
round and their order rotating between rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coniti import Container, Note

from .common import Figures, Spent, Stopwatch, run_child, settle, summary_line, workdir
from .engine import corpus

__all__ = ["main", "run_ingest"]

BATCH = 500
VARIANTS = ("notes", "trusted", "batch")

Columns = tuple[list[str], list[str], list[float], list[dict[str, Any]]]


@dataclass(frozen=True)
class Workload:
    """What every ingest of a run is given: ``n`` notes of the seeded corpus, with its random ids
    or ascending ones (``ids``), in batches of ``batch``, into a fresh ``memory``."""

    n: int
    memory: str
    seed: int = 7
    ids: str = "random"
    batch: int = BATCH

    def notes(self) -> list[Note]:
        """The corpus; with ``ids="sequential"`` its ids replaced by ascending ones (32 hex digits
        of the note's index), the order a log's id index then takes them in."""
        notes = corpus(self.n, self.seed)
        if self.ids == "sequential":
            notes = [Note.trusted(f"{i:032x}", x.text, x.timestamp, x.metadata) for i, x in enumerate(notes)]
        return notes

    def args(self) -> list[str]:
        """The command-line options that give a child process this workload."""
        return ["--n", str(self.n), "--memory", self.memory, "--seed", str(self.seed),
                "--ids", self.ids, "--batch", str(self.batch)]  # fmt: skip


def _feeders(work: Workload, ways: Sequence[str] = VARIANTS) -> dict[str, Callable[[], list[Any]]]:
    """Per way of giving the notes of ``work`` (of ``ways``): a function returning the per-batch
    thunks to time. Only ``trusted`` keeps the corpus's notes alive; the others keep their raw
    columns."""
    notes, size = work.notes(), work.batch
    columns: list[Columns] = [
        (
            [n.id for n in notes[a : a + size]],
            [n.text for n in notes[a : a + size]],
            [n.timestamp for n in notes[a : a + size]],
            [dict(n.metadata) for n in notes[a : a + size]],
        )
        for a in range(0, len(notes), size)
    ]

    def validated() -> list[Any]:
        return [
            lambda c=c: [
                Note(id=i, text=t, timestamp=s, metadata=m) for i, t, s, m in zip(*c, strict=True)
            ]
            for c in columns
        ]

    def trusted() -> list[Any]:
        built = [notes[a : a + size] for a in range(0, len(notes), size)]
        return [lambda b=b: b for b in built]

    def batch() -> list[Any]:
        from coniti.batch import NoteBatch

        return [lambda c=c: NoteBatch(*c) for c in columns]

    makers = {"notes": validated, "trusted": trusted, "batch": batch}
    return {way: makers[way] for way in ways}


def _ingest(make: Callable[[], list[Any]], memory: str, scratch: Path) -> Spent:
    """The time taken to ingest every batch of ``make()`` into a fresh container."""
    options: dict[str, Any] = {}
    if memory == "log":
        options["path"] = Path(tempfile.mkdtemp(dir=scratch)) / "store"
    thunks = make()
    with Container(memory=memory, embedding="local_hash", structure="flat", **options) as c:
        engine = c.engine
        settle()  # the workload and the corpus's garbage out of the collections being timed
        clock = Stopwatch()
        for thunk in thunks:
            engine.ingest_many(thunk())
        return clock.spent()


def run_ingest(
    work: Workload,
    rounds: int,
    variants: Sequence[str] = VARIANTS,
    baseline: Path | None = None,
    baseline_variants: Sequence[str] | None = None,
) -> Figures:
    """Figures per (metric, way): ``wall`` and ``cpu`` in notes/s, ``kernel`` (CPU time in the
    kernel) and ``waiting`` (wall clock on no core) in microseconds per note, one per round; with
    ``baseline``, ways ``WAY@base`` too (``baseline_variants``, default ``variants``), every ingest
    in a child process."""
    ways: list[tuple[str, Path | None]] = [(v, None) for v in variants]
    if baseline is not None:
        ways += [(v, baseline) for v in (variants if baseline_variants is None else baseline_variants)]
    feeders = _feeders(work) if baseline is None else {}
    n = work.n
    results = Figures()
    with workdir(None, "coniti-bench-ingest-") as tmp:
        for r in range(rounds):
            shift = r % len(ways)
            for name, code in [*ways[shift:], *ways[:shift]]:
                if baseline is None:
                    spent = _ingest(feeders[name], work.memory, tmp)
                else:
                    spent = _child(name, code, work)
                label = name if code is None else f"{name}@base"
                results.add("wall", label, n / spent.wall)
                results.add("cpu", label, n / spent.cpu)
                results.add("kernel", label, spent.kernel / n * 1e6)
                results.add("waiting", label, max(0.0, spent.wall - spent.cpu) / n * 1e6)
    return results


def _child(variant: str, code: Path | None, work: Workload) -> Spent:
    """The time taken by one ingest of ``variant`` in a fresh process importing ``coniti`` from
    ``code`` (None: this checkout)."""
    return run_child(code, "ingest", ["--child", variant, *work.args()], f"ingest of {variant}")


def _run_child(variant: str, work: Workload) -> None:
    """One ingest of ``variant`` (the child of :func:`_child`): prints its JSON figures."""
    import coniti

    make = _feeders(work, [variant])[variant]
    with workdir(None, "coniti-bench-ingest-") as tmp:
        spent = _ingest(make, work.memory, tmp)
    print(json.dumps({**spent.json(), "coniti": str(Path(coniti.__file__).parent)}))


def table(results: Figures) -> str:
    labels = list(dict.fromkeys(way for _, way in results.values))
    base = "notes@base" in labels
    head = "| way | notes/s wall median | [min..max] | x notes | x trusted | notes/s CPU median | "
    head += "x notes (CPU) | x trusted (CPU) |"
    rule = "|---|---:|---|---:|---:|---:|---:|---:|"
    if base:
        head += " x notes@base | x notes@base (CPU) |"
        rule += "---:|---:|"
    head += " kernel us/note | waiting us/note |"
    rule += "---:|---:|"
    lines = [head, rule]
    med = {key: statistics.median(values) for key, values in results.values.items()}

    def ratio(metric: str, way: str, to: str) -> str:
        return f"{med[(metric, way)] / med[(metric, to)]:.2f}" if (metric, to) in med else "-"

    for way in labels:
        tail = "@base" if way.endswith("@base") else ""
        walls = results.values[("wall", way)]
        line = (
            f"| {way} | {med[('wall', way)]:,.0f} | [{min(walls):,.0f}..{max(walls):,.0f}] | "
            f"{ratio('wall', way, 'notes' + tail)} | {ratio('wall', way, 'trusted' + tail)} | "
            f"{med[('cpu', way)]:,.0f} | {ratio('cpu', way, 'notes' + tail)} | "
            f"{ratio('cpu', way, 'trusted' + tail)} |"
        )
        if base:
            line += f" {ratio('wall', way, 'notes@base')} | {ratio('cpu', way, 'notes@base')} |"
        line += f" {med[('kernel', way)]:.1f} | {med[('waiting', way)]:.1f} |"
        lines.append(line)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=summary_line(__doc__))
    p.add_argument("--n", type=int, default=None, help="notes (default 100,000; --quick 5,000)")
    p.add_argument("--rounds", type=int, default=None, help="rounds (default 3; --quick 1)")
    p.add_argument("--memory", default="log", choices=("in_memory", "log"))
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--ids", default="random", choices=("random", "sequential"),
        help="the corpus's random hex ids, or ascending ones (the cost of random ids in a log)",
    )  # fmt: skip
    p.add_argument("--batch", type=int, default=BATCH, help=f"notes per ingest_many call (default {BATCH})")
    p.add_argument("--variants", default=",".join(VARIANTS), help="ways to give the notes")
    p.add_argument("--quick", action="store_true", help="small counts, under a minute")
    p.add_argument(
        "--baseline-code", type=Path, default=None,
        help="also run every way with the coniti package in this directory (e.g. an export of main)",
    )  # fmt: skip
    p.add_argument(
        "--baseline-variants", default=None,
        help="ways run with the baseline code (default: --variants; e.g. notes for a coniti "
        "without coniti.batch)",
    )  # fmt: skip
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    n = args.n if args.n is not None else (5_000 if args.quick else 100_000)
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    variants = [v for v in args.variants.split(",") if v]
    base_variants = (
        None if args.baseline_variants is None else [v for v in args.baseline_variants.split(",") if v]
    )
    if (
        args.batch < 1 or n < args.batch or rounds < 1 or not variants
        or not set(variants) | set(base_variants or []) <= set(VARIANTS) or base_variants == []
    ):
        p.error(
            f"--batch must be >= 1, --n >= --batch, --rounds >= 1, --variants and --baseline-variants among "
            f"{', '.join(VARIANTS)}"
        )
    work = Workload(n, args.memory, args.seed, args.ids, args.batch)
    if args.child is not None:
        _run_child(args.child, work)
        return 0
    if args.baseline_code is not None and not (args.baseline_code / "coniti").is_dir():
        p.error(f"--baseline-code {args.baseline_code} holds no coniti package")
    started = time.perf_counter()
    results = run_ingest(work, rounds, variants, args.baseline_code, base_variants)
    print(
        f"coniti ingest benchmark: N={n:,}, memory={args.memory}, local_hash, flat, batches of "
        f"{args.batch}, rounds={rounds}, seed={args.seed}, ids={args.ids}, baseline={args.baseline_code}, "
        f"{time.perf_counter() - started:.0f} s"
    )
    print(table(results))
    return 0

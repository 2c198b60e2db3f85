"""The engine benchmark: ingest rate and ask latency for the flat and segment_tree structures.

Usage (from the repository root)::

    .venv/bin/python tools/bench_engine.py                       # N=100,000, 3 rounds
    .venv/bin/python tools/bench_engine.py --quick               # N=2,000, 1 round, < 1 minute
    .venv/bin/python tools/bench_engine.py --n 20000 --memory log --queries 100

Workload (deterministic from ``--seed``): N notes of 8 to 30 words drawn from a Zipf-weighted
vocabulary, timestamps increasing by about five minutes with jitter, random hex ids. Per round, for
each structure in turn (the order alternates between rounds), the benchmark

* ingests every note through ``Container(memory=..., structure=...).engine.ingest_many`` in batches of
  500 (embedding, admission, structures and the memory write included): **ingest** in notes/s;
* opens a second engine on the same memory (structures rebuilt by scan): **open** in s;

then, with both engines open, asks ``--queries`` text queries (k=10) with no time range, a random 10%
window and a random 1% window, each query of both structures back to back:

* **ask**: latency per call in ms (embedding the question, the search, resolving the hits with one
  memory get);
* **search**: the structure's search alone for the same query, in ms.

Figures are medians over the queries of a round; the table shows the median over rounds and
[min..max]. Both structures must return the same hits for every query; the run stops if they do not.
``bench_phases()`` gives the same figures to ``tools/bench.py`` (phase ``engine``). Times are wall
clock on a shared machine: compare rows of one run, not runs of different days.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from coniti import Container, ContinuityEngine, Note, Query, TimeRange

from .common import Figures, fmt, spread, summary_line, workdir

__all__ = ["bench_phases", "main", "run"]

STRUCTURES = ("flat", "segment_tree")
WINDOWS = (("full", None), ("10pct", 0.10), ("1pct", 0.01))
BATCH = 500

_WORDS = """
agenda alpha ana april audit backlog bank bob budget bug call campaign client cloud code contract cost
customer dashboard data deadline demo deploy design doctor draft email energy event expense feature
finance flight forecast friday garden grant gym hiring hotel invoice issue kickoff launch lawyer lease
legal lunch manager market meeting memo metric migration milestone mobile monday month mortgage network
office onboarding outage partner payment pilot plan policy pricing priority product project proposal
quarter receipt recipe release rent report research review risk roadmap salary sales schedule school
security server sprint staff strategy supplier survey tax team ticket training travel trip tuesday
update vacation vendor visa website week weekend workshop
""".split()  # noqa: SIM905 - a word list reads better as text


def corpus(n: int, seed: int) -> list[Note]:
    """``n`` deterministic notes with increasing, jittered timestamps."""
    rng = random.Random(seed)
    vocab = _WORDS + [f"topic{i}" for i in range(5_000)]
    weights = [1.0 / (rank + 1) ** 1.05 for rank in range(len(vocab))]
    t0 = 1_767_225_600.0
    notes = []
    for i in range(n):
        words = rng.choices(vocab, weights, k=rng.randint(8, 30))
        notes.append(
            Note.trusted(
                f"{rng.getrandbits(128):032x}",
                " ".join(words),
                t0 + i * 300.0 + rng.random() * 200.0,
                {"i": i},
            )
        )
    return notes


def windows(notes: Sequence[Note], count: int, seed: int) -> dict[str, list[TimeRange | None]]:
    """Per window size, ``count`` random ranges (None for the full range)."""
    rng = random.Random(seed + 1)
    lo, hi = notes[0].timestamp, notes[-1].timestamp + 1.0
    out: dict[str, list[TimeRange | None]] = {}
    for name, fraction in WINDOWS:
        if fraction is None:
            out[name] = [None] * count
            continue
        width = (hi - lo) * fraction
        starts = [lo + rng.random() * (hi - lo - width) for _ in range(count)]
        out[name] = [TimeRange(start=s, end=s + width) for s in starts]
    return out


def questions(notes: Sequence[Note], count: int, seed: int) -> list[str]:
    """Question texts: the first words of random notes."""
    rng = random.Random(seed + 2)
    return [" ".join(rng.choice(notes).text.split()[:4]) for _ in range(count)]


def build(
    notes: list[Note], structure: str, memory: str, scratch: Path
) -> tuple[Container, ContinuityEngine, dict[str, float]]:
    """Ingest every note into a new container, then open a second engine on its memory."""
    options: dict[str, Any] = {}
    if memory == "log":
        options["path"] = Path(tempfile.mkdtemp(dir=scratch)) / "store"
    container = Container(memory=memory, structure=structure, **options)
    figures: dict[str, float] = {}
    start = time.perf_counter()
    for i in range(0, len(notes), BATCH):
        container.engine.ingest_many(notes[i : i + BATCH])
    figures["ingest"] = len(notes) / (time.perf_counter() - start)
    start = time.perf_counter()
    engine = ContinuityEngine(
        container.memory, container.embedder, container.structure.spawn(), container.strategy
    )
    engine.structures()
    figures["open"] = time.perf_counter() - start
    return container, engine, figures


def one_round(
    notes: list[Note],
    order: Sequence[str],
    memory: str,
    texts: list[str],
    ranges: dict[str, list[TimeRange | None]],
    scratch: Path,
) -> dict[str, dict[str, float]]:
    """Build one engine per structure, then ask the same queries of each, interleaved query by
    query (so load drift falls on both alike). Stops if their hits differ."""
    built = {s: build(notes, s, memory, scratch) for s in order}
    figures = {s: dict(built[s][2]) for s in order}
    try:
        for name, _ in WINDOWS:
            asks: dict[str, list[float]] = {s: [] for s in order}
            searches: dict[str, list[float]] = {s: [] for s in order}
            for i, (text, window) in enumerate(zip(texts, ranges[name], strict=True)):
                query = Query(text=text, time_range=window, k=10)
                hits = {}
                for s in order if i % 2 == 0 else order[::-1]:
                    container, engine, _ = built[s]
                    t = time.perf_counter()
                    answer = engine.ask(query)
                    asks[s].append(time.perf_counter() - t)
                    vector = container.embedder.embed([text])[0]
                    searcher = engine.structures()[0]
                    t = time.perf_counter()
                    searcher.search(vector, k=10, time_range=window)
                    searches[s].append(time.perf_counter() - t)
                    hits[s] = [h.note.id for h in answer.hits]
                if len({tuple(h) for h in hits.values()}) != 1:
                    raise SystemExit(f"structures returned different hits for {query!r}: stopping")
            for s in order:
                figures[s][f"ask_{name}"] = statistics.median(asks[s]) * 1000.0
                figures[s][f"search_{name}"] = statistics.median(searches[s]) * 1000.0
    finally:
        for container, _, _ in built.values():
            container.close()
    return figures


METRICS = {
    "ingest": ("engine ingest, batches of 500", "notes/s", True, 0),
    "open": ("engine open: structures rebuilt by scan", "s", False, 2),
    **{
        f"ask_{name}": (f"engine ask k=10, {label} time range", "ms", False, 3)
        for name, label in (("full", "full"), ("10pct", "10%"), ("1pct", "1%"))
    },
    **{
        f"search_{name}": (f"structure search alone, {label} range", "ms", False, 3)
        for name, label in (("full", "full"), ("10pct", "10%"), ("1pct", "1%"))
    },
}


def run(n: int, rounds: int, queries: int, seed: int, memory: str) -> Figures:
    """Figures per (metric, structure), one per round."""
    notes = corpus(n, seed)
    texts = questions(notes, queries, seed)
    ranges = windows(notes, queries, seed)
    results = Figures()
    with workdir(None, "coniti-bench-engine-") as tmp:
        for r in range(rounds):
            order = STRUCTURES if r % 2 == 0 else STRUCTURES[::-1]
            figures = one_round(notes, order, memory, texts, ranges, tmp)
            for structure, values in figures.items():
                for metric, value in values.items():
                    results.add(metric, structure, value)
    return results


def bench_phases(n: int, rounds: int, quick: bool, seed: int) -> list[dict[str, Any]]:
    """Rows for tools/bench.py: metric, label, unit, higher, digits, system and values per round."""
    results = run(n, rounds, 10 if quick else 50, seed, "in_memory")
    rows = []
    for (metric, structure), values in results.values.items():
        label, unit, higher, digits = METRICS[metric]
        rows.append(
            {
                "metric": f"{metric}_{structure}",
                "label": f"{label} ({structure})",
                "unit": unit,
                "higher": higher,
                "digits": digits,
                "system": "memory",
                "values": values,
            }
        )
    return rows


def table(results: Figures) -> str:
    """The markdown table: median and [min..max] over rounds per metric and structure."""
    lines = [
        "| metric | unit | structure | median | [min..max] |",
        "|---|---|---|---:|---|",
    ]
    for metric, (label, unit, _, digits) in METRICS.items():
        for structure in STRUCTURES:
            values = results.values.get((metric, structure))
            if not values:
                continue
            lines.append(
                f"| {label} | {unit} | {structure} | {fmt(statistics.median(values), digits)} | "
                f"{spread(values, digits)} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=summary_line(__doc__))
    p.add_argument("--n", type=int, default=None, help="notes (default 100,000; --quick 2,000)")
    p.add_argument("--rounds", type=int, default=None, help="rounds (default 3; --quick 1)")
    p.add_argument("--queries", type=int, default=None, help="queries per window (default 50)")
    p.add_argument("--memory", default="in_memory", choices=("in_memory", "log"))
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--quick", action="store_true", help="small counts, under a minute")
    args = p.parse_args(argv)
    n = args.n if args.n is not None else (2_000 if args.quick else 100_000)
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    queries = args.queries if args.queries is not None else (10 if args.quick else 50)
    if n < 100 or rounds < 1 or queries < 1:
        p.error("--n must be >= 100, --rounds and --queries >= 1")
    started = time.perf_counter()
    results = run(n, rounds, queries, args.seed, args.memory)
    print(
        f"coniti engine benchmark: N={n:,}, memory={args.memory}, rounds={rounds}, "
        f"queries={queries} per window, seed={args.seed}, "
        f"{math.ceil(time.perf_counter() - started)} s"
    )
    print(table(results))
    return 0

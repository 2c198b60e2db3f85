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

``--part engine`` also measures the persisted engine over a LogBackend (open to first answer in a
fresh process, peak RSS, asks now and through ``engine.at(seq)`` at start/middle/head against numpy
brute force): see ``bench/persisted.py``; ``--part persisted`` runs that alone (for N=1,000,000), and ``--part restore`` measures the
snapshot open path alone on the cached matrix (see ``bench/persisted.py``, ``RESTORE_DOC``). ``--part structures`` measures the structures alone (search against numpy brute force on the same
slice, build time and peak memory in a child process, adds in and out of time order, ANN recall):
see ``STRUCTURE_DOC`` below. ``--part all`` (the default) runs both parts.
"""

from __future__ import annotations

import argparse
import itertools
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
from .persisted import persisted_table, restore_table, run_persisted, run_restore

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
    # cumulative weights once: the same draws as weights=, without re-summing them per note
    weights = list(itertools.accumulate(1.0 / (rank + 1) ** 1.05 for rank in range(len(vocab))))
    t0 = 1_767_225_600.0
    notes = []
    for i in range(n):
        words = rng.choices(vocab, cum_weights=weights, k=rng.randint(8, 30))
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
    p.add_argument(
        "--part", default="all", choices=("all", "engine", "persisted", "restore", "structures"),
        help="engine (ingest, ask) and/or structures alone (search vs brute force, build, ANN)",
    )  # fmt: skip
    p.add_argument(
        "--structures", default="flat,segment_tree,ann",
        help="for --part structures, and the persisted engine (flat, segment_tree)",
    )  # fmt: skip
    p.add_argument("--vectors", default="local_hash", help="embedder for --part structures")
    p.add_argument("--ef", default="16,32,64,128", help="ann expansion_search values")
    p.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()), help="matrix cache dir")
    p.add_argument(
        "--baseline-code", type=Path, default=None,
        help="also build with the coniti package in this directory (e.g. an export of main)",
    )  # fmt: skip
    p.add_argument("--add-batches", type=int, default=20, help="timed adds of 500, per order")
    p.add_argument(
        "--keep", type=Path, default=None,
        help="persisted part: keep the stores here and reuse them in the next run (no ingest)",
    )  # fmt: skip
    p.add_argument("--opens", type=int, default=1, help="persisted part: fresh-process opens (median)")
    p.add_argument(
        "--numpy-twins", action="store_true",
        help="search in this process with the numpy twins of the compiled kernels (what an install "
        "without a C compiler runs)",
    )  # fmt: skip
    p.add_argument("--child-build", help=argparse.SUPPRESS)
    p.add_argument("--child-rows", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--child-times", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child_build:
        child_build(args.child_build, args.child_rows, args.child_times, args.add_batches)
        return 0
    n = args.n if args.n is not None else (2_000 if args.quick else 100_000)
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    queries = args.queries if args.queries is not None else (10 if args.quick else 50)
    if n < 100 or rounds < 1 or queries < 1:
        p.error("--n must be >= 100, --rounds and --queries >= 1")
    names = [s for s in args.structures.split(",") if s]
    efs = [int(e) for e in args.ef.split(",") if e]
    from coniti.structure import scoring

    if args.numpy_twins:
        scoring.kernels = None
    print(f"scoring: {'numpy twins' if scoring.kernels is None else 'compiled kernels'}")
    started = time.perf_counter()
    if args.part in ("all", "engine"):
        results = run(n, rounds, queries, args.seed, args.memory)
        print(
            f"coniti engine benchmark: N={n:,}, memory={args.memory}, rounds={rounds}, "
            f"queries={queries} per window, seed={args.seed}, "
            f"{math.ceil(time.perf_counter() - started)} s"
        )
        print(table(results))
    if args.part in ("all", "engine", "persisted"):
        persisted = run_persisted(
            n, [s for s in STRUCTURES if s in names], queries, args.seed, keep=args.keep,
            opens=args.opens,
        )  # fmt: skip
        print(persisted_table(persisted))
        print(f"({math.ceil(time.perf_counter() - started)} s)")
    if args.part == "restore":
        print(restore_table(run_restore(n, args.seed, args.vectors, args.cache, rounds)))
    if args.part in ("all", "structures"):
        figures = run_structures(
            n, names, args.vectors, queries, args.seed, efs, args.cache, args.baseline_code,
            args.add_batches,
        )  # fmt: skip
        print(structure_tables(figures))
        print(f"({math.ceil(time.perf_counter() - started)} s)")
    return 0


# -- structures alone: search vs numpy brute force, build time and memory, adds, ANN recall ------

STRUCTURE_DOC = """Structure benchmark (``--part structures``): the structures alone, on one matrix.

Vectors: the N notes of :func:`corpus` embedded once with ``--vectors`` (``local_hash``, 256 dims, or
``minilm``, 384 dims) and cached as ``.npy`` under ``--cache`` (default the temp dir); queries: the
question texts of :func:`questions`, embedded the same way. Timestamps are the notes' (in time order).

* **search**, per structure and window (full, random 10%, random 1%): ``Structure.search(q, k=10)``
  alone (validation, the slice, scoring, exact re-scoring of candidates); **brute** in the same run,
  same query: numpy on the same matrix (``flat``'s own time-sorted rows when ``flat`` is measured)
  and the same slice (``searchsorted`` for the
  slice, one float32 product on the calling thread, ``argpartition`` top 10, sorted); outside both
  timers: embedding the query. Medians over the queries; **ratio**: the median over queries of
  search / brute for the same query (paired, so load drift on a shared machine cancels).
* **build**, per structure, in a child process (clean peak memory): the rows are fed as the engine
  feeds them on open, ``add`` of chunks of 65,536 (each chunk copied out of a memory-mapped ``.npy``, so
  the matrix itself is not anonymous memory), then one search (segment_tree builds its node statistics
  there). Figures: seconds (adds, then the first search), peak and final anonymous RSS above the
  child's baseline, as a multiple of the float32 matrix size.
* **add**, same child after the build: batches of 500 in time order (after the newest row) and out of
  order (uniform over the stored range): median and max ms over ``--add-batches`` (20) batches each, then ``optimize()``
  (merging what was buffered) when the structure has it.
* **ANN**: recall@10 of ``ann`` against ``flat`` (the exact top 10) and median search ms, per
  ``expansion_search`` (ef) in ``--ef``, full range and 10% window.
"""

CHUNK = 65_536


def _matrix_path(cache: Path, vectors: str, n: int, seed: int) -> Path:
    return cache / f"coniti-bench-{vectors}-{n}-{seed}.npy"


def _embedder(vectors: str) -> Any:
    from coniti.embedding import EMBEDDERS

    return EMBEDDERS.create(vectors)


def matrix(n: int, seed: int, vectors: str, cache: Path) -> tuple[Path, Path]:
    """The cached ``.npy`` files (rows, times) of the corpus embedded with ``vectors``."""
    rows_path = _matrix_path(cache, vectors, n, seed)
    times_path = rows_path.with_suffix(".times.npy")
    if not rows_path.exists() or not times_path.exists():
        import numpy as np

        notes = corpus(n, seed)
        embedder = _embedder(vectors)
        out = np.lib.format.open_memmap(
            rows_path.with_suffix(".tmp.npy"), mode="w+", dtype=np.float32, shape=(n, embedder.dim)
        )
        for a in range(0, n, 4096):
            out[a : a + 4096] = embedder.embed([x.text for x in notes[a : a + 4096]])
        out.flush()
        del out
        rows_path.with_suffix(".tmp.npy").rename(rows_path)
        np.save(times_path, np.array([x.timestamp for x in notes], dtype=np.float64))
    return rows_path, times_path


def child_build(structure: str, rows_path: Path, times_path: Path, batches: int = 20) -> None:
    """Build ``structure`` from the cached rows as the engine's open does, then time adds; print the
    figures as one JSON line (run in a fresh process by :func:`measure_build`)."""
    import json

    import numpy as np

    from coniti.structure import STRUCTURES

    from .peak import _status_kb, anon_peak

    rows = np.load(rows_path, mmap_mode="r")
    times = np.load(times_path)
    n, dim = rows.shape
    s = STRUCTURES.create(structure)
    query = np.array(rows[0], dtype=np.float32)
    with anon_peak() as memory:
        t = time.perf_counter()
        for a in range(0, n, CHUNK):
            chunk = np.array(rows[a : a + CHUNK])
            s.add([f"{i:032x}" for i in range(a, a + chunk.shape[0])], chunk, times[a : a + CHUNK])
            del chunk
        adds = time.perf_counter() - t
        t = time.perf_counter()
        s.search(query, k=10)
        first = time.perf_counter() - t
    base, peak = memory
    final = _status_kb("RssAnon")
    rng = np.random.default_rng(1)
    lo, hi = float(times[0]), float(times[-1])
    figures: dict[str, float] = {
        "build_s": adds,
        "first_search_s": first,
        "matrix_mb": n * dim * 4 / 2**20,
        "peak_mb": (peak - base) / 1024,
        "final_mb": (final - base) / 1024,
    }
    for label, make_times in (
        ("in_order", lambda b: hi + 1.0 + b * 1000.0 + np.arange(500.0)),
        ("out_of_order", lambda b: lo + rng.random(500) * (hi - lo)),
    ):
        spent = []
        for b in range(batches):
            batch = rng.normal(size=(500, dim)).astype(np.float32)
            ids = [f"{label}-{b}-{j}" for j in range(500)]
            stamps = make_times(b)
            t = time.perf_counter()
            s.add(ids, batch, stamps)
            spent.append(time.perf_counter() - t)
        figures[f"add_{label}_ms"] = statistics.median(spent) * 1000.0
        figures[f"add_{label}_max_ms"] = max(spent) * 1000.0
    optimize = getattr(s, "optimize", None)
    if optimize is not None:
        t = time.perf_counter()
        optimize()
        figures["optimize_ms"] = (time.perf_counter() - t) * 1000.0
    print(json.dumps(figures))


def measure_build(
    structure: str, rows_path: Path, times_path: Path, batches: int, code: Path | None = None
) -> dict[str, float]:
    """:func:`child_build` in a fresh process; ``code``: import ``coniti`` from that directory
    instead (to measure another version of the structures)."""
    import json
    import os
    import subprocess
    import sys

    from .common import ROOT

    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = f"{code}{os.pathsep}{env.get('PYTHONPATH', '')}"
    cmd = [
        sys.executable,
        str(ROOT / "tools" / "bench_engine.py"),
        "--child-build",
        structure,
        "--child-rows",
        str(rows_path),
        "--child-times",
        str(times_path),
        "--add-batches",
        str(batches),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"build of {structure} failed:\n{proc.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return figures


def _brute(rows: Any, times: Any, query: Any, window: TimeRange | None, k: int) -> Any:
    import numpy as np

    from coniti.structure.scoring import fast_scores

    lo, hi = 0, rows.shape[0]
    if window is not None:
        lo = int(np.searchsorted(times, window.start, "left"))
        hi = int(np.searchsorted(times, window.end, "left"))
    scores = fast_scores(rows[lo:hi], query)
    if scores.shape[0] > k:
        top = np.argpartition(scores, scores.shape[0] - k)[scores.shape[0] - k :]
    else:
        top = np.arange(scores.shape[0])
    return lo + top[np.argsort(-scores[top], kind="stable")]


def run_structures(
    n: int,
    names: Sequence[str],
    vectors: str,
    queries: int,
    seed: int,
    efs: Sequence[int],
    cache: Path,
    baseline_code: Path | None,
    batches: int = 20,
) -> dict[str, Any]:
    """Every figure of the structure benchmark (see ``STRUCTURE_DOC``)."""
    import numpy as np

    from coniti.structure import STRUCTURES
    from coniti.structure.scoring import unit_rows

    rows_path, times_path = matrix(n, seed, vectors, cache)
    rows = np.load(rows_path)
    times = np.load(times_path)
    notes = corpus(min(n, 5_000), seed)
    embedder = _embedder(vectors)
    qs = unit_rows(embedder.embed(questions(notes, queries, seed)))
    span = TimeRange(start=float(times[0]), end=float(times[-1]) + 1.0)
    rng = random.Random(seed + 1)
    ranges: dict[str, list[TimeRange | None]] = {}
    for label, fraction in WINDOWS:
        if fraction is None:
            ranges[label] = [None] * queries
            continue
        assert span.start is not None and span.end is not None
        width = (span.end - span.start) * fraction
        starts = [span.start + rng.random() * (span.end - span.start - width) for _ in range(queries)]
        ranges[label] = [TimeRange(start=s, end=s + width) for s in starts]
    out: dict[str, Any] = {"n": n, "dim": rows.shape[1], "vectors": vectors}
    out["build"] = {s: measure_build(s, rows_path, times_path, batches) for s in names}
    if baseline_code is not None:
        out["build_baseline"] = {
            s: measure_build(s, rows_path, times_path, batches, baseline_code)
            for s in names
            if s != "ann"
        }
    built = {}
    for s in names:
        structure = STRUCTURES.create(s)
        for a in range(0, n, CHUNK):
            structure.add(
                [f"{i:032x}" for i in range(a, min(n, a + CHUNK))], rows[a : a + CHUNK], times[a : a + CHUNK]
            )
        built[s] = structure
    # brute force reads the flat structure's own time-sorted rows when there is one: the same memory
    # (pages, caches) as the structure it is compared with
    flat_rows: Any = getattr(built.get("flat"), "_rows", None)
    if flat_rows is not None:
        brute_rows, brute_times = flat_rows.vecs[: flat_rows.n], flat_rows.times[: flat_rows.n]
    else:
        brute_rows, brute_times = rows, times
    search: dict[str, dict[str, float]] = {}
    for label, _ in WINDOWS:
        spent: dict[str, list[float]] = {s: [] for s in [*names, "brute"]}
        for i, (q, window) in enumerate(zip(qs, ranges[label], strict=True)):
            exact = None
            order = list(names) if i % 2 == 0 else list(names)[::-1]
            if i % 2:
                _brute(brute_rows, brute_times, q, window, 10)  # same warm-up as the structures
            for s in order:
                t = time.perf_counter()
                hits = built[s].search(q, k=10, time_range=window)
                spent[s].append(time.perf_counter() - t)
                if s != "ann":
                    ids = [h.id for h in hits]
                    if exact is not None and ids != exact:
                        raise SystemExit(f"{s} returned other hits than the exact structures: stopping")
                    exact = ids
            t = time.perf_counter()
            _brute(brute_rows, brute_times, q, window, 10)
            spent["brute"].append(time.perf_counter() - t)
        search[label] = {s: statistics.median(v) * 1000.0 for s, v in spent.items()}
        for s in names:  # paired: each query's search over the same query's brute force
            ratios = [a / b for a, b in zip(spent[s], spent["brute"], strict=True)]
            search[label][f"{s}_ratio"] = statistics.median(ratios)
    out["search"] = search
    if "ann" in built and "flat" in built:
        ann: Any = built["ann"]
        recall: dict[str, dict[int, tuple[float, float]]] = {}
        for label in ("full", "10pct"):
            recall[label] = {}
            truth = [
                {h.id for h in built["flat"].search(q, k=10, time_range=w)}
                for q, w in zip(qs, ranges[label], strict=True)
            ]
            for ef in efs:
                ann.expansion_search = ef
                found, spent_ann = 0, []
                for q, w, want in zip(qs, ranges[label], truth, strict=True):
                    t = time.perf_counter()
                    hits = ann.search(q, k=10, time_range=w)
                    spent_ann.append(time.perf_counter() - t)
                    found += len(want & {h.id for h in hits})
                total = sum(len(w) for w in truth)
                recall[label][ef] = (found / total, statistics.median(spent_ann) * 1000.0)
        out["recall"] = recall
    return out


def structure_tables(figures: dict[str, Any]) -> str:
    """Markdown tables of :func:`run_structures`' figures."""
    lines = [
        f"structures alone: N={figures['n']:,}, {figures['vectors']} vectors ({figures['dim']} dims)",
        "",
        "| window | structure | search ms | numpy brute on the slice ms | ratio (median per query) |",
        "|---|---|---:|---:|---:|",
    ]
    for label, values in figures["search"].items():
        for s, ms in values.items():
            if s == "brute" or s.endswith("_ratio"):
                continue
            lines.append(
                f"| {label} | {s} | {ms:.3f} | {values['brute']:.3f} | {values[s + '_ratio']:.2f}x |"
            )
    lines += [
        "",
        "| structure | code | build s | first search s | peak anon MB (x matrix) | final MB | "
        "add 500 in order ms (max) | add 500 out of order ms (max) | optimize ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, code in (("build", "this"), ("build_baseline", "baseline")):
        for s, f in figures.get(key, {}).items():
            lines.append(
                f"| {s} | {code} | {f['build_s']:.2f} | {f['first_search_s']:.3f} | "
                f"{f['peak_mb']:.0f} ({f['peak_mb'] / f['matrix_mb']:.2f}x) | {f['final_mb']:.0f} | "
                f"{f['add_in_order_ms']:.2f} ({f['add_in_order_max_ms']:.1f}) | "
                f"{f['add_out_of_order_ms']:.2f} ({f['add_out_of_order_max_ms']:.1f}) | "
                f"{f.get('optimize_ms', float('nan')):.1f} |"
            )
    if "recall" in figures:
        lines += ["", "| window | ef | ann recall@10 vs flat | ann search ms |", "|---|---:|---:|---:|"]
        for label, per_ef in figures["recall"].items():
            for ef, (recall, ms) in per_ef.items():
                lines.append(f"| {label} | {ef} | {recall:.3f} | {ms:.3f} |")
    return "\n".join(lines)

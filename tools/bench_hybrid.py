#!/usr/bin/env python3
"""Ask latency per recall strategy at scale: semantic, keyword, hybrid, hybrid with MMR, recent.

Usage (from the repository root)::

    .venv/bin/python tools/bench_hybrid.py                  # N=100,000 notes, 200 queries
    .venv/bin/python tools/bench_hybrid.py --quick          # N=2,000, 30 queries, seconds
    .venv/bin/python tools/bench_hybrid.py --n 20000 --queries 100 --json hybrid.json

Workload: the engine benchmark's corpus (``tools/bench/engine.py``: N notes of 8 to 30 words from a
Zipf-weighted vocabulary, timestamps about five minutes apart, deterministic from ``--seed``),
ingested into ``Container(memory="in_memory", embedding="local_hash", embedding_dim=384)`` in
batches of 500: 384 is minilm's vector length, so the structures do minilm's arithmetic, while
embedding costs what the hash embedder costs (minilm's own cost of embedding one question is
measured separately and printed, when it is installed, with ``--minilm``).

With ``--sessions S`` the notes are conversation turns: note ``i`` carries ``metadata={"session":
i // S}``, so the keyword index scores its conversation windows (``coniti.keyword``).

Each query (the first words of a random note, as in the engine benchmark) is asked with every
strategy back to back, the order rotating per query: ``Query(text=..., k=10, strategy=...)`` for
``semantic``, ``keyword`` and ``hybrid``, ``hybrid`` with ``mmr=0.5``, and ``recent`` with a random
10% time window (recent takes no text). **ms** is the median wall-clock latency of ``engine.ask``
(embedding included), **p95** its 95th percentile, **ratio** the median over queries of the
query's latency divided by its ``semantic`` latency in the same run. **ingest** is notes/s of the
whole ingest (structures, keyword index and memory write); **keyword index** is the size of
``KeywordIndex.state()`` in MB. Times are wall clock on a shared machine: compare rows of one run.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT))

from bench.engine import corpus, questions  # noqa: E402

from coniti import Container, Query, TimeRange  # noqa: E402

STRATEGIES = ("semantic", "keyword", "hybrid", "hybrid+mmr", "recent")
BATCH = 500
DIM = 384


def _query(strategy: str, text: str, window: TimeRange) -> Query:
    if strategy == "recent":
        return Query(time_range=window, k=10, strategy="recent")
    if strategy == "hybrid+mmr":
        return Query(text=text, k=10, strategy="hybrid", mmr=0.5)
    return Query(text=text, k=10, strategy=strategy)  # type: ignore[arg-type]


def run(n: int, queries: int, seed: int, sessions: int = 0) -> dict[str, Any]:
    """Ingest ``n`` notes (turns of sessions of ``sessions`` notes, when given) and time every
    strategy on ``queries`` queries (module docstring)."""
    notes = corpus(n, seed)
    if sessions:
        notes = [n_.model_copy(update={"metadata": {**n_.metadata, "session": i // sessions}}) for i, n_ in enumerate(notes)]
    texts = questions(notes, queries, seed)
    rng = random.Random(seed + 3)
    lo, hi = notes[0].timestamp, notes[-1].timestamp + 1.0
    width = (hi - lo) * 0.10
    windows = []
    for _ in range(queries):
        start = lo + rng.random() * (hi - lo - width)
        windows.append(TimeRange(start=start, end=start + width))
    with Container(embedding="local_hash", embedding_dim=DIM) as container:
        engine = container.engine
        start = time.perf_counter()
        for i in range(0, len(notes), BATCH):
            engine.ingest_many(notes[i : i + BATCH])
        ingest = len(notes) / (time.perf_counter() - start)
        state = engine.keyword_index().state()
        size = sum(v.nbytes for v in state.values() if hasattr(v, "nbytes")) / 1e6
        times: dict[str, list[float]] = {s: [] for s in STRATEGIES}
        for q, (text, window) in enumerate(zip(texts, windows, strict=True)):
            order = STRATEGIES[q % len(STRATEGIES):] + STRATEGIES[: q % len(STRATEGIES)]
            for strategy in order:
                query = _query(strategy, text, window)
                start = time.perf_counter()
                engine.ask(query)
                times[strategy].append((time.perf_counter() - start) * 1000.0)
    base = times["semantic"]
    rows = {}
    for strategy, ms in times.items():
        ordered = sorted(ms)
        rows[strategy] = {
            "ms": statistics.median(ms),
            "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
            "ratio": statistics.median(m / b for m, b in zip(ms, base, strict=True)),
        }
    return {"n": n, "queries": queries, "seed": seed, "sessions": sessions, "ingest_notes_per_s": ingest,
            "keyword_index_mb": size, "strategies": rows}  # fmt: skip


def minilm_question_ms(count: int = 20) -> float | None:
    """Median ms of minilm embedding one question, or None when minilm cannot be built."""
    try:
        from coniti.embedding import EMBEDDERS

        embedder = EMBEDDERS.create("minilm")
        embedder.embed(["warm up"])
    except Exception:
        return None
    ms = []
    for i in range(count):
        start = time.perf_counter()
        embedder.embed([f"what did we decide about the budget in week {i}?"])
        ms.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(ms)


def table(figures: dict[str, Any]) -> str:
    lines = [
        f"N={figures['n']:,} notes, {figures['queries']} queries; ingest {figures['ingest_notes_per_s']:,.0f} "
        f"notes/s; keyword index {figures['keyword_index_mb']:.1f} MB",
        "",
        "| strategy | ms (median) | p95 ms | ratio to semantic |",
        "|---|--:|--:|--:|",
    ]
    for strategy, row in figures["strategies"].items():
        lines.append(f"| {strategy} | {row['ms']:.2f} | {row['p95']:.2f} | {row['ratio']:.2f} |")
    if figures.get("minilm_question_ms") is not None:
        lines.append("")
        lines.append(f"minilm embeds one question in {figures['minilm_question_ms']:.1f} ms (median), "
                     "added to semantic and hybrid asks with that embedder")  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="notes (default 100,000)")
    parser.add_argument("--queries", type=int, default=200, help="queries (default 200)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="N=2,000 and 30 queries")
    parser.add_argument("--sessions", type=int, default=0, help="notes per session (0: plain notes)")
    parser.add_argument("--minilm", action="store_true", help="also time minilm embedding a question")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="write figures here")
    args = parser.parse_args(argv)
    n, queries = (2_000, 30) if args.quick else (args.n, args.queries)
    if n < 10 or queries < 1:
        parser.error("--n must be at least 10 and --queries at least 1")
    print(f"command: {' '.join(sys.orig_argv if argv is None else ['tools/bench_hybrid.py', *argv])}")
    figures = run(n, queries, args.seed, args.sessions)
    figures["minilm_question_ms"] = minilm_question_ms() if args.minilm else None
    print(table(figures))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

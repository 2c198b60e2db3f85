#!/usr/bin/env python3
"""The embedding benchmark: texts/s of minilm against local_hash, on the same texts, by batch size.

Usage (from the repository root)::

    .venv/bin/python tools/bench_embed.py                      # 128 demo notes, 3 rounds
    .venv/bin/python tools/bench_embed.py --texts 64 --rounds 5 --batch-sizes 1,32
    .venv/bin/python tools/bench_embed.py --blas-threads none  # leave OpenBLAS's own thread count

Texts: the first ``--texts`` notes of coniti's demo corpus (``coniti/data/demo-notes.jsonl``, 6 to 40
words each), repeated when more are asked for. Per round, for each batch size and each embedder in
turn (the order alternates between rounds), the benchmark embeds all texts in batches of that size
and records texts/s of wall clock and texts per second of the process's CPU time (which shows work
that the load on a shared machine hides, and BLAS threads that spin); it prints medians over rounds,
the wall clock's [min..max], and minilm's median as a fraction of local_hash's in the same run. ``--blas-threads`` sets ``MiniLMEmbedder.blas_threads``
(``1`` by default, ``none`` for OpenBLAS's default). Wall clock on a shared machine: compare rows
of one run, not runs of different days. The model is loaded before timing starts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coniti.embedding import EMBEDDERS, Embedder  # noqa: E402
from coniti.minilm import MiniLMEmbedder  # noqa: E402

CORPUS = ROOT / "coniti" / "data" / "demo-notes.jsonl"


def corpus(n: int) -> list[str]:
    """``n`` texts from the demo corpus, cycling through it when ``n`` exceeds its size."""
    notes = [json.loads(line)["text"] for line in CORPUS.read_text(encoding="utf-8").splitlines()]
    return [notes[i % len(notes)] for i in range(n)]


def rate(embedder: Embedder, texts: list[str], batch: int) -> tuple[float, float]:
    """Texts per second of wall clock and per second of this process's CPU time, in batches."""
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(texts), batch):
        embedder.embed(texts[i : i + batch])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return len(texts) / wall, len(texts) / max(cpu, 1e-9)


def blas_description() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "BLAS: threadpoolctl not installed"
    libs = [
        f"{i['internal_api']} {i.get('version')} ({i.get('architecture')}, {i['num_threads']} threads)"
        for i in threadpool_info()
        if i["user_api"] == "blas"
    ]
    return "BLAS: " + ("; ".join(libs) or "none found")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=128, help="texts per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-sizes", default="1,8,32,128")
    parser.add_argument("--blas-threads", default="1", help="an integer, or 'none'")
    args = parser.parse_args(argv)
    batches = [int(b) for b in args.batch_sizes.split(",")]
    MiniLMEmbedder.blas_threads = None if args.blas_threads == "none" else int(args.blas_threads)

    texts = corpus(args.texts)
    embedders: dict[str, Embedder] = {
        "minilm": MiniLMEmbedder(),
        "local_hash": EMBEDDERS.create("local_hash"),
    }
    for embedder in embedders.values():
        embedder.embed(texts[:8])  # warm: caches, BLAS threads, first-call allocations
    rates: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for round_ in range(args.rounds):
        names = list(embedders) if round_ % 2 == 0 else list(embedders)[::-1]
        for batch in batches:
            for name in names:
                rates.setdefault((name, batch), []).append(rate(embedders[name], texts, batch))

    words = statistics.mean(len(t.split()) for t in texts)
    print(
        f"{len(texts)} texts (mean {words:.1f} words), {args.rounds} rounds, "
        f"minilm blas_threads={MiniLMEmbedder.blas_threads}; {blas_description()}"
    )
    print(
        "| embedder | batch | texts/s median | [min..max] | minilm / local_hash "
        "| texts per CPU-s median |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for batch in batches:
        hash_median = statistics.median(r for r, _ in rates[("local_hash", batch)])
        for name in embedders:
            walls = [r for r, _ in rates[(name, batch)]]
            cpus = [c for _, c in rates[(name, batch)]]
            median = statistics.median(walls)
            ratio = f"{median / hash_median:.4f}" if name == "minilm" else ""
            print(
                f"| {name} | {batch} | {median:,.1f} | [{min(walls):,.1f}..{max(walls):,.1f}] "
                f"| {ratio} | {statistics.median(cpus):,.1f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

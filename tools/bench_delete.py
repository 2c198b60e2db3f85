"""Delete in batches of 500 on the log backend, CPU and wall, one process per call (issue 33).

    .venv/bin/python tools/bench_delete.py STORE build   # once: 20,000 notes, 10 namespaces
    .venv/bin/python tools/bench_delete.py STORE time    # one JSON line of figures
    .venv/bin/python tools/bench_delete.py STORE prof    # the same under cProfile

``build`` writes 20,000 notes (384-dim vectors looked up by an embedder, ``structure="flat"``,
``durability`` the log backend's default ``"sync"``) in batches of 500, each batch one namespace,
the 10 namespaces taking turns. ``time`` copies the store, opens it, loads every namespace (one
ask over all, one ask in each namespace deleted from; outside the timer), then times four
``engine.remove(ids, namespace=...)`` calls of 500 ids each (a tenth of the notes; each call
returns after its durable commit): ``time.perf_counter`` (wall) and ``time.process_time`` (CPU)
around the four calls. Run ``time`` alternately with two checkouts (``PYTHONPATH``) and take medians.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time

import numpy as np

from coniti import Container, NoteBatch, Query
from coniti.embedding import Embedder, EmbeddingSpec

N, NS, B, DIM = 20000, 10, 500, 384
VECTORS = np.random.default_rng(0).standard_normal((N, DIM))
VECTORS /= np.linalg.norm(VECTORS, axis=1, keepdims=True)


class Table(Embedder):
    """The vector of ``note I x`` is row I of :data:`VECTORS`."""

    name = "bench_table"

    @property
    def spec(self) -> EmbeddingSpec:
        return EmbeddingSpec(name="bench_table", version=1, dim=DIM)

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([VECTORS[int(t.split()[1])] for t in texts]).astype(np.float64)


def nid(i: int) -> str:
    return f"n{i:07d}"


def build(path: str) -> None:
    box = Container("log", path=path, embedding=Table(), structure="flat")
    for s in range(0, N, B):
        rows = range(s, s + B)
        batch = NoteBatch(
            [nid(i) for i in rows], [f"note {i} x" for i in rows],
            [1.7e9 + i for i in rows], [{"user": f"u{i % 100}"} for i in rows],
        )  # fmt: skip
        box.engine.ingest_many(batch, namespace=(f"ns{(s // B) % NS}",))
    box.close()


def run(path: str, profile: bool) -> None:
    work = f"{path}.run{os.getpid()}"
    shutil.copytree(path, work)
    box = Container("log", path=work, embedding=Table(), structure="flat")
    engine = box.engine
    batches = [((f"ns{k}",), [nid(i) for i in range(k * B, (k + 1) * B)]) for k in range(4)]
    engine.ask(Query(text="note 1 x", k=10, strategy="semantic"), prefix=())
    for ns, _ in batches:
        engine.ask(Query(text="note 1 x", k=10, strategy="semantic"), namespace=ns)
    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
    w0, c0 = time.perf_counter(), time.process_time()
    results = [engine.remove(ids, namespace=ns) for ns, ids in batches]
    w1, c1 = time.perf_counter(), time.process_time()
    if profile:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
    count = sum(len(ids) for _, ids in batches)
    print(json.dumps({
        "notes_per_s": count / (w1 - w0),
        "cpu_ms_per_batch": (c1 - c0) * 1000 / len(batches),
        "wall_ms_per_batch": (w1 - w0) * 1000 / len(batches),
        "deleted": [len(r.deleted) for r in results],
    }))  # fmt: skip
    box.close()
    shutil.rmtree(work)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ("build", "time", "prof"):
        sys.exit(__doc__)
    if sys.argv[2] == "build":
        build(sys.argv[1])
    else:
        run(sys.argv[1], sys.argv[2] == "prof")

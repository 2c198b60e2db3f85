"""Update one note on the log backend, CPU and wall per call, one process per run (issue 33).

    .venv/bin/python tools/bench_delete.py STORE build   # once: 20,000 notes, 10 namespaces
    .venv/bin/python tools/bench_update.py STORE time    # one JSON line of figures
    .venv/bin/python tools/bench_update.py STORE prof    # the same under cProfile
    .venv/bin/python tools/bench_update.py STORE nosync  # the store opened durability="nosync"

The store is :mod:`bench_delete`'s (20,000 notes, 384-dim vectors looked up by an embedder,
``structure="flat"``, ``durability="sync"``, 10 namespaces). ``time`` copies the store, opens
it, loads every namespace (one ask over all, outside the timer), then makes 50 calls
``engine.update(id, text=..., namespace=...)`` on notes spread over the 10 namespaces (each a new
text: embedded, written, committed durably before the call returns), timing each with
``time.process_time`` (CPU) and ``time.perf_counter`` (wall); it prints the medians. Run ``time``
alternately with two checkouts (``PYTHONPATH``) and compare medians. ``nosync`` opens the copy with
``durability="nosync"`` (no flush at commit): the CPU of everything but the flush, steadier on a
shared disk (the flush's kernel time counts in ``process_time``).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time

from bench_delete import NS, Table, nid

from coniti import Container, Query

UPDATES = 50


def run(path: str, profile: bool, durability: str) -> None:
    work = f"{path}.upd{os.getpid()}"
    shutil.copytree(path, work)
    box = Container("log", path=work, embedding=Table(), structure="flat", durability=durability)
    engine = box.engine
    engine.ask(Query(text="note 1 x", k=10, strategy="semantic"), prefix=())
    # note i lives in namespace (i // 500) % NS; 50 notes 397 apart cover every namespace
    targets = [(i * 397) % 20000 for i in range(1, UPDATES + 1)]
    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
    cpu, wall = [], []
    for j, i in enumerate(targets):
        ns = (f"ns{(i // 500) % NS}",)
        text = f"note {(i + 7919 * (j + 1)) % 20000} x"  # another row's vector: a new text
        w0, c0 = time.perf_counter(), time.process_time()
        engine.update(nid(i), text=text, namespace=ns)
        w1, c1 = time.perf_counter(), time.process_time()
        cpu.append(c1 - c0)
        wall.append(w1 - w0)
    if profile:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(35)
    print(json.dumps({
        "cpu_ms": statistics.median(cpu) * 1000,
        "wall_ms": statistics.median(wall) * 1000,
        "updates": len(cpu),
    }))  # fmt: skip
    box.close()
    shutil.rmtree(work)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ("time", "prof", "nosync"):
        sys.exit(__doc__)
    run(sys.argv[1], sys.argv[2] == "prof", "nosync" if sys.argv[2] == "nosync" else "sync")

#!/usr/bin/env python3
"""Cluster throughput, side by side in one run: single-node durable puts vs cluster puts (a local
3-server JetStream cluster, R=3, on loopback), and the fold rate of a joining node.

Usage (from the repository root; needs coniti[cluster])::

    .venv/bin/python tools/bench_cluster.py                 # N=2,000 puts per row
    .venv/bin/python tools/bench_cluster.py --n 200         # quick

Rows: one record per put, sequential, on a single store (``durability="sync"``); the same on a
cluster node (each put one stream message acknowledged by a quorum, then committed locally with
``sync``); the same from ``--threads`` threads on one node (concurrent puts share one transaction
and one message, see coniti.log.group); then a node joining with an empty directory folds the
whole stream (events and messages per second). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from coniti.actor import Note  # noqa: E402
from coniti.cluster import Cluster  # noqa: E402
from coniti.cluster.servers import LocalCluster  # noqa: E402
from coniti.impl.log import LogBackend  # noqa: E402
from coniti.memory import MemoryRecord, PutRequest  # noqa: E402

DIM = 384


def _request(rid: str, rng: np.random.Generator) -> PutRequest:
    vector = rng.standard_normal(DIM).astype(np.float32)
    note = Note(id=rid, text=f"note {rid}: a sentence or two of agent memory", timestamp=1.0)
    return PutRequest(records=[MemoryRecord(note=note, vector=vector)])


def _sequential(store: LogBackend, n: int, prefix: str) -> tuple[float, list[float]]:
    rng = np.random.default_rng(0)
    requests = [_request(f"{prefix}{i}", rng) for i in range(n)]
    lat: list[float] = []
    start = time.perf_counter()
    for r in requests:
        t = time.perf_counter()
        store.put(r)
        lat.append(time.perf_counter() - t)
    return time.perf_counter() - start, lat


def _threaded(store: LogBackend, n: int, threads: int, prefix: str) -> float:
    rng = np.random.default_rng(1)
    requests = [_request(f"{prefix}{i}", rng) for i in range(n)]
    chunks = [requests[i::threads] for i in range(threads)]

    def work(chunk: list[PutRequest]) -> None:
        for r in chunk:
            store.put(r)

    workers = [threading.Thread(target=work, args=(c,)) for c in chunks]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - start


def _row(name: str, n: int, seconds: float, lat: list[float] | None) -> str:
    p50 = f"{statistics.median(lat) * 1e3:.2f}" if lat else "-"
    p99 = f"{sorted(lat)[int(len(lat) * 0.99) - 1] * 1e3:.2f}" if lat else "-"
    return f"| {name} | {n:,} | {seconds:.2f} | {n / seconds:,.0f} | {p50} | {p99} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="puts per row (default 2000)")
    parser.add_argument("--threads", type=int, default=8, help="threads of the concurrent row (default 8)")
    args = parser.parse_args(argv)
    n = args.n
    rows = ["| run | puts | seconds | puts/s | p50 ms | p99 ms |", "|---|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory(prefix="coniti-bench-cluster-") as tmp:
        root = Path(tmp)
        with LogBackend(root / "single", durability="sync") as single:
            seconds, lat = _sequential(single, n, "s")
        rows.append(_row("single node, durable (sync)", n, seconds, lat))
        with LocalCluster(root / "nats") as servers:
            cluster = Cluster(servers.urls, stream="bench", replicas=3)
            with LogBackend(root / "node", durability="sync", cluster=cluster) as node:
                seconds, lat = _sequential(node, n, "c")
                rows.append(_row("cluster node, R=3 loopback, sync", n, seconds, lat))
                seconds = _threaded(node, n, args.threads, "t")
                rows.append(_row(f"cluster node, R=3, {args.threads} threads", n, seconds, None))
                events = node.head
            start = time.perf_counter()
            with LogBackend(root / "joiner", durability="nosync", cluster=cluster) as joiner:
                fold = time.perf_counter() - start
                assert joiner.head == events
            import asyncio

            import nats

            async def last_seq() -> int:
                nc = await nats.connect(servers=servers.urls)
                try:
                    return int((await nc.jetstream().stream_info("bench")).state.last_seq)
                finally:
                    await nc.close()

            messages = asyncio.run(last_seq())
    print("\n".join(rows))
    print()
    print(
        f"fold of a joining node (empty directory, nosync): {events:,} events in {messages:,} "
        f"messages in {fold:.2f} s = {events / fold:,.0f} events/s, {messages / fold:,.0f} messages/s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""As-of reads against current reads on a LogBackend with a long history (issue 4's requirement:
``at(seq).get`` and one page of ``at(seq).scan`` within 3x of the current get and page, for a point
near the start, the middle and the head of 1,000,000 events).

Usage (from the repository root)::

    .venv/bin/python tools/bench_asof.py                           # 1,000,000 events, both timestamp orders
    .venv/bin/python tools/bench_asof.py --quick                   # 20,000 events: a smoke run, seconds
    .venv/bin/python tools/bench_asof.py --events 200000 --order random --rounds 7
    .venv/bin/python tools/bench_asof.py --keep /tmp/asof-stores   # keep the built stores afterwards

The history (seeded, deterministic): puts in calls of 500 records, each followed by a delete call
removing 75 live records chosen at random (15% of what was put), until the log holds ``--events``
events; so the version history holds about 1.2 versions per live record, and deleted versions lie
everywhere in the indexes.
Note timestamps (``--order``): ``ordered`` follow write order with jitter (an agent's notes ingested
as they happen), ``random`` are uniform over the whole span (a back-filled memory: the adversarial
case for as-of scans, whose pages must skip the versions not visible at the point).

Points: the event at 5% of the log (``start``), 50% (``middle``) and the head. For each point, one
round times ``--gets`` one-id gets of ids visible at the point, on the view and (the same number of
calls, ids live now) on the store; and ``--pages`` scan pages of 500 records from start timestamps
spread over the records visible at the point, on the view and on the store. Each call is made once
untimed on both sides first, so that both read pages the OS has cached (the figures compare the
index work, not the disk); timed calls alternate between view and store, which goes first
alternating too. The table shows the median of all timed calls of each kind (``--rounds`` x ``--gets``
gets, ``--rounds`` x ``--pages`` pages), and the ratio as-of / current. The objects built before
timing are frozen out of the garbage collector (``gc.freeze``). Wall-clock ``time.perf_counter``; nothing here is asserted by a test (a smoke
test runs ``--quick``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from coniti.actor import Note, TimeRange
from coniti.impl.log import LogBackend
from coniti.memory import (
    DeleteRequest,
    GetRequest,
    MemoryBackend,
    MemoryRecord,
    PutRequest,
    ScanRequest,
)

from .common import seconds, settle, summary_line, workdir

__all__ = ["main"]

BATCH = 500
DELETE_SHARE = 0.15
PAGE = 500
DIM = 64
BASE_TIME = 1_700_000_000.0
TARGET = 3.0


class History:
    """Every version written: put seq, end seq (0 while live), id, note timestamp."""

    def __init__(self) -> None:
        self.put: list[int] = []
        self.end: list[int] = []
        self.ids: list[str] = []
        self.ts: list[float] = []

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return np.asarray(self.put), np.asarray(self.end), np.asarray(self.ts)

    def visible(self, seq: int) -> np.ndarray:
        put, end, _ = self.arrays()
        return np.nonzero((put <= seq) & ((end == 0) | (end > seq)))[0]


def build(path: Path, events: int, order: str, seed: int) -> History:
    """Write the seeded history into a new store at ``path`` (durability "nosync", synced at the end)."""
    rng = random.Random(seed)
    np_rng = np.random.default_rng(seed)
    history = History()
    live: list[int] = []
    seq = 0
    n = 0
    span = events * 1.0
    started = time.perf_counter()
    with LogBackend(path, durability="nosync", actor="bench") as store:
        while seq < events:
            size = min(BATCH, events - seq)
            vectors = np_rng.standard_normal((size, DIM)).astype("float32")
            records = []
            for k in range(size):
                if order == "ordered":
                    ts = BASE_TIME + n + rng.gauss(0.0, 0.25)
                else:
                    ts = BASE_TIME + rng.random() * span
                rid = f"rec-{n:08d}"
                records.append(
                    MemoryRecord.trusted(
                        Note.trusted(rid, f"note {n}: " + "lorem ipsum dolor " * 5, ts, {"n": n}),
                        vectors[k],
                        "bench-emb",
                        (),
                    )
                )
                history.put.append(seq + k + 1)
                history.end.append(0)
                history.ids.append(rid)
                history.ts.append(ts)
                live.append(len(history.put) - 1)
                n += 1
            store.put(PutRequest.model_construct(records=records))
            seq += size
            doomed = min(int(size * DELETE_SHARE), len(live), events - seq)
            if doomed > 0:
                gone = []
                for _ in range(doomed):
                    i = rng.randrange(len(live))
                    live[i], live[-1] = live[-1], live[i]
                    gone.append(live.pop())
                result = store.delete(DeleteRequest(ids=[history.ids[v] for v in gone]))
                assert len(result.deleted) == doomed, result.missing[:3]
                for v, rid in zip(gone, result.deleted, strict=True):
                    assert history.ids[v] == rid
                    seq += 1
                    history.end[v] = seq
            if seq % 100_000 < BATCH + doomed:
                print(f"  built {seq:,} events ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
        store.sync()
        assert store.head == seq, (store.head, seq)
    return history


def _ids_at(history: History, seq: int, count: int, rng: random.Random) -> list[str]:
    vis = history.visible(seq)
    picks = [int(vis[rng.randrange(len(vis))]) for _ in range(count)]
    return [history.ids[v] for v in picks]


def _starts_at(history: History, seq: int, count: int) -> list[float]:
    vis = history.visible(seq)
    ts = np.sort(np.asarray(history.ts)[vis])
    usable = max(1, len(ts) - PAGE)
    return [float(ts[int(usable * (k + 0.5) / count)]) for k in range(count)]


def _get(backend: MemoryBackend, rid: str) -> None:
    if not backend.get(GetRequest(ids=[rid])).records:
        raise AssertionError(f"{rid} not found in {backend!r}")


def _page(backend: MemoryBackend, start: float) -> None:
    got = backend.scan(ScanRequest(time_range=TimeRange(start=start), limit=PAGE)).records
    if len(got) != PAGE:
        raise AssertionError(f"a page from {start} held {len(got)} records on {backend!r}")


def _time_pair(
    k: int,
    call: Callable[[MemoryBackend, Any], None],
    on_view: tuple[MemoryBackend, Any],
    on_store: tuple[MemoryBackend, Any],
    view_times: list[float],
    store_times: list[float],
) -> None:
    """Make both calls once untimed (so both sides time pages already in the OS cache), then time
    each: the view's first when ``k`` is even, the store's first when it is odd."""
    call(*on_view)
    call(*on_store)
    if k % 2:
        store_times.append(seconds(call, *on_store))
        view_times.append(seconds(call, *on_view))
    else:
        view_times.append(seconds(call, *on_view))
        store_times.append(seconds(call, *on_store))


def measure(store: LogBackend, history: History, points: dict[str, int], args: argparse.Namespace
            ) -> dict[str, dict[str, float]]:
    rng = random.Random(args.seed + 1)
    head = store.head
    out: dict[str, dict[str, float]] = {}
    for name, seq in points.items():
        view = store.at(seq)
        opened = [sum(seconds(store.at, seq) for _ in range(200)) / 200 for _ in range(3)]
        get_view: list[float] = []
        get_cur: list[float] = []
        page_view: list[float] = []
        page_cur: list[float] = []
        for _ in range(args.rounds):
            view_ids = _ids_at(history, seq, args.gets, rng)
            cur_ids = _ids_at(history, head, args.gets, rng)
            for k, (a, b) in enumerate(zip(view_ids, cur_ids, strict=True)):
                _time_pair(k, _get, (view, a), (store, b), get_view, get_cur)
            starts_view = _starts_at(history, seq, args.pages)
            starts_cur = _starts_at(history, head, args.pages)
            for k, (a2, b2) in enumerate(zip(starts_view, starts_cur, strict=True)):
                _time_pair(k, _page, (view, a2), (store, b2), page_view, page_cur)
        out[name] = {
            "seq": seq,
            "visible": int(len(history.visible(seq))),
            "open_us": statistics.median(opened) * 1e6,
            "get_asof_us": statistics.median(get_view) * 1e6,
            "get_current_us": statistics.median(get_cur) * 1e6,
            "page_asof_ms": statistics.median(page_view) * 1e3,
            "page_current_ms": statistics.median(page_cur) * 1e3,
        }
    return out


def table(order: str, events: int, results: dict[str, dict[str, float]]) -> str:
    lines = [
        f"timestamps {order}, {events:,} events: medians of every timed call",
        f"{'point':<8} {'seq':>9} {'visible':>9} {'open us':>8} | {'get as-of':>10} {'current':>8} "
        f"{'ratio':>6} | {'page as-of':>10} {'current':>8} {'ratio':>6}",
    ]
    for name, r in results.items():
        g = r["get_asof_us"] / r["get_current_us"]
        p = r["page_asof_ms"] / r["page_current_ms"]
        lines.append(
            f"{name:<8} {int(r['seq']):>9,} {int(r['visible']):>9,} {r['open_us']:>8.1f} | "
            f"{r['get_asof_us']:>8.1f}us {r['get_current_us']:>6.1f}us {g:>5.2f}x{'' if g <= TARGET else '!'} | "
            f"{r['page_asof_ms']:>8.2f}ms {r['page_current_ms']:>6.2f}ms {p:>5.2f}x{'' if p <= TARGET else '!'}"
        )
    return "\n".join(lines)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=summary_line(__doc__))
    ap.add_argument("--events", type=int, default=None,
                    help="events in the log (default 1,000,000; 20,000 with --quick)")
    ap.add_argument("--order", choices=["ordered", "random", "both"], default="both",
                    help="note timestamps in write order, random, or a run of each (default)")
    ap.add_argument("--rounds", type=int, default=5, help="timing rounds per point (median shown)")
    ap.add_argument("--gets", type=int, default=2000, help="get calls per round and side")
    ap.add_argument("--pages", type=int, default=40, help="scan pages per round and side")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--keep", type=Path, default=None,
                    help="directory to build the stores in and keep them (default: a temporary one)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures as JSON here")
    ap.add_argument("--quick", action="store_true", help="20,000 events, 2 rounds, fewer calls")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.gets, args.pages = 2, 200, 3
    if args.events is None:
        args.events = 20_000 if args.quick else 1_000_000
    if args.events < 12_000:
        ap.error("--events must be at least 12,000 (the start point needs a full page of records)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    orders = ["ordered", "random"] if args.order == "both" else [args.order]
    print(f"coniti as-of benchmark: python {platform.python_version()}, {platform.machine()}, "
          f"{os.cpu_count()} cpus; argv {sys.argv[1:]}")
    report: dict[str, Any] = {"events": args.events, "rounds": args.rounds, "orders": {}}
    with workdir(args.keep, "coniti-bench-asof-") as root:
        for order in orders:
            path = root / f"store-{order}-{args.events}-{args.seed}"
            if path.exists():
                shutil.rmtree(path)
            started = time.perf_counter()
            history = build(path, args.events, order, args.seed)
            built = time.perf_counter() - started
            settle()
            with LogBackend(path) as store:
                head = store.head
                points = {"start": max(1, head // 20), "middle": head // 2, "head": head}
                results = measure(store, history, points, args)
            size = os.path.getsize(path / "data.mdb")
            print(f"\nbuilt in {built:.0f} s, data file {size / 1e6:.0f} MB")
            print(table(order, head, results))
            report["orders"][order] = {"build_s": built, "bytes": size, "points": results}
            if args.keep is None:  # one store's disk at a time
                shutil.rmtree(path, ignore_errors=True)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2))
    worst = max(
        max(r["get_asof_us"] / r["get_current_us"], r["page_asof_ms"] / r["page_current_ms"])
        for o in report["orders"].values()
        for r in o["points"].values()
    )
    print(f"\nworst as-of / current ratio: {worst:.2f}x (target <= {TARGET:.0f}x)")
    return 0

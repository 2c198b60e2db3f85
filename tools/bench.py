#!/usr/bin/env python3
"""coniti's side-by-side benchmark: coniti's backends against raw LMDB and sqlite, in one run.

Usage (from the repository root)::

    .venv/bin/python tools/bench.py                      # N=20,000, 3 rounds, every phase
    .venv/bin/python tools/bench.py --quick              # N=2,000, 2 rounds, small counts: < 1 minute
    .venv/bin/python tools/bench.py --n 100000 --phases bulk,get,scan --systems log,lmdb
    .venv/bin/python tools/bench.py --n 1000000 --rounds 1 --phases reopen,peak --systems log,lmdb
    .venv/bin/python tools/bench.py --namespaces 100 --ids time  # the many-namespace, time-ordered-id variant
    .venv/bin/python tools/bench.py --profile get,scan --systems log   # cProfile of coniti's timed calls

Systems (``--systems``; see ``bench_systems.py``): ``log`` (coniti LogBackend, durability "sync"),
``memory`` (InMemoryBackend), ``lmdb`` (raw LMDB written in the benchmark: the minimum work coniti's
design needs) and ``sqlite`` (sqlite3, WAL, synchronous=FULL). The workload (``bench_workload.py``) is
deterministic and seeded: every system stores the same records.

A round builds a fresh store per system, then runs the selected phases in order. Within a phase the
systems are interleaved (batch by batch, call by call, or chunk by chunk) and their order rotates from
round to round, so drift of the machine falls on every system alike. Each metric gets one figure per
round; the table shows the median and [min..max] over rounds, and each coniti figure as a ratio to raw
LMDB and to sqlite (``x``: coniti's figure divided by the baseline's, in the metric's unit, so read it
with the unit's direction, e.g. >1 is better for rec/s and worse for us/call). The target column
checks issue 7's targets on the LogBackend rows. The benchmark checks that all systems return the same
records and counts and stops if they do not.

Phases (``--phases``, comma-separated; default all):

bulk        put N records in durable batches of 500 (rec/s)
single      500 durable one-record put calls (us/call)
concurrent  8 threads doing one-record durable puts (rec/s, all threads together); coniti also with
            group commit off (``log_nogc``: LogBackend(group_commit=False) on a copy of ``log``'s
            store made just before the phase, so both write into the same N records)
get         5,000 random ids, one id per call, full records back (us/call)
scan        every record in (timestamp, write order), pages of 500 (rec/s)
count       count over the middle half of the time range (us/call)
asof        LogBackend.at(seq): view open, get and a scan page at the start (5%), middle and head of
            history, with the current store's get and page from the same start points (us/call,
            ms/page); and, at the start and middle, the page that ends the view's visible records
            (it must find that nothing later is visible)
reopen      close, open, first get (ms)
size        bytes on disk per record (files of the store, lock files excluded)
dump        dump and load of the memory file (rec/s); the raw LMDB row is the floor: the same lines
            written from raw LMDB records with orjson, and coniti's file parsed and put raw
rebuild     LogBackend.rebuild() and verify() (events/s)
peak        peak memory of dump, verify and a full scan, each in a fresh subprocess: anonymous RSS
            sampled every 2 ms (heap, numpy and LMDB buffers; excludes the mapped store file) and
            peak RSS (VmHWM, includes mapped file pages, so it grows with what the op touches)
engine      engine ingest and ask, from tools/bench_engine.py when it exists

Times are wall-clock (time.perf_counter) with the garbage collector on, as callers run; before each
phase the objects alive so far are frozen (gc.freeze), so one system's data does not slow another's
collections. No test
asserts a time: ``tests/test_bench_smoke.py`` only runs ``--quick`` at a tiny N.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lmdb  # noqa: E402
from bench_systems import (  # noqa: E402
    SYSTEMS,
    ConitiSystem,
    LogSystem,
    RawLMDB,
    System,
    make_system,
    scan_page_of,
)
from bench_workload import Workload, WorkloadSpec  # noqa: E402

from coniti.memory import GetRequest, MemoryBackend  # noqa: E402

PHASES = (
    "bulk",
    "single",
    "concurrent",
    "get",
    "scan",
    "count",
    "asof",
    "reopen",
    "size",
    "dump",
    "rebuild",
    "peak",
    "engine",
)
BASELINES = ("lmdb", "sqlite")
CONITI = ("log", "memory")
ROOT = Path(__file__).resolve().parent.parent


# -- metrics, targets and results --------------------------------------------------------------


@dataclass(frozen=True)
class Term:
    """One target condition: ``value [/ reference] op bound``.

    With ``system`` and/or ``metric`` the value is divided by that reference's median (same run).
    """

    op: str
    bound: float
    system: str | None = None
    metric: str | None = None

    def describe(self) -> str:
        op = {">=": ">=", "<=": "<=", "<": "<"}[self.op]
        if self.system is None and self.metric is None:
            return f"{op} {self.bound:g}"
        ref = self.system or ""
        if self.metric is not None:
            ref = f"{ref} {self.metric}".strip()
        return f"{op} {self.bound:g}x {ref}"


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    higher: bool
    target: tuple[Term, ...] = ()
    digits: int = 0


def _m(key: str, label: str, unit: str, higher: bool, *target: Term, digits: int = 0) -> Metric:
    return Metric(key, label, unit, higher, tuple(target), digits)


METRICS: dict[str, Metric] = {
    m.key: m
    for m in [
        _m(
            "bulk",
            "bulk put, batches of 500",
            "rec/s",
            True,
            Term(">=", 0.5, "lmdb"),
            Term(">=", 1.0, "sqlite"),
        ),
        _m("single", "single durable put", "us/call", False, Term("<=", 1.2, "lmdb")),
        _m(
            "concurrent",
            "8 writers, 1-record puts",
            "rec/s",
            True,
            Term(">=", 2.0, "sqlite"),
            Term(">=", 4.0, "log_nogc"),
        ),
        _m("get", "get 1 id, full record", "us/call", False, Term("<=", 2.0, "lmdb"), digits=1),
        _m("scan", "ordered scan, pages of 500", "rec/s", True, Term(">=", 0.5, "lmdb")),
        _m("count", "count, middle half of range", "us/call", False, digits=1),
        _m("asof_open", "as-of: open view at(seq)", "us/call", False, digits=1),
        _m("asof_get_cur", "as-of: current get, same ids", "us/call", False, digits=1),
        _m(
            "asof_get_start",
            "as-of get @ start (5%)",
            "us/call",
            False,
            Term("<=", 3.0, "log", "asof_get_cur"),
            digits=1,
        ),
        _m(
            "asof_get_middle",
            "as-of get @ middle",
            "us/call",
            False,
            Term("<=", 3.0, "log", "asof_get_cur"),
            digits=1,
        ),
        _m(
            "asof_get_head",
            "as-of get @ head",
            "us/call",
            False,
            Term("<=", 3.0, "log", "asof_get_cur"),
            digits=1,
        ),
        _m("asof_page_cur", "as-of: current page, same starts", "ms/page", False, digits=2),
        _m(
            "asof_page_start",
            "as-of page @ start (5%)",
            "ms/page",
            False,
            Term("<=", 3.0, "log", "asof_page_cur"),
            digits=2,
        ),
        _m(
            "asof_page_middle",
            "as-of page @ middle",
            "ms/page",
            False,
            Term("<=", 3.0, "log", "asof_page_cur"),
            digits=2,
        ),
        _m(
            "asof_page_head",
            "as-of page @ head",
            "ms/page",
            False,
            Term("<=", 3.0, "log", "asof_page_cur"),
            digits=2,
        ),
        _m(
            "asof_last_start",
            "as-of last page @ start (5%)",
            "ms/page",
            False,
            Term("<=", 3.0, "log", "asof_page_cur"),
            digits=2,
        ),
        _m(
            "asof_last_middle",
            "as-of last page @ middle",
            "ms/page",
            False,
            Term("<=", 3.0, "log", "asof_page_cur"),
            digits=2,
        ),
        _m("reopen", "reopen: close, open, first get", "ms", False, Term("<", 5.0), digits=2),
        _m("size", "size on disk", "B/rec", False, Term("<=", 1.3, "lmdb")),
        _m("dump", "dump memory file", "rec/s", True, Term(">=", 50_000)),
        _m("load", "load memory file", "rec/s", True, Term(">=", 25_000)),
        _m("rebuild", "rebuild projections", "ev/s", True),
        _m("verify", "verify log + projections", "ev/s", True),
        _m("peak_dump", "peak anon memory: dump", "MB", False, Term("<", 200), digits=1),
        _m("peak_verify", "peak anon memory: verify", "MB", False, Term("<", 200), digits=1),
        _m("peak_scan", "peak anon memory: full scan", "MB", False, Term("<", 200), digits=1),
        _m("rss_dump", "peak RSS (VmHWM): dump", "MB", False, digits=1),
        _m("rss_verify", "peak RSS (VmHWM): verify", "MB", False, digits=1),
        _m("rss_scan", "peak RSS (VmHWM): full scan", "MB", False, digits=1),
    ]
}


@dataclass
class Results:
    """Per-round figures by (metric key, system key), in the order they were first recorded."""

    values: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, metric: str, system: str, value: float) -> None:
        if metric not in METRICS:
            raise KeyError(f"unknown metric {metric!r}")
        self.values.setdefault((metric, system), []).append(value)

    def median(self, metric: str, system: str) -> float | None:
        vals = self.values.get((metric, system))
        return statistics.median(vals) if vals else None

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)
            print(f"note: {text}", file=sys.stderr)


# -- the run -----------------------------------------------------------------------------------


@dataclass
class Config:
    n: int
    rounds: int
    systems: list[str]
    phases: list[str]
    spec: WorkloadSpec
    single: int
    writers: int
    per_writer: int
    gets: int
    count_calls: int
    reopens: int
    asof_gets: int
    asof_pages: int
    base: Path
    profile: list[str]
    profile_out: Path | None
    quick: bool
    verbose: bool


class Bench:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.work = Workload(cfg.spec)
        self.results = Results()
        self.profilers: dict[str, cProfile.Profile] = {}
        self.stored = 0

    # -- helpers -----------------------------------------------------------------------------

    def log(self, text: str) -> None:
        if self.cfg.verbose:
            print(text, file=sys.stderr, flush=True)

    def selected(self, phase: str) -> bool:
        return phase in self.cfg.phases

    def profiler(self, phase: str, system: System) -> cProfile.Profile | None:
        if phase not in self.cfg.profile or not isinstance(system, ConitiSystem):
            return None
        return self.profilers.setdefault(f"{phase}-{system.key}", cProfile.Profile())

    def timed(self, phase: str, system: System, fn: Callable[[], object]) -> float:
        """Seconds ``fn()`` takes (profiled when ``--profile`` names ``phase``)."""
        prof = self.profiler(phase, system)
        if prof is not None:
            prof.enable()
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        if prof is not None:
            prof.disable()
        return dt

    def timed_loop(
        self, phase: str, system: System, fn: Callable[[Any], object], items: Iterable[Any]
    ) -> float:
        prof = self.profiler(phase, system)
        if prof is not None:
            prof.enable()
        t0 = time.perf_counter()
        for item in items:
            fn(item)
        dt = time.perf_counter() - t0
        if prof is not None:
            prof.disable()
        return dt

    def fail(self, text: str) -> None:
        raise SystemExit(f"bench: {text}")

    # -- rounds ------------------------------------------------------------------------------

    def run(self) -> Results:
        cfg = self.cfg
        for r in range(cfg.rounds):
            k = r % len(cfg.systems)
            order = [
                make_system(key, cfg.base / f"r{r}-{key}")
                for key in cfg.systems[k:] + cfg.systems[:k]
            ]
            self.log(f"round {r + 1}/{cfg.rounds}: {', '.join(s.key for s in order)}")
            try:
                self.round(order, r)
            finally:
                for s in order:
                    s.destroy()
        if "engine" in cfg.phases:
            self.engine()
        return self.results

    def round(self, order: list[System], r: int) -> None:
        for s in order:
            s.open()
        self.stored = 0
        steps: list[tuple[str, Callable[[list[System], int], None]]] = [
            ("bulk", self.bulk),
            ("single", self.single),
            ("concurrent", self.concurrent),
            ("get", self.get),
            ("scan", self.scan),
            ("count", self.count),
            ("asof", self.asof),
            ("reopen", self.reopen),
            ("size", self.size),
            ("dump", self.dump),
            ("rebuild", self.rebuild),
            ("peak", self.peak),
        ]
        try:
            for name, step in steps:
                if name == "bulk" or self.selected(name):
                    # Long-lived objects so far (the workload, in-memory stores) go to the permanent
                    # generation, so that a system's collections do not scan another system's data.
                    gc.collect()
                    gc.freeze()
                    t0 = time.perf_counter()
                    step(order, r)
                    self.log(f"  {name}: {time.perf_counter() - t0:.1f} s")
        finally:
            gc.unfreeze()

    # -- phases ------------------------------------------------------------------------------

    def bulk(self, order: list[System], r: int) -> None:
        """Fill every store with the N records, batch by batch, systems interleaved per batch."""
        spent = dict.fromkeys((s.key for s in order), 0.0)
        for batch in self.work.batches(0, self.cfg.n):
            for s in order:
                prepared = s.prepare(batch)
                spent[s.key] += self.timed("bulk", s, lambda s=s, p=prepared: s.put(p))
        self.stored = self.cfg.n
        if self.selected("bulk"):
            for s in order:
                self.results.add("bulk", s.key, self.cfg.n / spent[s.key])

    def single(self, order: list[System], r: int) -> None:
        n, count = self.cfg.n, self.cfg.single
        raws = self.work.records(n, n + count)
        prepared = {s.key: [s.prepare([raw]) for raw in raws] for s in order}
        spent = dict.fromkeys((s.key for s in order), 0.0)
        for i in range(count):
            for s in order:
                spent[s.key] += self.timed("single", s, lambda s=s, p=prepared[s.key][i]: s.put(p))
        self.stored = n + count
        for s in order:
            self.results.add("single", s.key, spent[s.key] / count * 1e6)

    def concurrent(self, order: list[System], r: int) -> None:
        """8 writer threads, one-record puts. The records are written in 4 slices; within a slice
        every system runs in turn, so a burst of disk load from outside falls on all of them. With
        ``log`` selected, a LogBackend with group commit off runs too, on its own store."""
        cfg = self.cfg
        start = self.stored
        total = cfg.writers * cfg.per_writer
        raws = self.work.records(start, start + total)
        systems: list[System] = list(order)
        log = next((s for s in order if isinstance(s, LogSystem)), None)
        if log is not None:  # a copy of log's store: the same data, only group commit differs
            copy = cfg.base / f"r{r}-{LogNoGroupSystem.key}"
            log.close()
            shutil.copytree(log.path, copy)
            log.open()
            nogc = LogNoGroupSystem(copy)
            nogc.open()
            systems.append(nogc)
        prepared = {s.key: [s.prepare([raw]) for raw in raws] for s in systems}
        slices = 4 if total >= 4 * cfg.writers else 1
        bounds = [total * k // slices for k in range(slices + 1)]
        spent = dict.fromkeys((s.key for s in systems), 0.0)
        try:
            for k in range(slices):
                for s in systems:
                    part = prepared[s.key][bounds[k] : bounds[k + 1]]
                    spent[s.key] += self.writers_run(
                        s, [part[w :: cfg.writers] for w in range(cfg.writers)]
                    )
        finally:
            for s in systems[len(order) :]:
                s.destroy()
        for s in systems:
            self.results.add("concurrent", s.key, total / spent[s.key])
        self.stored = start + total

    def writers_run(self, s: System, chunks: list[list[Any]]) -> float:
        """Seconds for one thread per chunk to put its items, all released at once."""
        barrier = threading.Barrier(len(chunks) + 1)
        errors: list[BaseException] = []

        def writer(items: list[Any]) -> None:
            barrier.wait()
            try:
                for p in items:
                    s.put(p)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(c,)) for c in chunks]
        for t in threads:
            t.start()
        prof = self.profiler("concurrent", s)
        if prof is not None:
            prof.enable()
        t0 = time.perf_counter()
        barrier.wait()
        for t in threads:
            t.join()
        dt = time.perf_counter() - t0
        if prof is not None:
            prof.disable()
        if errors:
            self.fail(f"{s.key}: concurrent writer failed: {errors[0]!r}")
        return dt

    def sample(self, k: int, r: int, limit: int | None = None) -> list[tuple[tuple[str, ...], str]]:
        rng = random.Random(self.cfg.spec.seed * 1000 + r)
        hi = self.stored if limit is None else limit
        idx = [rng.randrange(hi) for _ in range(k)]
        return [(self.work.namespace_of(i), self.work.ids[i]) for i in idx]

    def check_same(self, order: list[System], what: str, values: dict[str, Any]) -> None:
        first = next(iter(values.values()))
        for key, v in values.items():
            if v != first:
                self.fail(f"systems disagree on {what}: {values}")
            _ = key

    def get(self, order: list[System], r: int) -> None:
        pairs = self.sample(self.cfg.gets, r)
        # correctness, untimed: every system returns the workload's record for a few ids
        for ns, rid in pairs[:5]:
            i = self.work.ids.index(rid)
            expect = self.work.records(i, i + 1)[0]
            for s in order:
                rec = s.get(ns, rid)
                text = rec.note.text if isinstance(s, ConitiSystem) else rec.text
                vec = rec.vector
                if text != expect.text or vec.tobytes() != expect.vector.tobytes():
                    self.fail(f"{s.key}: get({rid!r}) returned a different record")
        spent = dict.fromkeys((s.key for s in order), 0.0)
        for lo in range(0, len(pairs), 500):
            chunk = pairs[lo : lo + 500]
            for s in order:
                spent[s.key] += self.timed_loop("get", s, lambda p, s=s: s.get(p[0], p[1]), chunk)
        for s in order:
            self.results.add("get", s.key, spent[s.key] / len(pairs) * 1e6)

    def scan(self, order: list[System], r: int) -> None:
        counts: dict[str, int] = {}
        for s in order:
            total = 0

            def scan_all(s: System = s) -> None:
                nonlocal total
                for ns in self.work.namespace_list:
                    total += s.scan_all(ns, 500)

            dt = self.timed("scan", s, scan_all)
            counts[s.key] = total
            self.results.add("scan", s.key, total / dt)
        self.check_same(order, "scanned record count", counts)
        if next(iter(counts.values())) != self.stored:
            self.fail(f"scan returned {counts} records, {self.stored} were stored")

    def count(self, order: list[System], r: int) -> None:
        ts = sorted(self.work.timestamps[: self.stored])
        start, end = ts[len(ts) // 4], ts[3 * len(ts) // 4]
        namespaces = self.work.namespace_list
        calls = [namespaces[c % len(namespaces)] for c in range(self.cfg.count_calls)]
        answers: dict[str, list[int]] = {}
        for s in order:
            answers[s.key] = [s.count(ns, start, end) for ns in namespaces[:3]]
        self.check_same(order, "count", answers)
        for s in order:
            dt = self.timed_loop("count", s, lambda ns, s=s: s.count(ns, start, end), calls)
            self.results.add("count", s.key, dt / len(calls) * 1e6)

    def asof(self, order: list[System], r: int) -> None:
        logs = [s for s in order if isinstance(s, LogSystem)]
        if not logs:
            return
        s = logs[0]
        backend: Any = s.b
        if not hasattr(backend, "at"):
            self.results.note("asof skipped: LogBackend has no at() yet")
            return
        cfg = self.cfg
        ns0 = self.work.namespace_list[0]
        in_ns0 = [i for i in range(self.stored) if self.work.ns_index[i] == 0]
        # Points of history by how many workload records they hold; the view is at the put event of
        # the last of them (other events, e.g. the group-commit-off writer's, may lie between).
        points = {
            "start": max(1, self.stored // 20),
            "middle": self.stored // 2,
            "head": self.stored,
        }
        cur_get = 0.0
        cur_page = 0.0
        opened = 0.0
        for name, held in points.items():
            if held == self.stored:
                seq = int(backend.head)
            else:
                last = held - 1
                seq = backend.history(self.work.ids[last], self.work.namespace_of(last))[0].seq
            dt = self.timed("asof", s, lambda seq=seq: backend.at(seq))
            opened += dt
            view = backend.at(seq)
            seen = view.count(view.count_request(namespace=ns0)).count
            expect = sum(1 for i in in_ns0 if i < held)
            if seen != expect:
                self.fail(f"at({seq}) counts {seen} records in {ns0}, expected {expect}")
            pairs = self.sample(cfg.asof_gets, r + 17, limit=held)

            def get_in(b: Any, p: tuple[tuple[str, ...], str]) -> None:
                res = b.get(GetRequest(ids=[p[1]], namespace=p[0]))
                if not res.records:
                    raise KeyError(p[1])

            t_view = self.timed_loop("asof", s, lambda p, v=view: get_in(v, p), pairs)
            t_cur = self.timed_loop("asof", s, lambda p: get_in(backend, p), pairs)
            self.results.add(f"asof_get_{name}", s.key, t_view / len(pairs) * 1e6)
            cur_get += t_cur / len(pairs) * 1e6 / len(points)
            visible = [i for i in in_ns0 if i < held]
            t_q = self.work.timestamps[visible[len(visible) // 2]]
            reps = range(cfg.asof_pages)
            t_vp = self.timed_loop(
                "asof", s, lambda _, v=view, t=t_q: scan_page_of(v, ns0, None, 500, t), reps
            )
            t_cp = self.timed_loop(
                "asof", s, lambda _, t=t_q: scan_page_of(backend, ns0, None, 500, t), reps
            )
            self.results.add(f"asof_page_{name}", s.key, t_vp / cfg.asof_pages * 1e3)
            cur_page += t_cp / cfg.asof_pages * 1e3 / len(points)
            if name != "head":
                # The page holding the last 100 visible records: it must also establish that no
                # later version of the range is visible at this point (next_cursor None).
                ts_visible = sorted(self.work.timestamps[i] for i in visible)
                t_last = ts_visible[max(0, len(ts_visible) - 100)]
                expect_last = sum(1 for t in ts_visible if t >= t_last)
                records, more = scan_page_of(view, ns0, None, 500, t_last)
                if len(records) != expect_last or more is not None:
                    self.fail(
                        f"at({seq}): last page holds {len(records)} records, expected {expect_last}"
                    )
                t_lp = self.timed_loop(
                    "asof", s, lambda _, v=view, t=t_last: scan_page_of(v, ns0, None, 500, t), reps
                )
                self.results.add(f"asof_last_{name}", s.key, t_lp / cfg.asof_pages * 1e3)
            if hasattr(view, "close"):
                view.close()
        self.results.add("asof_open", s.key, opened / len(points) * 1e6)
        self.results.add("asof_get_cur", s.key, cur_get)
        self.results.add("asof_page_cur", s.key, cur_page)

    def reopen(self, order: list[System], r: int) -> None:
        ns, rid = self.sample(1, r)[0]
        for s in order:
            if not s.persistent:
                continue
            spent = []
            for _ in range(self.cfg.reopens):
                gc.collect()

                def cycle(s: System = s) -> None:
                    s.close()
                    s.open()
                    s.get(ns, rid)

                spent.append(self.timed("reopen", s, cycle))
            self.results.add("reopen", s.key, statistics.median(spent) * 1e3)

    def size(self, order: list[System], r: int) -> None:
        for s in order:
            if s.persistent:
                self.results.add("size", s.key, s.disk_bytes() / self.stored)

    def dump(self, order: list[System], r: int) -> None:
        """Dump every namespace to memory files, then load them into a fresh store of the same
        system, systems interleaved. The raw LMDB row is the floor (``RawLMDB.dump_file`` and
        ``load_file``): its dump writes the same record lines coniti writes (checked, untimed), and
        its load reads coniti's file (or its own when no coniti system runs)."""
        try:
            import coniti.memfile  # noqa: F401
        except ImportError:
            self.results.note("dump/load skipped: coniti.memfile is not there yet")
            return
        namespaces = self.work.namespace_list
        systems: list[System] = [s for s in order if isinstance(s, ConitiSystem | RawLMDB)]
        files = {
            s.key: [self.cfg.base / f"dump-{s.key}-{k}.jsonl" for k in range(len(namespaces))]
            for s in systems
        }
        try:
            for s in systems:
                dt = self.timed("dump", s, lambda s=s: self.dump_files(s, files[s.key]))
                self.results.add("dump", s.key, self.stored / dt)
            self.check_same(
                systems,
                "the record lines of the memory files",
                {s.key: [_record_lines(f) for f in files[s.key]] for s in systems},
            )
            written = [s.key for s in systems if isinstance(s, ConitiSystem)]
            loaded: dict[str, int] = {}
            for s in systems:
                source = files[s.key if isinstance(s, ConitiSystem) or not written else written[0]]
                target = type(s)(self.cfg.base / f"load-{s.key}")
                target.open()
                try:
                    dt = self.timed("dump", s, lambda t=target, fs=source: self.load_files(t, fs))
                    self.results.add("load", s.key, self.stored / dt)
                    loaded[s.key] = sum(target.scan_all(ns) for ns in namespaces)  # untimed
                finally:
                    target.destroy()
            self.check_same(systems, "the records loaded from the memory files", loaded)
        finally:
            for paths in files.values():
                for f in paths:
                    f.unlink(missing_ok=True)
        if any(isinstance(s, RawLMDB) for s in systems):
            self.results.note(
                "dump/load on the raw LMDB row is the floor of the memory file: dump = read every "
                "record from raw LMDB + orjson.dumps of the same dict + write bytes (one fsync); "
                "load = read coniti's file line by line + orjson.loads + the vector cast to float32 "
                "(struct + np.frombuffer, as coniti casts it) + raw LMDB put in batches of 500"
            )

    def dump_files(self, s: System, files: list[Path]) -> None:
        for ns, f in zip(self.work.namespace_list, files, strict=True):
            if isinstance(s, RawLMDB):
                s.dump_file(ns, f)
            elif isinstance(s, ConitiSystem):
                s.b.dump(f, namespace=ns)

    def load_files(self, s: System, files: list[Path]) -> None:
        for f in files:
            if isinstance(s, RawLMDB):
                s.load_file(f)
            elif isinstance(s, ConitiSystem):
                s.b.load(f)

    def rebuild(self, order: list[System], r: int) -> None:
        for s in order:
            if not isinstance(s, LogSystem):
                continue
            backend: Any = s.b
            if not hasattr(backend, "rebuild") or not hasattr(backend, "verify"):
                self.results.note(
                    "rebuild/verify skipped: LogBackend has no rebuild()/verify() yet"
                )
                return
            events = int(getattr(backend, "head", self.stored))
            dt = self.timed("rebuild", s, backend.rebuild)
            self.results.add("rebuild", s.key, events / dt)
            report: list[Any] = []
            dt = self.timed("rebuild", s, lambda b=backend, out=report: out.append(b.verify()))
            self.results.add("verify", s.key, events / dt)
            problems = getattr(report[0], "problems", None)
            if problems:
                self.fail(
                    f"verify() found problems after the benchmark's writes: {problems!r}"[:500]
                )

    def peak(self, order: list[System], r: int) -> None:
        namespaces = json.dumps([list(ns) for ns in self.work.namespace_list])
        for s in order:
            if not s.persistent:
                continue
            ops = ["dump", "verify", "scan"] if isinstance(s, LogSystem) else ["scan"]
            s.close()
            try:
                for op in ops:
                    if op == "dump":
                        try:
                            import coniti.memfile  # noqa: F401
                        except ImportError:
                            continue
                    cmd = [
                        sys.executable,
                        str(Path(__file__).resolve()),
                        "--child-peak",
                        op,
                        "--child-system",
                        s.key,
                        "--child-path",
                        str(s.path),
                        "--child-namespaces",
                        namespaces,
                    ]
                    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
                    if proc.returncode != 0:
                        if "no attribute 'verify'" in proc.stderr:
                            self.results.note("peak verify skipped: LogBackend has no verify() yet")
                            continue
                        self.fail(f"peak {op} on {s.key} failed:\n{proc.stderr[-2000:]}")
                    out = json.loads(proc.stdout.strip().splitlines()[-1])
                    self.results.add(f"peak_{op}", s.key, out["anon_peak_mb"])
                    self.results.add(f"rss_{op}", s.key, out["maxrss_mb"])
            finally:
                s.open()

    def engine(self) -> None:
        path = Path(__file__).resolve().parent / "bench_engine.py"
        if not path.exists():
            self.results.note("engine skipped: tools/bench_engine.py is not there yet")
            return
        import bench_engine

        run = getattr(bench_engine, "bench_phases", None)
        if run is None:
            self.results.note("engine skipped: tools/bench_engine.py has no bench_phases()")
            return
        rows = run(
            n=self.cfg.n, rounds=self.cfg.rounds, quick=self.cfg.quick, seed=self.cfg.spec.seed
        )
        for row in rows:
            key = f"engine_{row['metric']}"
            if key not in METRICS:
                METRICS[key] = Metric(
                    key,
                    row["label"],
                    row["unit"],
                    bool(row["higher"]),
                    (),
                    int(row.get("digits", 1)),
                )
            for v in row["values"]:
                self.results.add(key, row["system"], float(v))


class LogNoGroupSystem(LogSystem):
    """LogBackend with group commit off: every write call commits (and flushes) on its own."""

    key = "log_nogc"
    label = "coniti LogBackend, group commit off"

    def _make(self) -> MemoryBackend:
        from coniti.impl.log import LogBackend

        return LogBackend(self.path, durability="sync", group_commit=False)



def _record_lines(path: Path) -> bytes:
    """A memory file's bytes after its header line."""
    data = path.read_bytes()
    return data[data.index(b"\n") + 1 :]


# -- the peak-memory child ---------------------------------------------------------------------


def _status_kb(field_name: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    return 0


def child_peak(op: str, key: str, path: Path, namespaces: list[tuple[str, ...]]) -> None:
    """Run one op on an existing store and print its memory figures as one JSON line."""
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _status_kb("RssAnon"))
            time.sleep(0.002)

    system = make_system(key, path)
    system.open()
    base = _status_kb("RssAnon")
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    if op == "scan":
        if isinstance(system, ConitiSystem):
            for ns in namespaces:
                for _ in system.b.iter_all(namespace=ns):
                    pass
        else:
            for ns in namespaces:
                system.scan_all(ns)
    elif op == "dump":
        assert isinstance(system, ConitiSystem)
        with tempfile.TemporaryDirectory() as tmp:
            for k, ns in enumerate(namespaces):
                system.b.dump(Path(tmp) / f"{k}.jsonl", namespace=ns)
    elif op == "verify":
        backend: Any = system.b
        backend.verify()
    else:
        raise SystemExit(f"unknown op {op!r}")
    stop.set()
    sampler.join()
    peak[0] = max(peak[0], _status_kb("RssAnon"))
    # VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss over from the parent across exec.
    maxrss = _status_kb("VmHWM")
    system.close()
    print(
        json.dumps(
            {
                "anon_base_mb": base / 1024,
                "anon_peak_mb": peak[0] / 1024,
                "maxrss_mb": maxrss / 1024,
            }
        )
    )


# -- output ------------------------------------------------------------------------------------


def fmt(value: float, digits: int) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def ratio(res: Results, metric: str, system: str, other: str) -> str:
    a, b = res.median(metric, system), res.median(metric, other)
    if a is None or b is None or b == 0:
        return ""
    return f"{a / b:.2f}x"


def check_target(res: Results, m: Metric, system: str) -> str:
    if system != "log" or not m.target:
        return ""
    value = res.median(m.key, system)
    if value is None:
        return ""
    parts = []
    for t in m.target:
        x = value
        if t.system is not None or t.metric is not None:
            ref = res.median(t.metric or m.key, t.system or system)
            if ref is None or ref == 0:
                parts.append(f"{t.describe()}: n/a")
                continue
            x = value / ref
        ok = {">=": x >= t.bound, "<=": x <= t.bound, "<": x < t.bound}[t.op]
        parts.append(f"{t.describe()}: {'met' if ok else 'MISSED'}")
    return "; ".join(parts)


def table(res: Results, systems: Sequence[str]) -> str:
    labels = {key: SYSTEMS[key].label for key in SYSTEMS}
    labels[LogNoGroupSystem.key] = LogNoGroupSystem.label
    lines = [
        "| metric | unit | system | median | [min..max] | vs raw LMDB | vs sqlite | target (issue 7) |",
        "|---|---|---|--:|--:|--:|--:|---|",
    ]
    for m in METRICS.values():
        present = [s for s in systems if (m.key, s) in res.values]
        present += sorted({s for (k, s) in res.values if k == m.key} - set(present))
        for s in present:
            vals = res.values[(m.key, s)]
            med = statistics.median(vals)
            spread = f"[{fmt(min(vals), m.digits)}..{fmt(max(vals), m.digits)}]"
            is_coniti = s in CONITI
            lines.append(
                f"| {m.label} | {m.unit} | {labels.get(s, s)} | {fmt(med, m.digits)} | {spread} | "
                f"{ratio(res, m.key, s, 'lmdb') if is_coniti else ''} | "
                f"{ratio(res, m.key, s, 'sqlite') if is_coniti else ''} | {check_target(res, m, s)} |"
            )
    return "\n".join(lines)


def header(cfg: Config, argv: Sequence[str]) -> str:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "coniti"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        ).stdout.strip()
        if dirty:
            commit += " + uncommitted changes in coniti/"
    except OSError:
        commit = "?"
    cmd = " ".join(["tools/bench.py", *argv])
    spec = cfg.spec
    return (
        f"coniti bench: `{cmd}`\n"
        f"N={cfg.n:,} (+{cfg.single} single, +{cfg.writers}x{cfg.per_writer} concurrent), rounds={cfg.rounds}, "
        f"namespaces={spec.namespaces}, ids={spec.ids}, dim={spec.dim}, seed={spec.seed}; "
        f"commit {commit or '?'}, {time.strftime('%Y-%m-%d %H:%M')}; "
        f"Python {platform.python_version()}, LMDB {'.'.join(map(str, lmdb.version()))} "
        f"(py-lmdb {lmdb.__version__}), SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs"
    )


def print_profiles(bench: Bench, out: Path | None) -> None:
    for name, prof in bench.profilers.items():
        buf = io.StringIO()
        stats = pstats.Stats(prof, stream=buf)
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(25)
        print(f"\n## profile: {name}\n{buf.getvalue()}")
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            prof.dump_stats(out / f"{name}.prof")


# -- command line ------------------------------------------------------------------------------


def log_backend_available() -> bool:
    try:
        import coniti.impl.log  # noqa: F401
    except ImportError:
        return False
    return True


def default_systems() -> list[str]:
    return [key for key in SYSTEMS if key != "log" or log_backend_available()]


def _list(value: str, allowed: Sequence[str], what: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in items if v not in allowed]
    if bad or not items:
        raise argparse.ArgumentTypeError(
            f"{what}: unknown {bad or value!r}; choose from {', '.join(allowed)}"
        )
    return items


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, Config]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument(
        "--n",
        type=int,
        default=None,
        help="records in the bulk load (default 20,000; --quick 2,000)",
    )
    p.add_argument("--rounds", type=int, default=None, help="rounds (default 3; --quick 2)")
    p.add_argument("--quick", action="store_true", help="small counts, finishes in under a minute")
    p.add_argument(
        "--systems",
        default=None,
        help="comma list of log, memory, lmdb, sqlite (default: all; log once coniti.impl.log exists)",
    )
    p.add_argument("--phases", default=",".join(PHASES), help=f"comma list of {', '.join(PHASES)}")
    p.add_argument(
        "--namespaces", type=int, default=1, help="spread records over this many namespaces"
    )
    p.add_argument(
        "--ids", choices=("uuid4", "time"), default="uuid4", help="random or time-ordered ids"
    )
    p.add_argument("--dim", type=int, default=384, help="vector dimensions (float32)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--dir", type=Path, default=None, help="where stores go (default: a temporary directory)"
    )
    p.add_argument("--json", type=Path, default=None, help="also write every per-round figure here")
    p.add_argument("--profile", default="", help="phases whose coniti calls run under cProfile")
    p.add_argument("--profile-out", type=Path, default=None, help="directory for the .prof files")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--child-peak", help=argparse.SUPPRESS)
    p.add_argument("--child-system", help=argparse.SUPPRESS)
    p.add_argument("--child-path", help=argparse.SUPPRESS)
    p.add_argument("--child-namespaces", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        systems = _list(args.systems or ",".join(default_systems()), list(SYSTEMS), "--systems")
        phases = _list(args.phases, PHASES, "--phases")
        profile = _list(args.profile, PHASES, "--profile") if args.profile else []
    except argparse.ArgumentTypeError as exc:
        p.error(str(exc))
    n = args.n if args.n is not None else (2_000 if args.quick else 20_000)
    if not 1 <= n <= 10_000_000:
        p.error(f"--n must be between 1 and 10,000,000, got {n}")
    rounds = args.rounds if args.rounds is not None else (2 if args.quick else 3)
    if rounds < 1:
        p.error(f"--rounds must be >= 1, got {rounds}")
    quick = args.quick
    single = 100 if quick else 500
    writers, per_writer = 8, (10 if quick else 100)
    if "single" not in phases:
        single = 0
    if "concurrent" not in phases:
        per_writer = 0
    spec = WorkloadSpec(
        n=n,
        extra=single + writers * per_writer,
        seed=args.seed,
        ids=args.ids,
        namespaces=args.namespaces,
        dim=args.dim,
    )
    cfg = Config(
        n=n,
        rounds=rounds,
        systems=systems,
        phases=phases,
        spec=spec,
        single=single,
        writers=writers,
        per_writer=per_writer,
        gets=1_000 if quick else 5_000,
        count_calls=10 if quick else 50,
        reopens=3 if quick else 10,
        asof_gets=200 if quick else 1_000,
        asof_pages=3 if quick else 10,
        base=args.dir or Path("."),
        profile=profile,
        profile_out=args.profile_out,
        quick=quick,
        verbose=not args.quiet,
    )
    return args, cfg


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, cfg = parse(argv)
    if args.child_peak:
        namespaces = [tuple(ns) for ns in json.loads(args.child_namespaces)]
        child_peak(args.child_peak, args.child_system, Path(args.child_path), namespaces)
        return 0
    tmp = None
    if args.dir is None:
        tmp = tempfile.mkdtemp(prefix="coniti-bench-")
        cfg.base = Path(tmp)
    else:
        cfg.base.mkdir(parents=True, exist_ok=True)
    if args.systems is None and "log" not in cfg.systems:
        print("note: coniti.impl.log is not importable; LogBackend left out", file=sys.stderr)
    try:
        bench = Bench(cfg)
        t0 = time.perf_counter()
        res = bench.run()
        elapsed = time.perf_counter() - t0
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    print(header(cfg, argv))
    print()
    print(table(res, cfg.systems))
    for text in res.notes:
        print(f"\nnote: {text}")
    print(f"\n({elapsed:.0f} s)")
    if args.json is not None:
        data = {
            "command": ["tools/bench.py", *argv],
            "config": {
                "n": cfg.n,
                "rounds": cfg.rounds,
                "systems": cfg.systems,
                "phases": cfg.phases,
                "namespaces": cfg.spec.namespaces,
                "ids": cfg.spec.ids,
                "seed": cfg.spec.seed,
            },
            "metrics": [
                {
                    "metric": k,
                    "system": s,
                    "unit": METRICS[k].unit,
                    "values": v,
                    "median": statistics.median(v),
                }
                for (k, s), v in res.values.items()
            ],
            "notes": res.notes,
        }
        args.json.write_text(json.dumps(data, indent=1))
    if cfg.profile:
        print_profiles(bench, cfg.profile_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

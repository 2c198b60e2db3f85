"""One run of ``tools/bench.py``: rounds of phases over the selected systems (what each phase
measures: :mod:`bench.cli`).

A round builds a fresh store per system, fills it (``bulk``, which runs even when not selected: every
later phase reads its records), then runs the selected phases in :data:`PHASES` order, each a method of
:class:`Bench` of the same name; ``engine`` runs once, after the rounds. The read phases check that the
systems return the same records and counts, and stop the run (``SystemExit``) if they do not.
"""

from __future__ import annotations

import cProfile
import gc
import random
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from coniti.memory import GetRequest

from .common import seconds, seconds_each, settle
from .engine import bench_phases
from .metrics import METRICS, Metric, Results
from .peak import measure_peak
from .systems import (
    ConitiSystem,
    LogNoGroupSystem,
    LogSystem,
    RawLMDB,
    System,
    make_system,
    scan_page_of,
)
from .workload import Workload, WorkloadSpec

__all__ = ["PHASES", "Bench", "Config"]

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


@dataclass
class Config:
    """What ``tools/bench.py``'s command line asked for, with the per-phase counts it implies."""

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
    """The run: :meth:`run` fills :attr:`results`; :attr:`profilers` holds the ``--profile`` ones."""

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
        return seconds(fn, profile=self.profiler(phase, system))

    def timed_loop(
        self, phase: str, system: System, fn: Callable[[Any], object], items: Iterable[Any]
    ) -> float:
        """Seconds for ``fn(item)`` over ``items`` (profiled when ``--profile`` names ``phase``)."""
        return seconds_each(fn, items, profile=self.profiler(phase, system))

    def fail(self, text: str) -> NoReturn:
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
        try:
            for name in PHASES:
                if name == "engine":  # once, after the rounds
                    continue
                if name == "bulk" or self.selected(name):
                    step: Callable[[list[System], int], None] = getattr(self, name)
                    # Long-lived objects so far (the workload, in-memory stores) go to the permanent
                    # generation, so that a system's collections do not scan another system's data.
                    settle()
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

        def release() -> None:
            barrier.wait()
            for t in threads:
                t.join()

        dt = seconds(release, profile=self.profiler("concurrent", s))
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
        if any(v != first for v in values.values()):
            self.fail(f"systems disagree on {what}: {values}")

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
            events = int(backend.head)
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
        """Peak memory of dump, verify (LogBackend) and a full scan, each in a fresh child process
        on the closed store (see :mod:`bench.peak`)."""
        for s in order:
            if not s.persistent:
                continue
            ops = ["dump", "verify", "scan"] if isinstance(s, LogSystem) else ["scan"]
            s.close()
            try:
                for op in ops:
                    out = measure_peak(op, s.key, s.path, self.work.namespace_list, self.fail)
                    self.results.add(f"peak_{op}", s.key, out["anon_peak_mb"])
                    self.results.add(f"rss_{op}", s.key, out["maxrss_mb"])
            finally:
                s.open()

    def engine(self) -> None:
        """The engine benchmark's phases (:func:`bench.engine.bench_phases`), as extra metrics."""
        rows = bench_phases(
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


def _record_lines(path: Path) -> bytes:
    """A memory file's bytes after its header line."""
    data = path.read_bytes()
    return data[data.index(b"\n") + 1 :]

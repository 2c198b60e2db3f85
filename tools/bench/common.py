"""What every benchmark here shares: the clock, the garbage collector's settling, work directories,
per-round figures and how a figure is printed. Nothing here knows a system or a phase.

Times are wall-clock (``time.perf_counter``) with the garbage collector on, as callers run.
"""

from __future__ import annotations

import cProfile
import gc
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

__all__ = [
    "ROOT",
    "Figures",
    "Spent",
    "Stopwatch",
    "fmt",
    "run_child",
    "seconds",
    "seconds_each",
    "settle",
    "spread",
    "summary_line",
    "workdir",
]

ROOT = Path(__file__).resolve().parents[2]
"""The repository root (``tools/bench/common.py`` is two folders below it)."""


class Spent(NamedTuple):
    """Seconds a stretch of work took: wall clock, the process's CPU time (every thread, user and
    system) and the system part of that CPU time (``kernel``: system calls, page faults, writing
    pages out)."""

    wall: float
    cpu: float
    kernel: float

    def json(self) -> dict[str, float]:
        return {"wall": self.wall, "cpu": self.cpu, "kernel": self.kernel}


class Stopwatch:
    """Started when made; :meth:`spent` is the :class:`Spent` since then."""

    def __init__(self) -> None:
        self._usage = resource.getrusage(resource.RUSAGE_SELF)
        self._wall = time.perf_counter()

    def spent(self) -> Spent:
        wall = time.perf_counter() - self._wall
        now, then = resource.getrusage(resource.RUSAGE_SELF), self._usage
        kernel = now.ru_stime - then.ru_stime
        return Spent(wall, now.ru_utime - then.ru_utime + kernel, kernel)


def run_child(code: Path | None, module: str, args: Sequence[str], what: str) -> Spent:
    """The :class:`Spent` that ``main(args)`` of ``bench.<module>`` prints as the JSON fields
    ``wall``, ``cpu`` and ``kernel`` of its last line (:meth:`Spent.json`), run in a fresh process
    importing ``coniti`` from ``code`` (None: this checkout); the child must also print the
    ``coniti`` folder it imported, which is checked. Raises SystemExit naming ``what`` when the
    child fails."""
    expected = (code if code is not None else ROOT).resolve() / "coniti"
    # the package's folder first on sys.path: before the checkout that importing bench adds
    boot = (
        f"import sys; sys.path[:0] = [{str(expected.parent)!r}, {str(ROOT / 'tools')!r}]; "
        f"from bench.{module} import main; raise SystemExit(main(sys.argv[1:]))"
    )
    proc = subprocess.run([sys.executable, "-c", boot, *args], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed:\n{proc.stderr[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if Path(out["coniti"]).resolve() != expected:
        raise SystemExit(f"the child imported {out['coniti']}, not {expected}")
    return Spent(float(out["wall"]), float(out["cpu"]), float(out["kernel"]))


def seconds(fn: Callable[..., object], *args: Any, profile: cProfile.Profile | None = None) -> float:
    """Seconds ``fn(*args)`` takes. With ``profile``, the profiler is on from just before the clock
    starts to just after it stops."""
    if profile is not None:
        profile.enable()
    t0 = time.perf_counter()
    fn(*args)
    dt = time.perf_counter() - t0
    if profile is not None:
        profile.disable()
    return dt


def seconds_each(
    fn: Callable[[Any], object], items: Iterable[Any], *, profile: cProfile.Profile | None = None
) -> float:
    """Seconds for ``fn(item)`` on every item in turn, timed as one stretch (see :func:`seconds`)."""

    def loop() -> None:
        for item in items:
            fn(item)

    return seconds(loop, profile=profile)


def settle() -> None:
    """Collect garbage, then move every object alive so far to the permanent generation
    (``gc.freeze``), so that later collections do not scan it: data built before a timed stretch (a
    workload, another system's store) does not slow the collections inside it."""
    gc.collect()
    gc.freeze()


@contextmanager
def workdir(keep: Path | None, prefix: str) -> Iterator[Path]:
    """``keep`` (created if missing and left in place), or a new temporary directory named
    ``prefix...`` that is removed, with all it holds, when the block ends."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass
class Figures:
    """Per-round figures by (metric key, system key), in the order they were first recorded."""

    values: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def add(self, metric: str, system: str, value: float) -> None:
        self.values.setdefault((metric, system), []).append(value)

    def median(self, metric: str, system: str) -> float | None:
        """The median over rounds, None when the pair has no figure."""
        vals = self.values.get((metric, system))
        return statistics.median(vals) if vals else None


def fmt(value: float, digits: int) -> str:
    """A figure as a table prints it: thousands separated; from 1,000 up no decimals, below that
    ``digits`` of them."""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def spread(values: Sequence[float], digits: int) -> str:
    """``[min..max]`` of per-round figures, each as :func:`fmt` prints it."""
    return f"[{fmt(min(values), digits)}..{fmt(max(values), digits)}]"


def summary_line(doc: str | None) -> str | None:
    """A module docstring's first paragraph: the ``description`` of a benchmark's argument parser."""
    return doc.split("\n\n")[0] if doc else None

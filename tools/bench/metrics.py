"""The metrics of ``tools/bench.py``: label, unit, direction and issue 7's target of each, and the
run's results.

A target is a list of :class:`Term` conditions, checked on the LogBackend rows (see
:func:`bench.report.check_target`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from .common import Figures

__all__ = ["METRICS", "Metric", "Results", "Term"]


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


class Results(Figures):
    """The run's figures (metric keys must be in :data:`METRICS`) and its notes."""

    def __init__(self) -> None:
        super().__init__()
        self.notes: list[str] = []

    def add(self, metric: str, system: str, value: float) -> None:
        if metric not in METRICS:
            raise KeyError(f"unknown metric {metric!r}")
        super().add(metric, system, value)

    def note(self, text: str) -> None:
        """Record ``text`` once, for the report, and show it on stderr now."""
        if text not in self.notes:
            self.notes.append(text)
            print(f"note: {text}", file=sys.stderr)

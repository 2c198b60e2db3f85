"""The report of ``tools/bench.py``: the markdown table, its header line, the JSON figures and the
profiles.

The table gives, per metric and system, the median and [min..max] over rounds, each coniti figure as
a ratio to raw LMDB and to sqlite (coniti's figure divided by the baseline's, in the metric's unit: read
it with the unit's direction, e.g. >1 is better for rec/s and worse for us/call), and issue 7's target
checked on the LogBackend rows.
"""

from __future__ import annotations

import io
import os
import platform
import pstats
import sqlite3
import statistics
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lmdb

from .common import ROOT, fmt, spread
from .metrics import METRICS, Metric, Results
from .runner import Bench, Config
from .systems import SYSTEMS, LogNoGroupSystem

__all__ = ["check_target", "figures_json", "header", "print_profiles", "ratio", "table"]

CONITI = ("log", "memory")
"""The systems whose rows get ratios to the baselines."""


def ratio(res: Results, metric: str, system: str, other: str) -> str:
    """``system``'s median over ``other``'s, as ``1.23x``; empty when either has none."""
    a, b = res.median(metric, system), res.median(metric, other)
    if a is None or b is None or b == 0:
        return ""
    return f"{a / b:.2f}x"


def check_target(res: Results, m: Metric, system: str) -> str:
    """The target column: each of ``m``'s terms, ``met`` or ``MISSED``, on the LogBackend row only."""
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
    """The markdown table: one row per (metric, system) with figures, metrics in :data:`METRICS`
    order, systems in ``systems`` order and then any others (``log_nogc``)."""
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
            is_coniti = s in CONITI
            lines.append(
                f"| {m.label} | {m.unit} | {labels.get(s, s)} | {fmt(med, m.digits)} | "
                f"{spread(vals, m.digits)} | "
                f"{ratio(res, m.key, s, 'lmdb') if is_coniti else ''} | "
                f"{ratio(res, m.key, s, 'sqlite') if is_coniti else ''} | {check_target(res, m, s)} |"
            )
    return "\n".join(lines)


def header(cfg: Config, argv: Sequence[str]) -> str:
    """The report's two header lines: the command, the counts, the commit and the machine."""
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
    """Each ``--profile`` profiler's top 25 by own and by cumulative time; ``.prof`` files in ``out``."""
    for name, prof in bench.profilers.items():
        buf = io.StringIO()
        stats = pstats.Stats(prof, stream=buf)
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(25)
        print(f"\n## profile: {name}\n{buf.getvalue()}")
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            prof.dump_stats(out / f"{name}.prof")


def figures_json(cfg: Config, argv: Sequence[str], res: Results) -> dict[str, Any]:
    """Every per-round figure with the run's configuration (``--json``)."""
    return {
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

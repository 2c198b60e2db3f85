"""Smoke test of tools/bench_engine.py --part structures at a tiny N. No test here asserts a time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "tools" / "bench_engine.py"


def test_structure_part_prints_every_table(tmp_path: Path) -> None:
    """The structures part runs end to end (child builds included) and prints its three tables."""
    pytest.importorskip("usearch")
    proc = subprocess.run(
        [
            sys.executable, str(BENCH), "--part", "structures", "--n", "400", "--queries", "3",
            "--ef", "16", "--add-batches", "1", "--cache", str(tmp_path),
        ],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "| window | structure | search ms | numpy brute on the slice ms | ratio (median per query) |" in out
    for structure in ("flat", "segment_tree", "ann"):
        assert f"| 1pct | {structure} |" in out
        assert f"| {structure} | this |" in out
    assert "| full | 16 |" in out and "| 10pct | 16 |" in out
    assert list(tmp_path.glob("coniti-bench-local_hash-400-7*.npy"))


def test_engine_part_prints_the_persisted_tables(tmp_path: Path) -> None:
    """The engine part runs end to end at N=300: ingest, save, open in a child, asks now and as of
    start/middle/head beside numpy brute force, for flat and segment_tree."""
    proc = subprocess.run(
        [
            sys.executable, str(BENCH), "--part", "engine", "--n", "300", "--queries", "2",
            "--rounds", "1", "--structures", "flat,segment_tree",
        ],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "| structure | ingest notes/s | save s | open to first answer s |" in out
    for structure in ("flat", "segment_tree"):
        assert f"| 1pct | {structure} |" in out and f"| full | {structure} |" in out

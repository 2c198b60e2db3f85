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


def test_persisted_part_reuses_a_kept_store(tmp_path: Path) -> None:
    """--keep leaves the persisted part's store in place and the next run reuses it (no second
    ingest: the marks file stays as the first run wrote it); --opens medians several opens."""
    args = [
        sys.executable, str(BENCH), "--part", "persisted", "--n", "300", "--queries", "2",
        "--structures", "flat", "--keep", str(tmp_path), "--opens", "2",
    ]  # fmt: skip
    first = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    marks = tmp_path / "flat-300-7.marks.json"
    written = marks.read_text()
    second = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert marks.read_text() == written
    assert "medians of 2 fresh processes" in second.stdout and "| 1pct | flat |" in second.stdout


def test_restore_part_compares_checks_at_load_and_on_touch(tmp_path: Path) -> None:
    """--part restore prints a row per round for checks at load and checks on first touch."""
    proc = subprocess.run(
        [
            sys.executable, str(BENCH), "--part", "restore", "--n", "400", "--rounds", "1",
            "--cache", str(tmp_path),
        ],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| at load |" in proc.stdout and "| on touch |" in proc.stdout

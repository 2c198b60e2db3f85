"""Smoke test of tools/bench_ingest.py at a tiny N. No test here asserts a time."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "tools" / "bench_ingest.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), "--n", "500", "--rounds", "1", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip


def test_every_way_gets_a_row() -> None:
    """In process, the table has one row per way with its ratios to ``notes`` and ``trusted``."""
    proc = _run("--memory", "log")
    assert proc.returncode == 0, proc.stderr[-3000:]
    for way in ("notes", "trusted", "batch"):
        assert f"| {way} | " in proc.stdout
    assert "| notes | " in proc.stdout and "@base" not in proc.stdout


def test_the_table_says_where_the_time_went() -> None:
    """Each row ends with the kernel's CPU time and the time on no core, in microseconds a note:
    parts of that ingest's own CPU time and wall clock (the row's notes/s), never more."""
    proc = _run("--memory", "log", "--variants", "batch")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| kernel us/note | waiting us/note |" in proc.stdout
    row = next(line for line in proc.stdout.splitlines() if line.startswith("| batch | "))
    cells = row.strip("| ").split(" | ")
    wall_rate, cpu_rate = (float(cells[i].replace(",", "")) for i in (1, 5))
    kernel, waiting = (float(cell) for cell in cells[-2:])
    assert 0.0 <= kernel <= 1e6 / cpu_rate + 0.1  # the figures are printed rounded
    assert 0.0 <= waiting <= 1e6 / wall_rate + 0.1


def test_a_baseline_copy_runs_in_children_beside_this_code(tmp_path: Path) -> None:
    """With --baseline-code every way also runs on the copy (rows ``WAY@base``), each row with its
    ratio to ``notes@base``."""
    copy = tmp_path / "base"
    with tarfile.open(tmp_path / "coniti.tar", "w") as tar:
        tar.add(ROOT / "coniti", arcname="coniti", filter=lambda m: None if "__pycache__" in m.name else m)
    with tarfile.open(tmp_path / "coniti.tar") as tar:
        tar.extractall(copy, filter="data")
    proc = _run("--memory", "in_memory", "--variants", "notes,batch", "--baseline-code", str(copy))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "x notes@base (CPU) |" in proc.stdout
    for way in ("notes", "batch", "notes@base", "batch@base"):
        assert f"| {way} | " in proc.stdout


def test_a_folder_without_coniti_is_refused(tmp_path: Path) -> None:
    """--baseline-code naming a folder with no coniti package stops with a usage error."""
    proc = _run("--baseline-code", str(tmp_path))
    assert proc.returncode == 2 and "holds no coniti package" in proc.stderr


def test_sequential_ids_run_and_are_named() -> None:
    """--ids sequential runs every way over the log and the heading names the ids it used."""
    proc = _run("--memory", "log", "--variants", "batch", "--ids", "sequential")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ids=sequential" in proc.stdout and "| batch | " in proc.stdout


def test_another_batch_size_runs_and_is_named() -> None:
    """--batch gives every ingest_many call that many notes, and the heading says so."""
    proc = _run("--memory", "log", "--variants", "notes,batch", "--batch", "125")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "batches of 125," in proc.stdout and "| batch | " in proc.stdout


def test_a_batch_larger_than_the_corpus_is_refused() -> None:
    """--batch above --n stops with a usage error naming both options."""
    proc = _run("--batch", "501")
    assert proc.returncode == 2 and "--n >= --batch" in proc.stderr

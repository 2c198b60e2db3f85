"""Smoke test of tools/bench_log_put.py at a tiny N. No test here asserts a time."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "tools" / "bench_log_put.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), "--n", "500", "--rounds", "1", "--durability", "nosync", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip


def test_a_baseline_copy_runs_beside_this_code(tmp_path: Path) -> None:
    """With --baseline-code the table has a row for this code and for the copy, each with its
    ratio to the copy's median."""
    copy = tmp_path / "base"
    with tarfile.open(tmp_path / "coniti.tar", "w") as tar:
        tar.add(ROOT / "coniti", arcname="coniti", filter=lambda m: None if "__pycache__" in m.name else m)
    with tarfile.open(tmp_path / "coniti.tar") as tar:
        tar.extractall(copy, filter="data")
    proc = _run("--baseline-code", str(copy))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| this | " in proc.stdout and "| base | " in proc.stdout
    assert "| 1.00 |" in proc.stdout


def test_a_folder_without_coniti_is_refused(tmp_path: Path) -> None:
    """--baseline-code naming a folder with no coniti package stops with a usage error."""
    proc = _run("--baseline-code", str(tmp_path))
    assert proc.returncode == 2 and "holds no coniti package" in proc.stderr

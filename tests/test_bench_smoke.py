"""Smoke tests of tools/bench.py: it runs end to end at a tiny N. No test here asserts a time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "tools" / "bench.py"


def run_bench(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), "--quiet", "--dir", str(tmp_path / "stores"), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def test_quick_run_prints_the_table(tmp_path: Path) -> None:
    """`--quick` at a tiny N completes and prints a table row for every system and core phase."""
    proc = run_bench("--quick", "--n", "300", "--rounds", "1", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "| metric | unit | system | median | [min..max] | vs raw LMDB | vs sqlite |" in out
    for label in ("raw LMDB", "sqlite3 (WAL, FULL)", "coniti InMemoryBackend"):
        assert f"| {label} |" in out
    for metric in (
        "bulk put, batches of 500",
        "single durable put",
        "8 writers, 1-record puts",
        "get 1 id, full record",
        "ordered scan, pages of 500",
        "count, middle half of range",
        "reopen: close, open, first get",
        "size on disk",
        "peak anon memory: full scan",
    ):
        assert f"| {metric} |" in out, metric


def test_many_namespaces_and_time_ids_variant_runs(tmp_path: Path) -> None:
    """The many-namespace, time-ordered-id workload runs through put, get, scan and count."""
    proc = run_bench(
        "--n", "400", "--rounds", "1", "--namespaces", "7", "--ids", "time",
        "--phases", "bulk,get,scan,count", "--systems", "memory,lmdb,sqlite",
        tmp_path=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "namespaces=7, ids=time" in proc.stdout
    assert "| ordered scan, pages of 500 | rec/s | raw LMDB |" in proc.stdout


def test_unknown_phase_is_refused_by_name(tmp_path: Path) -> None:
    """An unknown phase exits with status 2 and a message naming it."""
    proc = run_bench("--phases", "bulk,warp", tmp_path=tmp_path)
    assert proc.returncode == 2
    assert "warp" in proc.stderr

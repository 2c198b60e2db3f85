"""Smoke test of tools/bench_cluster.py at a tiny N. No test here asserts a time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("nats")

ROOT = Path(__file__).resolve().parent.parent


def test_bench_cluster_prints_both_rows_and_the_fold_rate() -> None:
    """The benchmark runs single-node and cluster puts side by side and the fold of a joining node."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "bench_cluster.py"), "--n", "30", "--threads", "3"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| single node, durable (sync) | 30 |" in proc.stdout
    assert "| cluster node, R=3 loopback, sync | 30 |" in proc.stdout
    assert "fold of a joining node" in proc.stdout and "60 events" in proc.stdout

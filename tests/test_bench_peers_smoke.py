"""Smoke test of tools/bench_peers.py at a tiny N. No test here asserts a time.

The coniti-only run always runs; the run with the peers needs their venv (built by the script with
pip on first use) and is skipped when it cannot be built here (no package index reachable)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "tools" / "bench_peers.py"


def _run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = tmp_path / "peers.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--n", "300", "--rounds", "1", "--queries", "3",
         "--namespaces", "3", "--batch", "50", "--users", "5", "--json", str(out), *args],
        capture_output=True, text=True, cwd=tmp_path, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, json.loads(out.read_text())


def test_coniti_alone_gets_every_row_with_exact_answers(tmp_path: Path) -> None:
    """Without peers, the table has every phase for coniti, and coniti's recall@10 of each ask
    against numpy's exact answer is 1.0."""
    proc, figures = _run(tmp_path, "--systems", "coniti")
    for label in (
        "ingest, batches of 50",
        "top-10 with a metadata filter",
        "bytes on disk per note",
        "delete",
    ):
        assert f"| {label}" in proc.stdout
    coniti = figures["medians"]["coniti"]
    for ask in ("all", "filtered", "window", "one_ns"):
        assert coniti[f"{ask}_recall"] == 1.0, ask


def test_numpy_is_timed_beside_coniti_and_the_approximate_row_is_filled(tmp_path: Path) -> None:
    """The numpy column comes from coniti's own child (timed beside each of its asks, every ask
    present), and the approximate row holds coniti with structure ``ann`` (at N=300 its graph is
    not used: every namespace is under ``exact_rows``, so its recall is 1.0)."""
    proc, figures = _run(tmp_path, "--systems", "coniti")
    assert figures["numpy_beside"] == "coniti"
    assert set(figures["numpy_ms"]) == {"all", "filtered", "window", "one_ns"}
    assert all(v > 0 for v in figures["numpy_ms"].values())
    assert "| top-10 over all namespaces (approximate: HNSW) |" in proc.stdout
    assert figures["medians"]["coniti"]["ann_recall"] == 1.0
    assert "coniti-ann" in figures["medians"]


def test_every_peer_runs_beside_coniti(tmp_path: Path) -> None:
    """With the peers' venv, every peer gets a column and the best peer's ratio is printed."""
    setup = subprocess.run(
        [sys.executable, str(BENCH), "--setup-only"], capture_output=True, text=True, timeout=900
    )
    if setup.returncode != 0:
        pytest.skip(f"the peers' venv cannot be built here: {setup.stderr.strip()[-300:]}")
    proc, figures = _run(tmp_path)
    assert not figures["errors"], figures["errors"]
    for peer in ("chroma", "lancedb", "qdrant", "sqlite-vec", "langgraph-sqlite"):
        assert peer in figures["medians"], peer
        assert figures["medians"][peer]["one_ns_recall"] > 0.5, peer
    assert "coniti vs best" in proc.stdout and "Syncs its writes to disk" in proc.stdout

"""Smoke test of tools/bench_cli.py at a tiny N. No test here asserts a time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "tools" / "bench_cli.py"


def test_bench_cli_builds_reindexes_and_prints_every_row(tmp_path: Path) -> None:
    """At N=40 the benchmark builds its store, rewrites its snapshot (--reindex: one manifest of
    CRC-32C blocks), runs ask and add as fresh processes and prints the phase split."""
    pytest.importorskip("tokenizers")
    store = tmp_path / "store"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--n", "40", "--runs", "1", "--store", str(store),
         "--reindex", "--phases"],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("`coniti ask` end to end", "`coniti add` end to end", "`python -c pass` (interpreter start)",
                  "engine open: snapshot restored", "ask (embed the question"):  # fmt: skip
        assert f"| {label}" in proc.stdout
    assert "reindexed" in proc.stderr
    (manifest,) = (store / "derived").glob("*.json")
    entries = json.loads(manifest.read_bytes())["arrays"].values()
    assert {e["checksum"] for e in entries} == {"crc32c"}

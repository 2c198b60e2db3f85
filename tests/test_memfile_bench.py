"""tools/bench.py's dump phase runs with the raw floor beside coniti. No test here asserts a time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_dump_phase_shows_the_raw_floor_and_ratios(tmp_path: Path) -> None:
    """The dump phase prints dump and load rows for raw LMDB (the floor) and for coniti's backends,
    each coniti row with its ratio to the floor; the floor's files hold coniti's exact lines."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "bench.py"), "--quiet", "--dir", str(tmp_path),
         "--n", "600", "--rounds", "1", "--phases", "dump", "--systems", "log,memory,lmdb"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    for metric in ("dump memory file", "load memory file"):
        floor = [r for r in rows if r.startswith(f"| {metric} | rec/s | raw LMDB |")]
        assert len(floor) == 1, metric
        for label in ("coniti LogBackend", "coniti InMemoryBackend"):
            (row,) = [r for r in rows if r.startswith(f"| {metric} | rec/s | {label} |")]
            assert row.split("|")[6].strip().endswith("x"), row
    assert "floor of the memory file" in proc.stdout

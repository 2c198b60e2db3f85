"""Crash safety of LogBackend: writers killed with SIGKILL at random moments (tools/crashtest.py).

After every kill: each acknowledged call is in the store, the call in flight is all there or all
absent, nothing after it is there, the store equals a model that replayed exactly those calls,
``head`` counts their events and ``verify()`` is clean. ``tools/crashtest.py --trials N`` runs the
same check for long soaks.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

TOOL = Path(__file__).resolve().parent.parent / "tools" / "crashtest.py"


def load_crashtest() -> ModuleType:
    spec = importlib.util.spec_from_file_location("crashtest", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["crashtest"] = module
    spec.loader.exec_module(module)
    return module


crashtest = load_crashtest()


def test_forked_writers_killed_at_random_keep_every_acknowledged_write(tmp_path: Path) -> None:
    """32 SIGKILLed writers on one store: no acknowledged call lost, no partial call, verify clean."""
    report = crashtest.run(tmp_path / "store", trials=32, seed=20261129)
    assert len(report.trials) == 32
    # The kills really landed mid-run: most writers had acknowledged calls and were still going.
    assert sum(t.acked > 0 and not t.finished for t in report.trials) >= 16, report.summary()


def test_spawned_writers_killed_at_random_keep_every_acknowledged_write(tmp_path: Path) -> None:
    """Writers in fresh interpreters (no fork), killed at random: the same guarantees hold."""
    report = crashtest.run(tmp_path / "store", trials=6, seed=7, spawn=True)
    assert len(report.trials) == 6
    assert sum(t.acked > 0 for t in report.trials) >= 1, report.summary()


def test_nosync_writers_killed_at_random_lose_nothing_acknowledged(tmp_path: Path) -> None:
    """durability="nosync" gives up only OS-crash durability: a killed process still loses nothing
    it acknowledged, and leaves no partial call."""
    report = crashtest.run(tmp_path / "store", trials=8, seed=11, durability="nosync")
    assert sum(t.acked > 0 for t in report.trials) >= 2, report.summary()


def test_writer_killed_before_it_opened_the_store_leaves_a_usable_store(tmp_path: Path) -> None:
    """A writer killed while creating the store leaves one that opens and verifies clean."""
    report = crashtest.run(tmp_path / "store", trials=3, seed=3, max_delay=0.002)
    assert len(report.trials) == 3


def test_command_line_runs_trials_and_exits_zero(tmp_path: Path) -> None:
    """``tools/crashtest.py --trials 3`` reports its trials and exits 0 on a sound store."""
    proc = subprocess.run(
        [sys.executable, str(TOOL), "--trials", "3", "--seed", "1", "--store", str(tmp_path / "s")],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok: 3 trials" in proc.stdout


def test_plan_is_deterministic_and_mixes_every_kind_of_call() -> None:
    """The writer and the checker derive the same plan from (seed, trial); it has every call kind."""
    first = crashtest.plan(5, 2, 400)
    assert first == crashtest.plan(5, 2, 400)
    assert {op["kind"] for op in first} == {"put", "delete", "meta", "clear", "rebuild"}
    assert any(len(r["id"]) > 511 for op in first if op["kind"] == "put" for r in op["records"])

"""The fault campaign (tools/faultcheck.py) at small counts: real processes killed with SIGKILL and
SIGINT during load, import, compact and dump, hostile targets and bombs; no promise broken.

``tools/faultcheck.py --trials N`` runs the same campaign for a soak (docs/reliability.md).
The store classes (bitflip, byte, truncate, rollback, hostile-store) damage copies of one small store
and read each through every read path (``tools/faultcheck_store.py``); none may crash, raise a
foreign error or answer wrongly.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "faultcheck.py"


def load_faultcheck() -> ModuleType:
    spec = importlib.util.spec_from_file_location("faultcheck", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["faultcheck"] = module
    spec.loader.exec_module(module)
    return module


faultcheck = load_faultcheck()
COUNTS = {"durability": 4, "kill-load": 4, "sigint-load": 3, "kill-import": 3, "kill-compact": 2,
          "kill-dump": 3, "hostile": 5, "bomb": 3, "bitflip": 6, "byte": 6, "truncate": 3,
          "rollback": 2, "hostile-store": 5}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("faultcheck")
    result: dict[str, Any] = faultcheck.run(
        list(COUNTS), 0, seed=20261201, work_dir=work, bomb_size=8 << 20, big_load=2000,
        counts=COUNTS, store_records=300,
    )
    return result


@pytest.mark.parametrize("name", list(COUNTS))
def test_no_promise_is_broken(report: dict[str, Any], name: str) -> None:
    """Each class ran its trials with no failure outcome: no partial load, import or dump, no
    refused retry, no leftover, no write outside the target, no crash, peak RSS under 256 MB; no
    damaged store crashed a reader, raised a foreign error or answered wrongly."""
    entry = report["classes"][name]
    assert sum(entry["outcomes"].values()) == COUNTS[name], entry
    assert faultcheck.failures(report, [name]) == [], entry


def test_hostile_targets_are_refused(report: dict[str, Any]) -> None:
    """Every hostile target but the planted .partial symlink (which is simply not followed) is
    refused."""
    outcomes = report["classes"]["hostile"]["outcomes"]
    assert {k for k in outcomes if k.startswith("refused")} == {
        "refused (fifo)", "refused (directory)", "refused (socket)", "refused (link-to-fifo)",
    }, outcomes


@pytest.mark.parametrize("name", ["rollback", "hostile-store"])
def test_rolled_back_and_hostile_stores_are_refused_at_open(report: dict[str, Any], name: str) -> None:
    """Every rolled-back copy and every hostile store directory is refused when it is opened, and
    counted as flagged by verify."""
    entry = report["classes"][name]
    assert entry["outcomes"] == {"refused": COUNTS[name]}, entry
    assert entry["verify_flagged"] == COUNTS[name]


def test_failures_are_selected_by_class() -> None:
    """failures() reports the ! outcomes of the selected classes only."""
    report = {"classes": {"bitflip": {"outcomes": {"silent-wrong!": 2, "detected": 3}},
                          "kill-load": {"outcomes": {"none": 2}}}}
    assert faultcheck.failures(report, ["kill-load"]) == []
    assert faultcheck.failures(report, ["bitflip"]) == ["bitflip: silent-wrong! x2"]


def test_command_line_asserts_the_selected_classes(tmp_path: Path) -> None:
    """The command line runs the chosen classes and exits 0 when the asserted ones are clean."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, str(TOOL), "--trials", "2", "--classes", "hostile,truncate",
         "--assert", "hostile,truncate", "--seed", "3", "--store-records", "200", "--json"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert '"truncate"' in proc.stdout and '"hostile"' in proc.stdout

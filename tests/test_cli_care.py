"""verify and rebuild through main(argv)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import Cli


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    cli = Cli(tmp_path / "store", capsys, monkeypatch)
    for i in range(3):
        cli.ok("meta", "set", f"k{i}", str(i), "--ns", "alice")
    return cli


def test_verify_clean(cli: Cli) -> None:
    """verify prints the events checked and the head hash, and exits 0 on a clean store."""
    out = cli.ok("verify").out
    assert "events checked  3" in out and "problems        none" in out


def test_verify_json(cli: Cli) -> None:
    """verify --json gives events_checked, head_seq, head_hash (64 hex) and problems."""
    doc = cli.ok("verify", "--json").json()
    assert doc["events_checked"] == 3 and doc["head_seq"] == 3 and doc["problems"] == []
    assert len(doc["head_hash"]) == 64 and int(doc["head_hash"], 16) >= 0


def test_rebuild(cli: Cli) -> None:
    """rebuild refolds the log; the store reads the same and verifies clean afterwards."""
    assert "3 events" in cli.ok("rebuild").out
    assert cli.ok("meta", "get", "k2", "--ns", "alice").out.strip() == "2"
    assert cli.ok("verify", "--json").json()["problems"] == []

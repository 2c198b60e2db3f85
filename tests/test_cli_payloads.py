"""The CLI on records without a vector and with a blob: get, ls and history print them sensibly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cli_support import Cli

from coniti.actor import Note
from coniti.impl.log import LogBackend
from coniti.memory import MemoryRecord, PutRequest

BLOB = bytes(range(256)) * 5  # 1,280 bytes


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """A store with a checkpoint (no vector, a 1,280-byte blob) and a usual note."""
    store = tmp_path / "store"
    with LogBackend(store) as backend:
        backend.put(PutRequest(records=[
            MemoryRecord(note=Note(id="cp", text="checkpoint", timestamp=1.0), vector=None, blob=BLOB),
            MemoryRecord(note=Note(id="n1", text="a note", timestamp=2.0), vector=np.ones(3)),
        ]))
    return Cli(store, capsys, monkeypatch)


def test_get_prints_vector_none_and_the_blob_size(cli: Cli) -> None:
    """get of a record without a vector prints ``vector`` as none and the blob's size in bytes."""
    out = cli.ok("get", "cp").out
    assert any(line.split() == ["vector", "none"] for line in out.splitlines())
    assert any(line.split() == ["blob", "1,280", "bytes"] for line in out.splitlines())


def test_get_of_a_usual_record_prints_no_blob_line(cli: Cli) -> None:
    """A record without a blob shows its vector and no blob line."""
    out = cli.ok("get", "n1").out
    assert "3 x float64" in out and "blob" not in out


def test_get_json_gives_sizes_not_bytes(cli: Cli) -> None:
    """get --json gives dim and dtype None without a vector and blob_bytes, not the blob itself."""
    doc = cli.ok("get", "cp", "--json").json()
    assert (doc["dim"], doc["dtype"], doc["blob_bytes"]) == (None, None, 1280)
    assert "blob" not in doc


def test_ls_lists_records_without_a_vector(cli: Cli) -> None:
    """ls lists both records; --json gives each one's blob size (None without a blob)."""
    assert "checkpoint" in cli.ok("ls").out
    rows = cli.ok("ls", "--json").lines()
    assert [(r["id"], r["dim"], r["blob_bytes"]) for r in rows] == [("cp", None, 1280), ("n1", 3, None)]

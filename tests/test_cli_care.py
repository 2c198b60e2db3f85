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


def test_erase_needs_a_reason(cli: Cli) -> None:
    """erase without --reason is a usage error (exit 2) and erases nothing."""
    cli.ok("add", "Alice's phone is 555-0100", "--ns", "alice", "--id", "ph")
    result = cli("erase", "ph", "--ns", "alice")
    assert result.code == 2 and "--reason" in result.err
    assert "555-0100" in cli.ok("get", "ph", "--ns", "alice").out


def test_erase_removes_the_content_from_every_read(cli: Cli) -> None:
    """erase prints the receipt; get, history and log no longer show the text; verify stays clean."""
    cli.ok("add", "Alice's phone is 555-0100", "--ns", "alice", "--id", "ph")
    doc = cli.ok("erase", "ph", "--ns", "alice", "--reason", "privacy request", "--actor", "dpo",
                 "--json").json()
    assert doc["erased"] == ["ph"] and doc["missing"] == [] and len(doc["receipts"]) == 1
    assert cli("get", "ph", "--ns", "alice").code == 1
    history = cli.ok("history", "ph", "--ns", "alice", "--json").lines()
    assert [e["kind"] for e in history] == ["put", "erase"] and history[0]["erased"]
    assert history[1]["actor"] == "dpo" and history[1]["reason"] == "privacy request"
    assert "555-0100" not in cli.ok("log", "--json").out
    assert cli.ok("verify", "--json").json()["problems"] == []


def test_erase_unknown_id_exits_1(cli: Cli) -> None:
    """An id the namespace never held is named, with exit status 1."""
    result = cli("erase", "nope", "--ns", "alice", "--reason", "x")
    assert result.code == 1 and "nope" in result.err and "Traceback" not in result.err


def test_compact_drops_erased_bytes(cli: Cli) -> None:
    """After erase and compact, no file of the store holds the erased text."""
    cli.ok("add", "secret-token-4242 belongs to Alice", "--ns", "alice", "--id", "s")
    cli.ok("erase", "s", "--ns", "alice", "--reason", "privacy request")
    doc = cli.ok("compact", "--json").json()
    assert doc["bytes_after"] > 0
    for path in cli.store.rglob("*"):
        if path.is_file():
            assert b"secret-token-4242" not in path.read_bytes(), path
    assert cli.ok("verify", "--json").json()["problems"] == []


def test_erase_meta_erases_the_values_of_keys(cli: Cli) -> None:
    """erase --meta KEY (repeatable) erases every value of those keys: the receipt per key in
    --json, meta get prints nothing set, a key never held exits 1 naming it."""
    doc = cli.ok("erase", "--meta", "k0", "--meta", "k1", "--ns", "alice", "--reason", "privacy",
                 "--json").json()
    assert doc["erased_keys"] == ["k0", "k1"] and len(doc["receipts"]) == 2
    assert cli.ok("meta", "get", "k2", "--ns", "alice").out.strip() == "2"
    assert cli.ok("meta", "get", "k0", "--ns", "alice").out.strip() in ("", "null")
    result = cli("erase", "--meta", "nope", "--ns", "alice", "--reason", "x")
    assert result.code == 1 and "metadata key nope" in result.err
    assert cli.ok("verify", "--json").json()["problems"] == []


def test_erase_whole_namespace_prints_a_receipt_per_record_and_key(cli: Cli) -> None:
    """erase --whole-namespace erases every record and key of the namespace, one receipt line each;
    a second run says nothing is left."""
    cli.ok("add", "Alice's phone is 555-0100", "--ns", "alice", "--id", "ph")
    out = cli.ok("erase", "--whole-namespace", "--ns", "alice", "--reason", "account closed").out
    assert "erased ph (receipt: event 6)" in out and "erased metadata key k2 (receipt: event 9)" in out
    assert cli.ok("count", "--ns", "alice", "--json").json()["count"] == 0
    assert "nothing left to erase in alice" in cli.ok(
        "erase", "--whole-namespace", "--ns", "alice", "--reason", "again").out
    assert "555-0100" not in cli.ok("log", "--json").out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ph", "--meta", "k0"], "not both"),
        (["--whole-namespace", "ph"], "--whole-namespace"),
        (["--whole-namespace", "--meta", "k0"], "--whole-namespace"),
        ([], "needs record IDs"),
    ],
)
def test_erase_refuses_unclear_requests(cli: Cli, args: list[str], message: str) -> None:
    """Mixing IDs, --meta and --whole-namespace, or giving none, is a usage error (exit 2), nothing
    erased."""
    result = cli("erase", *args, "--ns", "alice", "--reason", "x")
    assert result.code == 2 and message in result.err
    assert cli.ok("meta", "get", "k0", "--ns", "alice").out.strip() == "0"

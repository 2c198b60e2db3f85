"""The proof commands: keygen, checkpoint, prove (inclusion and consistency), verify-checkpoint, and
import against a checkpoint; each --json; bad input is one line and writes nothing."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cli_support import Cli

from coniti.impl.log import LogBackend
from coniti.proofs import leaf_hash, verify_consistency, verify_inclusion


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """A store of 4 events (the embedder's meta, 3 puts), run from ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    cli = Cli(tmp_path / "store", capsys, monkeypatch)
    for text in ("Alice likes tea", "Alice runs on Mondays", "Alice moved to Lyon"):
        cli.ok("add", text, "--ns", "alice")
    return cli


def test_keygen_writes_a_private_key_file_and_prints_the_verifier(cli: Cli, tmp_path: Path) -> None:
    """keygen NAME --key FILE: FILE is mode 0600 and holds the signer key; the verifier key is printed
    (--json: name, key file, verifier); an existing FILE is refused and left as it was."""
    result = cli.ok("keygen", "example.org/memory", "--key", "signer.key", "--json").json()
    assert result["verifier"].startswith("example.org/memory+")
    key = tmp_path / "signer.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert key.read_text().startswith("PRIVATE+KEY+example.org/memory+")
    before = key.read_text()
    refused = cli("keygen", "other", "--key", "signer.key")
    assert refused.code == 1 and refused.err.strip() == "coniti: error: key file signer.key already exists: choose a new file"
    assert key.read_text() == before


def test_checkpoint_then_verify_checkpoint(cli: Cli, tmp_path: Path) -> None:
    """checkpoint --key signs the head and keeps an event with the reason; verify-checkpoint accepts
    the note with the verifier key, and refuses it with another key (exit 1, one line)."""
    verifier = cli.ok("keygen", "k", "--key", "k.key", "--json").json()["verifier"]
    head = LogBackend(cli.store, read_only=True)
    size = head.head
    head.close()
    made = cli.ok("checkpoint", "--key", "k.key", "--reason", "nightly", "--json").json()
    assert (made["size"], made["seq"]) == (size, size + 1)
    (tmp_path / "cp.txt").write_text(made["note"])
    checked = cli.ok("verify-checkpoint", "cp.txt", "--verifier", verifier, "--json").json()
    assert (checked["ok"], checked["size"], checked["root"]) == (True, size, made["root"])
    other = cli.ok("keygen", "k", "--key", "other.key", "--json").json()["verifier"]
    refused = cli("verify-checkpoint", "cp.txt", "--verifier", other)
    assert refused.code == 1
    assert refused.err.count("\n") == 1 and "is not signed by key" in refused.err
    with LogBackend(cli.store, read_only=True) as store:
        [event] = store.events(after=size)
        assert (event.key, event.reason) == ("checkpoint", "nightly")


def test_prove_prints_proofs_that_verify(cli: Cli) -> None:
    """prove SEQ --json and prove --consistency A B --json print proofs the RFC checks accept."""
    inclusion = cli.ok("prove", "2", "--json").json()
    verify_inclusion(
        [bytes.fromhex(h) for h in inclusion["proof"]],
        leaf_hash=leaf_hash(bytes.fromhex(inclusion["event_hash"])),
        index=1, size=inclusion["size"], root=bytes.fromhex(inclusion["root"]),
    )
    consistency = cli.ok("prove", "--consistency", "1", "3", "--json").json()
    verify_consistency(
        [bytes.fromhex(h) for h in consistency["proof"]], old_size=1, new_size=3,
        old_root=bytes.fromhex(consistency["old_root"]), new_root=bytes.fromhex(consistency["new_root"]),
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("prove", "99"), "coniti: error: event 99 is past the tree of size 4"),
        (("prove", "1", "--size", "99"), "coniti: error: tree size 99 is past the log's head (event 4)"),
        (("prove", "--consistency", "3", "2"), "coniti: error: old size 3 is past new size 2"),
    ],
)
def test_bad_proof_requests_fail_in_one_line(cli: Cli, args: tuple[str, ...], message: str) -> None:
    """A seq past the size, a size past the head, sizes out of order: exit 1, one line."""
    with LogBackend(cli.store, read_only=True) as store:
        assert store.head == 4
    result = cli(*args)
    assert (result.code, result.err.strip()) == (1, message)


def test_import_against_a_checkpoint_it_does_not_extend_creates_nothing(cli: Cli, tmp_path: Path) -> None:
    """import --checkpoint NOTE --verifier KEY of an export older than the checkpoint: exit 1 naming
    both sizes, no store created; of the export that extends it: imported."""
    verifier = cli.ok("keygen", "k", "--key", "k.key", "--json").json()["verifier"]
    cli.ok("export", str(tmp_path / "old.jsonl"))
    cli.ok("add", "Alice has a cat", "--ns", "alice")
    (tmp_path / "cp.txt").write_text(cli.ok("checkpoint", "--key", "k.key", "--json").json()["note"])
    cli.ok("export", str(tmp_path / "new.jsonl"))
    target = str(tmp_path / "copy")
    refused = cli("--store", target, "import", str(tmp_path / "old.jsonl"), "--checkpoint", "cp.txt",
                  "--verifier", verifier)
    assert refused.code == 1 and "the history has 4 events, fewer than the checkpoint's size 5" in refused.err
    assert not Path(target).exists()
    cli.ok("--store", target, "import", str(tmp_path / "new.jsonl"), "--checkpoint", "cp.txt", "--verifier", verifier)

"""Erasure certificates (coniti.certificate, coniti erase --certificate): a signed statement of what
was erased, with each erase event's inclusion proof against a signed checkpoint and the scan of the
compacted store's files; checked with the verifier key alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import Cli

from coniti import Container, Note
from coniti.certificate import erase_with_certificate, verify_certificate
from coniti.checkpoint import generate_key
from coniti.errors import CheckpointError, ContractError
from coniti.impl.log import LogBackend

SIGNER, VERIFIER = generate_key("example.org/memory")


def _store(path: Path) -> None:
    with Container(memory="log", path=path, embedding="local_hash") as c:
        c.engine.ingest_many([Note(id=f"n{i}", text=f"private detail {i}: 4711-{i}", timestamp=float(i)) for i in range(4)])
        c.engine.upsert(Note(id="n1", text="private detail 1 corrected: 0815", timestamp=9.0))


def test_a_certificate_lists_the_erasure_and_proves_it(tmp_path: Path) -> None:
    """The certificate names each erased id with its versions and receipt, every receipt's proof
    holds against the signed checkpoint, the scan found no residue, and indeed no erased text is
    left in any file of the store."""
    _store(tmp_path / "s")
    with LogBackend(tmp_path / "s") as store:
        certificate = erase_with_certificate(store, ["n1", "n2"], namespace=(), reason="asked", signer=SIGNER)
        head = store.head
    statement = verify_certificate(certificate, VERIFIER)
    assert [(e["id"], len(e["versions"])) for e in statement["erased"]] == [("n1", 2), ("n2", 1)]
    assert statement["compaction"]["residue"] == [] and statement["reason"] == "asked"
    assert int(statement["checkpoint"].split("\n")[1]) == head - 1  # the checkpoint event is the last
    data = b"".join(p.read_bytes() for p in (tmp_path / "s").rglob("*") if p.is_file())
    for text in ("private detail 1: 4711-1", "private detail 1 corrected: 0815", "private detail 2: 4711-2"):
        assert text.encode() not in data
    assert b"private detail 3: 4711-3" in data  # the scan would see content that is there


def test_a_certificate_is_refused_with_another_key_or_when_altered(tmp_path: Path) -> None:
    """Another verifier key, or one character of the statement changed: CheckpointError."""
    _store(tmp_path / "s")
    with LogBackend(tmp_path / "s") as store:
        certificate = erase_with_certificate(store, ["n2"], namespace=(), reason="asked", signer=SIGNER)
    with pytest.raises(CheckpointError, match="is not signed by key"):
        verify_certificate(certificate, generate_key("example.org/memory")[1])
    with pytest.raises(CheckpointError):
        verify_certificate(certificate.replace('"id":"n2"', '"id":"n3"'), VERIFIER)


def test_an_id_never_held_writes_nothing(tmp_path: Path) -> None:
    """An id the namespace never held: ContractError, no event appended."""
    _store(tmp_path / "s")
    with LogBackend(tmp_path / "s") as store:
        head = store.head
        with pytest.raises(ContractError, match="record 'nope' was never in namespace"):
            erase_with_certificate(store, ["n1", "nope"], namespace=(), reason="asked", signer=SIGNER)
        assert store.head == head


def test_coniti_erase_with_a_certificate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """coniti erase ID --reason R --certificate FILE --key KEY --json writes FILE, which verifies."""
    _store(tmp_path / "s")
    monkeypatch.chdir(tmp_path)
    cli = Cli(tmp_path / "s", capsys, monkeypatch)
    verifier = cli.ok("keygen", "k", "--key", "k.key", "--json").json()["verifier"]
    shown = cli.ok("erase", "n0", "--reason", "asked", "--certificate", "cert.txt", "--key", "k.key", "--json").json()
    assert [e["id"] for e in shown["erased"]] == ["n0"]
    assert verify_certificate((tmp_path / "cert.txt").read_text(), verifier) == shown
    refused = cli("erase", "n1", "--reason", "asked", "--certificate", "cert2.txt")
    assert refused.code == 2 and "--certificate needs --key" in refused.err

"""LogBackend.fork / coniti fork: a new store holding a prefix of the log, frame for frame; the same
root at the fork point, then its own history, which a consistency proof ties to the parent's."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import Cli
from helpers_log import rec

from coniti.checkpoint import generate_key
from coniti.errors import ContractError
from coniti.impl.log import LogBackend
from coniti.memory import PutRequest
from coniti.proofs import verify_consistency


def _store(path: Path, n: int) -> LogBackend:
    store = LogBackend(path, durability="nosync")
    for i in range(n):
        store.put(PutRequest(records=[rec(f"r{i}", ts=float(i))]))
    return store


def test_a_fork_holds_the_prefix_and_then_diverges(tmp_path: Path) -> None:
    """fork(at=7) of a 12-event store: events 1-7 with the same hashes, the same root at 7, a new
    store id; after writes to both, each tree of the fork extends the parent's tree of size 7
    (consistency proof against the parent's root), and the parent's checkpoint of size 7 verifies
    in it with the parent's origin."""
    signer, verifier = generate_key("k")
    with _store(tmp_path / "a", 7) as parent:
        note = parent.checkpoint(signer)
        for i in range(4):
            parent.put(PutRequest(records=[rec(f"later{i}")]))
        with parent.fork(tmp_path / "b", at=7, durability="nosync") as forked:
            assert forked.head == 7
            assert [e.hash for e in forked.events()] == [e.hash for e in parent.events(until=7)]
            assert forked.root(7) == parent.root(7)
            assert forked.store_id != parent.store_id
            forked.put(PutRequest(records=[rec("own")]))
            size, root = forked.root()
            verify_consistency(
                forked.prove_consistency(7, size), old_size=7, new_size=size,
                old_root=parent.root(7)[1], new_root=root,
            )
            assert forked.root(8) != parent.root(8)
            assert forked.verify_checkpoint(note, verifier, origin=parent.origin).size == 7
            assert forked.verify().ok


def test_a_fork_past_the_head_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    """fork(at=head + 1): ContractError in one line, nothing at the destination."""
    with _store(tmp_path / "a", 3) as parent:
        with pytest.raises(ContractError) as caught:
            parent.fork(tmp_path / "b", at=4)
        assert str(caught.value) == "fork point at must be a seq between 0 and the head (3), got 4"
    assert not (tmp_path / "b").exists()


def test_coniti_fork_at(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """coniti fork --at SEQ DEST --json: the new store has SEQ events and the parent's root there."""
    _store(tmp_path / "a", 5).close()
    cli = Cli(tmp_path / "a", capsys, monkeypatch)
    result = cli.ok("fork", "--at", "3", str(tmp_path / "b"), "--json").json()
    assert (result["at"], result["same_root"]) == (3, True)
    with LogBackend(tmp_path / "b", read_only=True) as forked, LogBackend(tmp_path / "a", read_only=True) as parent:
        assert forked.root() == parent.root(3)
    refused = cli("fork", "--at", "9", str(tmp_path / "c"))
    assert refused.code == 1 and refused.err.strip() == (
        "coniti: error: fork point at must be a seq between 0 and the head (5), got 9"
    )

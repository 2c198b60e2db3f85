"""Recall receipts (coniti.receipts): ask(..., receipt=True) keeps what it answered in the log,
engine.replay answers the same hits bit for bit at that point, coniti receipt SEQ shows one."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import Cli

from coniti import Container, Note, Query
from coniti.errors import ContractError
from coniti.receipts import RECEIPT_KEY, RECEIPTS, query_digest, read_receipt


def _container(path: Path) -> Container:
    c = Container(memory="log", path=path, embedding="local_hash")
    c.engine.ingest_many([Note(id=f"n{i}", text=f"the cat number {i} sleeps", timestamp=float(i)) for i in range(8)])
    return c


def test_an_ask_with_a_receipt_keeps_its_digest_settings_point_and_hits(tmp_path: Path) -> None:
    """ask(receipt=True) appends one event in coniti/receipts: the query's digest (not its text),
    the resolved strategy, k, the embedder, the point read and (namespace, id, version, score) of
    every hit; Answer.receipt is its seq. Without receipt the ask appends nothing."""
    with _container(tmp_path / "s") as c:
        head = c.memory.head
        c.engine.ask("cat sleeps")
        assert c.memory.head == head
        answer = c.engine.ask("cat sleeps", receipt=True)
        assert answer.receipt == head + 1
        [event] = c.memory.events(after=head)
        assert (tuple(event.namespace), event.key) == (RECEIPTS, RECEIPT_KEY)
        kept = read_receipt(c.memory, head + 1)
        assert kept.query is None and "cat" not in str(event.value)
        assert kept.query_digest == query_digest(Query(text="cat sleeps"))
        assert (kept.point, kept.k, kept.embedder) == (head, 10, c.engine.spec_id)
        assert kept.strategy == Query(text="cat sleeps").resolved_strategy
        assert kept.hits == tuple((tuple(h.namespace), h.note.id, h.version, h.score) for h in answer.hits)


def test_a_receipt_replays_bit_for_bit_after_later_writes(tmp_path: Path) -> None:
    """After notes are added and removed, replay(receipt, query) asks memory as it was at the
    receipt's point: the same hits and scores, and says so; a receipt kept "with_query" replays
    without the query."""
    with _container(tmp_path / "s") as c:
        first = c.engine.ask("cat sleeps", receipt=True)
        second = c.engine.ask(Query(text="cat", k=3, strategy="hybrid"), receipt="with_query")
        c.engine.ingest_many([Note(id="z", text="the cat sleeps all day", timestamp=20.0)])
        c.engine.remove([first.hits[0].note.id])
        assert c.engine.ask("cat sleeps").hits != first.hits
        replayed, same = c.engine.replay(first.receipt, "cat sleeps")
        assert same and replayed.hits == first.hits
        replayed, same = c.engine.replay(second.receipt)
        assert same and [(h.note.id, h.score) for h in replayed.hits] == [(h.note.id, h.score) for h in second.hits]


def test_bad_replays_are_refused(tmp_path: Path) -> None:
    """Another query, a receipt that kept only the digest replayed without the query, an event that
    is not a receipt, a seq past the head: ContractError in one line."""
    with _container(tmp_path / "s") as c:
        seq = c.engine.ask("cat sleeps", receipt=True).receipt
        assert seq is not None
        with pytest.raises(ContractError, match=f"the query given is not the one of receipt {seq}"):
            c.engine.replay(seq, "dog")
        with pytest.raises(ContractError, match="keeps only the query's digest"):
            c.engine.replay(seq)
        with pytest.raises(ContractError, match="event 2 is not a recall receipt"):
            c.engine.replay(2)
        with pytest.raises(ContractError, match="receipt seq must be between 1 and the head"):
            c.engine.replay(seq + 5)


def test_coniti_receipt(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """coniti receipt SEQ --json shows the receipt and whether it replays (with --query when only
    the digest was kept)."""
    with _container(tmp_path / "s") as c:
        seq = c.engine.ask("cat sleeps", receipt=True).receipt
        c.engine.remove(["n3"])
    cli = Cli(tmp_path / "s", capsys, monkeypatch)
    shown = cli.ok("receipt", str(seq), "--json").json()
    assert (shown["seq"], shown["replays"], len(shown["hits"])) == (seq, None, 8)
    assert cli.ok("receipt", str(seq), "--query", "cat sleeps", "--json").json()["replays"] is True
    refused = cli("receipt", str(seq), "--query", "dog")
    assert refused.code == 1 and "is not the one of receipt" in refused.err


def test_a_context_block_with_a_receipt_keeps_its_answer_and_replays(tmp_path: Path) -> None:
    """context(receipt=True) keeps the ask's answer as a recall receipt like ask's (the same
    digest, point and hits); ContextBlock.receipt is its seq, and after later writes replay gives
    the same hits, so to_context_block of them is the same block. Without receipt nothing is kept."""
    from coniti.recall import to_context_block

    with _container(tmp_path / "s") as c:
        head = c.memory.head
        assert c.engine.context("cat sleeps", token_budget=30).receipt is None and c.memory.head == head
        block = c.engine.context("cat sleeps", token_budget=30, receipt=True)
        assert block.receipt == head + 1 and block.omitted > 0
        kept = read_receipt(c.memory, head + 1)
        asked = c.engine.ask("cat sleeps")
        assert kept.point == block.seq == head and kept.query is None
        assert kept.hits == tuple((tuple(h.namespace), h.note.id, h.version, h.score) for h in asked.hits)
        c.engine.remove([block.hits[0].note.id])
        replayed, same = c.engine.replay(block.receipt, "cat sleeps")
        assert same
        again = to_context_block(replayed.hits, 30, seq=kept.point)
        assert (again.text, again.omitted, again.tokens) == (block.text, block.omitted, block.tokens)


def test_a_context_receipt_with_query_replays_without_it_and_bad_arguments_write_nothing(tmp_path: Path) -> None:
    """context(receipt="with_query") keeps the query's text (replay needs no query); a bad
    token_budget is refused before any receipt is written."""
    with _container(tmp_path / "s") as c:
        block = c.engine.context(Query(text="cat", k=3), token_budget=50, receipt="with_query")
        assert block.receipt is not None
        assert c.engine.replay(block.receipt)[1]
        head = c.memory.head
        with pytest.raises(ContractError, match="token_budget"):
            c.engine.context("cat", token_budget=0, receipt=True)
        assert c.memory.head == head


def test_coniti_ask_receipt_prints_its_seq_and_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """coniti ask --receipt-with-query keeps a receipt of the answer and names its seq (stderr;
    "receipt" in --json); coniti receipt SEQ then replays it after later writes. --receipt keeps
    only the digest; without either nothing is written."""
    with _container(tmp_path / "s") as c:
        head = c.memory.head
    cli = Cli(tmp_path / "s", capsys, monkeypatch)
    plain = cli.ok("ask", "cat sleeps", "--json").json()
    assert "receipt" not in plain
    shown = cli.ok("ask", "cat sleeps", "-k", "3", "--receipt-with-query", "--json").json()
    assert shown["receipt"] == head + 1 and len(shown["hits"]) == 3
    text = cli.ok("ask", "cat sleeps", "--receipt")
    assert f"receipt: event {head + 2}" in text.err and "n" in text.out
    cli.ok("rm", "n1", "n2")
    replayed = cli.ok("receipt", str(head + 1), "--json").json()
    assert replayed["replays"] is True
    with Container(memory="log", path=tmp_path / "s", embedding="local_hash") as c:
        assert read_receipt(c.memory, head + 2).query is None and read_receipt(c.memory, head + 1).k == 3


def test_coniti_ask_context_receipt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """coniti ask --context --receipt keeps the block's answer as a receipt: its seq in --json
    beside the block's seq, on stderr otherwise (stdout stays the block)."""
    with _container(tmp_path / "s") as c:
        head = c.memory.head
    cli = Cli(tmp_path / "s", capsys, monkeypatch)
    doc = cli.ok("ask", "cat sleeps", "--context", "--budget", "30", "--receipt", "--json").json()
    assert (doc["receipt"], doc["seq"]) == (head + 1, head)
    text = cli.ok("ask", "cat sleeps", "--context", "--budget", "30", "--receipt-with-query")
    assert "receipt" not in text.out and f"receipt: event {head + 2}" in text.err
    assert cli.ok("receipt", str(head + 2), "--json").json()["replays"] is True


def test_coniti_ask_receipt_refusals_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--receipt with --as-of, --valid-at or --receipt-with-query: a one-line usage error, nothing written."""
    with _container(tmp_path / "s") as c:
        head = c.memory.head
    cli = Cli(tmp_path / "s", capsys, monkeypatch)
    for extra, says in ((["--as-of", "3"], "--as-of"), (["--valid-at", "2025-01-01"], "--valid-at"),
                        (["--receipt-with-query"], "not both")):  # fmt: skip
        refused = cli("ask", "cat", "--receipt", *extra)
        assert refused.code == 2 and says in refused.err
    with Container(memory="log", path=tmp_path / "s", embedding="local_hash") as c:
        assert c.memory.head == head

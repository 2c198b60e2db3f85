"""Consolidation: summaries and facts derived from a conversation's turns, idempotent per span,
one atomic write (nothing on failure, all or nothing under kill -9), pruning, the background loop,
the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from cli_support import ROOT, Cli

from coniti.actor import Note
from coniti.container import Container
from coniti.conversation import Conversation, Turn
from coniti.engine.consolidate import ExtractiveSummarizer, PassThroughExtractor, Proposal
from coniti.errors import ContractError

TURNS = [
    ("ana", "The Atlas launch is on March 3. We still need the slides."),
    ("bob", "Marketing wants a launch video for Atlas. The launch date matters for the video."),
    ("ana", "Lunch at noon?"),
]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[Container, Conversation]]:
    with Container(memory="log", path=tmp_path / "s") as c:
        conv = c.conversation("atlas")
        conv.append([Turn.create(speaker=s, text=t, timestamp=float(i + 1)) for i, (s, t) in enumerate(TURNS)])
        yield c, conv


def _notes(c: Container, ns: tuple[str, ...], kind: str) -> list[Note]:
    return [r.note for r in c.memory.iter_all(namespace=ns) if r.note.kind == kind]


def test_extractive_summary_keeps_the_best_scored_sentences_in_order() -> None:
    """The summariser keeps the sentences sharing the span's frequent words, in order, with speakers."""
    notes = [Note(id=str(i), text=t, timestamp=i, metadata={"turn": {"speaker": s}}) for i, (s, t) in enumerate(TURNS)]
    text = ExtractiveSummarizer(max_sentences=3).summarize(notes)
    assert text == (
        "ana: The Atlas launch is on March 3. bob: Marketing wants a launch video for Atlas. "
        "bob: The launch date matters for the video."
    )


def test_extractive_summary_respects_max_chars() -> None:
    """No summary is longer than max_chars; the first sentence is cut rather than dropped."""
    notes = [Note(id="a", text="word " * 100, timestamp=1)]
    assert len(ExtractiveSummarizer(max_chars=40).summarize(notes)) == 40


def test_pass_through_extractor_proposes_each_turn_citing_it() -> None:
    """Each turn of at least min_words words becomes a proposal citing that turn."""
    notes = [Note(id="a", text=" one two three ", timestamp=1), Note(id="b", text="hi", timestamp=2)]
    assert PassThroughExtractor(min_words=2).extract(notes, []) == [Proposal("one two three", sources=("a",))]


def test_consolidate_writes_a_summary_citing_every_turn(store: tuple[Container, Conversation]) -> None:
    """One summary note of kind summary, derived from each turn's version; the report counts them."""
    c, conv = store
    report = c.engine.consolidate(conv)
    (summary,) = _notes(c, conv.namespace, "summary")
    versions = {r.id: r.version for r in c.memory.iter_all(namespace=conv.namespace) if r.note.kind == "message"}
    assert sorted(summary.derived_from) == sorted(f"note:{i}@{v}" for i, v in versions.items())
    assert (report.summarized, report.derived, report.pruned, report.notes) == (3, 1, 0, (summary.id,))
    assert report.seq == c.memory.head


def test_consolidating_again_writes_nothing(store: tuple[Container, Conversation]) -> None:
    """A second consolidation of the same turns writes nothing."""
    c, conv = store
    c.engine.consolidate(conv)
    head = c.memory.head
    report = c.engine.consolidate(conv)
    assert (report.derived, report.seq, c.memory.head) == (0, None, head)


def test_same_span_replays_by_op_id(store: tuple[Container, Conversation]) -> None:
    """With the summary deleted, the same span is recognised by its op id: replayed, nothing written."""
    c, conv = store
    first = c.engine.consolidate(conv)
    c.engine.remove(list(first.notes), namespace=conv.namespace)
    head = c.memory.head
    again = c.engine.consolidate(conv)
    assert again.replayed and again.op_id == first.op_id and c.memory.head == head


def test_the_write_is_audited_with_the_decisions(store: tuple[Container, Conversation]) -> None:
    """The consolidation's events carry a reason naming the op id and each decision."""
    c, conv = store
    report = c.engine.consolidate(conv, extractor=PassThroughExtractor(min_words=4))
    reasons = {e.reason for e in c.memory.events(c.memory.head - 1)}
    assert len(reasons) == 1
    (reason,) = reasons
    assert report.op_id in reason and "summary" in reason and reason.count("added") == 2


def test_extractor_facts_are_added_and_duplicates_are_no_ops(store: tuple[Container, Conversation]) -> None:
    """Proposed facts are written as kind fact citing their turn; a known fact is a no-op."""
    c, conv = store
    c.engine.ingest(Note(id="known", text="Lunch at noon?", timestamp=0, kind="fact"), namespace=conv.namespace)
    report = c.engine.consolidate(conv, extractor=PassThroughExtractor())
    facts = {n.text for n in _notes(c, conv.namespace, "fact")}
    assert facts == {t for _, t in TURNS}
    assert report.derived == 3 and any(d.startswith("no-op") for d in report.decisions)


def test_extractor_may_supersede_a_fact(store: tuple[Container, Conversation]) -> None:
    """A proposal naming a live fact supersedes it in the same write: the old one ends, reweighted 1."""
    c, conv = store
    c.engine.ingest(Note(id="old", text="Atlas launches in February", timestamp=0, kind="fact"), namespace=conv.namespace)

    def extractor(turns: Sequence[Note], facts: Sequence[Note]) -> list[Proposal]:
        return [Proposal("Atlas launches on March 3", supersedes=facts[0].id)]

    report = c.engine.consolidate(conv, summarizer=False, extractor=extractor)
    old = c.engine.get(["old"], namespace=conv.namespace).records[0].note
    assert report.reweighted == 1 and old.valid_to is not None
    assert c.engine.explain(report.notes[0], namespace=conv.namespace).supersedes[0].id == "old"


@pytest.mark.parametrize(
    ("summarizer", "extractor", "match"),
    [
        (lambda turns: 42, None, "summarizer returned int"),
        (lambda turns: (_ for _ in ()).throw(RuntimeError("model down")), None, "model down"),
        (False, lambda t, f: [Proposal("x", supersedes="nope")], "nope"),
        (False, lambda t, f: [Proposal("x", sources=("nope",))], "nope"),
        (False, lambda t, f: "not a list", "extractor must return a list"),
    ],
)
def test_a_failed_consolidation_writes_nothing(
    store: tuple[Container, Conversation], summarizer: object, extractor: object, match: str
) -> None:
    """A summariser that raises or returns a non-string, an extractor naming an unknown id or returning
    a non-list: the error names it, and the head does not move."""
    c, conv = store
    head = c.memory.head
    with pytest.raises((ContractError, RuntimeError), match=match):
        c.engine.consolidate(conv, summarizer=summarizer, extractor=extractor)
    assert c.memory.head == head


def test_async_summarizer_is_awaited(store: tuple[Container, Conversation]) -> None:
    """An async summariser's result is awaited and written."""
    c, conv = store

    async def summarize(turns: Sequence[Note]) -> str:
        return f"{len(turns)} turns about Atlas"

    c.engine.consolidate(conv, summarizer=summarize)
    assert [n.text for n in _notes(c, conv.namespace, "summary")] == ["3 turns about Atlas"]


def test_prune_sources_deletes_the_turns_summarised(store: tuple[Container, Conversation]) -> None:
    """prune_sources deletes every turn summarised, in the same write; their history stays."""
    c, conv = store
    ids = [r.id for r in c.memory.iter_all(namespace=conv.namespace)]
    report = c.engine.consolidate(conv, prune_sources=True)
    assert report.pruned == 3 and _notes(c, conv.namespace, "message") == []
    assert c.memory.history(ids[0], conv.namespace)[-1].kind == "delete"


def test_max_items_prunes_the_oldest_with_an_audited_reason(store: tuple[Container, Conversation]) -> None:
    """max_items deletes the oldest notes beyond it (never the summary just written), each delete
    stamped with the consolidation's reason."""
    c, conv = store
    report = c.engine.consolidate(conv, max_items=2)
    left = sorted(r.note.timestamp for r in c.memory.iter_all(namespace=conv.namespace))
    assert report.pruned == 2 and len(left) == 2
    assert {n.kind for n in (r.note for r in c.memory.iter_all(namespace=conv.namespace))} == {"message", "summary"}
    deletes = [e for e in c.memory.events(0, namespace=conv.namespace) if e.kind == "delete"]
    assert len(deletes) == 2 and all(report.op_id in (e.reason or "") for e in deletes)


def test_older_than_limits_the_span(store: tuple[Container, Conversation]) -> None:
    """Only turns older than older_than are summarised."""
    c, conv = store
    report = c.engine.consolidate(conv, older_than=2.5)
    assert report.summarized == 2


def test_consolidate_every_runs_in_the_background_and_stops_with_the_engine(tmp_path: Path) -> None:
    """consolidate_every consolidates new turns on its thread; closing the engine stops the thread."""
    c = Container(memory="log", path=tmp_path / "s")
    conv = c.conversation("x")
    worker = c.engine.consolidate_every(0.05, conv)
    conv.append(Turn.create(speaker="a", text="The first turn about Atlas."))
    deadline = time.time() + 10
    while not worker.reports or worker.reports[-1].derived == 0:
        assert time.time() < deadline and not worker.errors
        time.sleep(0.02)
    c.close()
    assert not worker.running


def test_bad_options_are_refused() -> None:
    """A negative max_items or a non-positive interval is refused naming the option."""
    with Container() as c:
        with pytest.raises(ContractError, match="max_items"):
            c.engine.consolidate((), max_items=-1)
        with pytest.raises(ContractError, match="interval"):
            c.engine.consolidate_every(0, ())


def test_cli_consolidate(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """coniti consolidate --conversation prints the report; --json the report's fields; again: nothing."""
    with Container(memory="log", path=tmp_path / "s", embedding="local_hash") as c:
        c.conversation("atlas").append([Turn.create(speaker=s, text=t) for s, t in TURNS])
    cli = Cli(tmp_path / "s", capsys, monkeypatch)
    first = cli.ok("consolidate", "--conversation", "atlas", "--extract", "--json").json()
    assert (first["summarized"], first["derived"]) == (3, 4)
    assert cli.ok("consolidate", "--conversation", "atlas").out.startswith("summarized 0")


N_KILLED = 1000

_KILLED = """
import sys, time
from coniti.container import Container
from coniti.conversation import Turn
from coniti.engine.consolidate import PassThroughExtractor
with Container(memory="log", path=sys.argv[1]) as c:
    conv = c.conversation("big")
    def summarize(turns):
        print("ready", flush=True)
        return "summary of many turns"
    c.engine.consolidate(conv, summarizer=summarize, extractor=PassThroughExtractor(), prune_sources=True)
    print("done", flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2, None])
def test_kill_9_mid_consolidation_leaves_all_or_nothing(tmp_path: Path, delay: float | None) -> None:
    """A process killed with SIGKILL while consolidating 1,000 turns leaves either none of the
    consolidation (every turn, no summary, no fact) or all of it (no turn, one summary, 1,000 facts);
    killed after it printed done (delay None), all of it."""
    path = tmp_path / "s"
    with Container(memory="log", path=path) as c:
        c.conversation("big").append([Turn.create(speaker="a", text=f"turn number {i} about Atlas") for i in range(N_KILLED)])
        ns = c.conversation("big").namespace
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, str(path)], stdout=subprocess.PIPE, env=env, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    if delay is None:
        assert proc.stdout.readline().strip() == "done"
    else:
        time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with Container(memory="log", path=path) as c:
        kinds = [r.note.kind for r in c.memory.iter_all(namespace=ns)]
    counts = {k: kinds.count(k) for k in ("message", "summary", "fact")}
    everything = {"message": 0, "summary": 1, "fact": N_KILLED}
    assert counts in ({"message": N_KILLED, "summary": 0, "fact": 0}, everything), json.dumps(counts)
    if delay is None:
        assert counts == everything


def test_a_span_holds_at_most_max_span_turns(tmp_path: Path) -> None:
    """Of more unsummarised turns than MAX_SPAN, the oldest MAX_SPAN are summarised and the rest
    are reported remaining, for the next call, which summarises them."""
    from coniti.engine.consolidate import MAX_SPAN

    with Container(memory="log", path=tmp_path / "s", embedding="local_hash") as c:
        chat = c.conversation("long")
        chat.append([Turn.create(speaker="a", text=f"turn {i}", timestamp=float(i + 1)) for i in range(MAX_SPAN + 5)])
        first = c.engine.consolidate(chat)
        second = c.engine.consolidate(chat)
    assert (first.summarized, first.remaining) == (MAX_SPAN, 5)
    assert (second.summarized, second.remaining) == (5, 0)

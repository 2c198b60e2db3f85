"""The demo behind ``coniti demo``: a small story told with coniti's public API, returned as data.

:func:`run` builds a fresh LogBackend store, ingests the bundled corpus (``coniti/data/demo-notes.jsonl``:
an assistant's memory of several people over six months, in several namespaces) through the engine,
applies corrections, deletions and one erasure under different actors with reasons, and, on a copy
of the store, supersedes the Atlas launch plan (valid time) and consolidates a conversation
(summary, lineage); it collects what
the command line then shows: answers, answers as of earlier points, audit trails, the change between
two points, ``verify``, the files written, the store compacted, and the figures. It prints nothing.

A directory is reused only if the demo made it (it holds the marker file ``.coniti-demo``); any other
non-empty directory is refused with :class:`DemoError`, so the demo never deletes data it did not write.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from coniti.actor import Note, Query, TimeRange
from coniti.container import Container
from coniti.conversation import Conversation, Turn
from coniti.engine import ContinuityEngine
from coniti.engine.consolidate import ConsolidationReport
from coniti.errors import ConitiError
from coniti.events import Event
from coniti.impl.log import LogBackend, VerifyReport
from coniti.recall import Hit

__all__ = [
    "CORPUS",
    "DEFAULT_DIR",
    "MARKER",
    "Asked",
    "CorpusNote",
    "DemoError",
    "DemoReport",
    "Earlier",
    "Edit",
    "Truth",
    "load_corpus",
    "run",
]

DEFAULT_DIR = Path("coniti-demo")
"""Where the demo works unless told otherwise (relative to the current directory)."""
MARKER = ".coniti-demo"
"""File that marks a directory as the demo's own, safe to wipe on a rerun."""
CORPUS = "demo-notes.jsonl"
INGEST_ACTOR = "assistant"
INGEST_REASON = "remembered from conversations"
INGEST_BATCH = 50


class DemoError(ConitiError):
    """The demo cannot run here (for instance, its directory holds data it did not write)."""


@dataclass(frozen=True)
class CorpusNote:
    """One note of the bundled corpus."""

    id: str
    namespace: tuple[str, ...]
    timestamp: float
    text: str
    metadata: dict[str, Any]

    def note(self) -> Note:
        return Note(id=self.id, text=self.text, timestamp=self.timestamp, metadata=self.metadata)


def load_corpus() -> list[CorpusNote]:
    """The bundled corpus, in note-time order."""
    text = resources.files("coniti").joinpath("data", CORPUS).read_text(encoding="utf-8")
    out = []
    for line in text.splitlines():
        row = json.loads(line)
        out.append(
            CorpusNote(
                id=row["id"],
                namespace=tuple(row["namespace"]),
                timestamp=datetime.fromisoformat(row["time"]).timestamp(),
                text=row["text"],
                metadata=row["metadata"],
            )
        )
    return out


@dataclass(frozen=True)
class Edit:
    """A change made after the ingest: ``new_text`` corrects the note's text (one
    :meth:`~ContinuityEngine.update`: a new version, one event), ``None`` deletes it; ``erase``
    erases its content from the whole history instead (:meth:`LogBackend.erase`)."""

    actor: str
    reason: str
    namespace: tuple[str, ...]
    id: str
    new_text: str | None = None
    erase: bool = False

    @property
    def what(self) -> str:
        """``corrected``, ``deleted`` or ``erased``."""
        return "erased" if self.erase else "corrected" if self.new_text else "deleted"


EDITS = (
    Edit("bob", "the budget is in euros and includes the appliances", ("bob", "home"),
         "bob-kitchen-budget",
         "Bob's kitchen renovation budget is 25,000 EUR including appliances, contractor not chosen "
         "yet."),
    Edit("priya", "the Harbour room was double-booked on June 3", ("team", "atlas"), "atlas-retro",
         "Atlas retrospective moved to June 5 in the Harbour room."),
    Edit("alice", "Alice asked the assistant to forget her home address", ("alice", "personal"),
         "alice-address"),
    Edit("bob", "passwords do not belong in the assistant's memory", ("bob", "home"), "bob-wifi"),
    Edit("carmen", "superseded by the switch to PLOS ONE", ("carmen", "thesis"), "carmen-journal"),
    Edit("privacy-officer", "erasure request from Alice (GDPR art. 17)", ("alice", "personal"),
         "alice-phone", erase=True),
)

QUESTIONS = (
    (("bob", "home"), "What is Bob's kitchen budget?"),
    (("carmen", "thesis"), "Which journal will Carmen submit her first paper to?"),
    (("alice", "work"), "What is Alice's role at Northwind?"),
    (("alice", "personal"), "Is Alice allergic to anything?"),
    (("dmitri", "travel"), "Which seat does Dmitri want on flights?"),
)
"""Asked now, after the edits; the best hit is shown."""

LAUNCH = (("team", "atlas"), "When is the Atlas launch date?")
LAUNCH_DAYS = ("2025-03-01", "2025-04-01")
"""The launch question is asked with notes dated before each of these days, then with all of them."""


@dataclass(frozen=True)
class Asked:
    """A question, where and as of what it was asked, and the hits (relevance, note), best first:
    relevance is :attr:`coniti.recall.Hit.relevance`, the hit's score read on a 0-1 scale."""

    question: str
    namespace: tuple[str, ...]
    hits: list[tuple[float, Note]]
    as_of: str = "now"
    note_time_before: float | None = None
    seq: int | None = None


@dataclass(frozen=True)
class Earlier:
    """One question asked at earlier points (each with why the answer differs) and now."""

    then: list[tuple[Asked, str]]
    now: Asked


SUPERSEDE = ("priya", "the Kafka vendor delayed the managed cluster upgrade")
"""Who supersedes the April 1 launch plan, and why."""

SYNC = (
    ("priya", "The EU region went live on streaming on May 20 after the consumer lag fix."),
    ("alice", "Good. The US cut-over is on May 27; Tom updates the dashboards before that."),
    ("tom", "Dashboards are ready. I will watch the consumer lag during the US cut-over."),
    ("alice", "Let's keep the nightly batch jobs as a fallback until June."),
)
"""A launch sync conversation, consolidated into a summary."""
TRUTH_STORE = "keeping-true"
"""The copy of the store (in the demo's directory) the supersession and consolidation are made on."""


@dataclass(frozen=True)
class Truth:
    """Keeping memory true: the launch plan superseded (``old`` by ``new`` at event ``seq``), the
    launch question now and as true on ``then_day``, the superseded plan shown marked, then a
    conversation consolidated (its report, summary and the summary's blame line)."""

    store: Path
    old: str
    new: str
    seq: int
    actor: str
    reason: str
    now: Asked
    then_day: str
    then: Asked
    marked: list[tuple[str, bool]]
    conversation: tuple[str, ...]
    consolidation: ConsolidationReport
    summary: str
    blame: str


@dataclass
class DemoReport:
    """Everything the demo did and found; see :func:`run`."""

    directory: Path
    store: Path
    notes: int = 0
    namespaces: dict[str, int] = field(default_factory=dict)
    ingest_seconds: float = 0.0
    seq_after_ingest: int = 0
    time_after_ingest: float = 0.0
    edits: list[tuple[Edit, int]] = field(default_factory=list)
    answers: list[Asked] = field(default_factory=list)
    earlier: list[Earlier] = field(default_factory=list)
    trails: list[tuple[tuple[str, ...], str, list[Event]]] = field(default_factory=list)
    changes: list[tuple[tuple[str, ...], str, str, str]] = field(default_factory=list)
    truth: Truth | None = None
    verify: VerifyReport | None = None
    dump_file: Path | None = None
    dumped: int = 0
    export_file: Path | None = None
    exported: int = 0
    events: int = 0
    live_notes: int = 0
    compacted: tuple[int, int] = (0, 0)
    store_bytes: int = 0
    seconds: float = 0.0


def prepare(directory: Path) -> Path:
    """Make ``directory`` an empty demo directory (wiping an earlier demo run); returns the store path."""
    if directory.exists():
        if not directory.is_dir():
            raise DemoError(f"{directory} exists and is not a directory; choose another --store")
        if any(directory.iterdir()):
            if not (directory / MARKER).is_file():
                raise DemoError(
                    f"{directory} is not empty and was not made by the demo; "
                    "choose another --store or remove it"
                )
            shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MARKER).write_text("made by 'coniti demo'; rerunning the demo replaces it\n")
    return directory / "store"


def run(
    directory: Path = DEFAULT_DIR,
    *,
    progress: Callable[[int], None] | None = None,
) -> DemoReport:
    """Run the demo in ``directory`` (see the module doc); ``progress(n)`` is told of each batch."""
    started = time.perf_counter()
    corpus = load_corpus()
    store_path = prepare(directory)
    report = DemoReport(directory=directory, store=store_path)
    tick = progress or (lambda n: None)
    with LogBackend(store_path) as store, Container(memory=store, embedding="minilm") as container:
        engine = container.engine
        _ingest(report, store, engine, corpus, tick)
        _edit(report, store, engine)
        _ask(report, engine)
        _earlier(report, store, engine)
        _trail(report, store)
        _changes(report, store)
        report.verify = store.verify()
        _files(report, store, directory)
        _truth(report, directory)
        report.events = store.head
        report.compacted = store.compact()
        report.live_notes = sum(
            store.count(store.count_request(None, ns)).count
            for ns in {c.namespace for c in corpus}
        )
    report.store_bytes = sum(p.stat().st_size for p in store_path.iterdir() if p.is_file())
    report.seconds = time.perf_counter() - started
    return report


def _ingest(
    report: DemoReport,
    store: LogBackend,
    engine: ContinuityEngine,
    corpus: list[CorpusNote],
    tick: Callable[[int], None],
) -> None:
    t0 = time.perf_counter()
    by_ns: dict[tuple[str, ...], list[CorpusNote]] = {}
    for item in corpus:
        by_ns.setdefault(item.namespace, []).append(item)
    with store.audit(actor=INGEST_ACTOR, reason=INGEST_REASON):
        for namespace, items in by_ns.items():
            for i in range(0, len(items), INGEST_BATCH):
                batch = items[i : i + INGEST_BATCH]
                results = engine.ingest_many([c.note() for c in batch], namespace=namespace)
                report.notes += sum(1 for r in results if r.admitted)
                tick(len(batch))
    report.namespaces = {"/".join(ns): len(items) for ns, items in by_ns.items()}
    report.ingest_seconds = time.perf_counter() - t0
    report.seq_after_ingest = store.head
    report.time_after_ingest = time.time()
    time.sleep(0.01)  # the edits are recorded strictly later than this instant


def _edit(report: DemoReport, store: LogBackend, engine: ContinuityEngine) -> None:
    for edit in EDITS:
        with store.audit(actor=edit.actor, reason=edit.reason):
            if edit.erase:
                store.erase([edit.id], namespace=edit.namespace, reason=edit.reason)
                engine.refresh()
                report.edits.append((edit, store.head))
                continue
            if edit.new_text is not None:
                engine.update(edit.id, text=edit.new_text, namespace=edit.namespace)
            else:
                engine.remove([edit.id], namespace=edit.namespace)
        report.edits.append((edit, store.head))


def _asked(engine: ContinuityEngine, namespace: tuple[str, ...], question: str, *, k: int = 1,
           before: float | None = None, as_of: str = "now", seq: int | None = None) -> Asked:
    window = None if before is None else TimeRange(end=before)
    answer = engine.ask(Query(text=question, time_range=window, k=k), namespace=namespace)
    hits = _relevances(answer.hits)
    return Asked(question, namespace, hits, as_of, before, seq)


def _ask(report: DemoReport, engine: ContinuityEngine) -> None:
    for namespace, question in QUESTIONS:
        report.answers.append(_asked(engine, namespace, question))


def _day(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def _earlier(report: DemoReport, store: LogBackend, engine: ContinuityEngine) -> None:
    namespace, question = LAUNCH
    report.earlier.append(
        Earlier(
            [
                (
                    _asked(engine, namespace, question, k=3, before=_day(day), as_of=day),
                    f"only notes dated before {day} count: what the assistant knew that day",
                )
                for day in LAUNCH_DAYS
            ],
            _asked(engine, namespace, question, k=3),
        )
    )
    budget_ns, budget = QUESTIONS[0]
    when = report.time_after_ingest
    past = engine.at(time=when)
    seq = store.at(time=when).seq
    edit, edit_seq = report.edits[0]
    events = f"event {edit_seq}" if edit_seq == seq + 1 else f"events {seq + 1}..{edit_seq}"
    why = (
        f"the store is read as it was at that moment, before {edit.actor} corrected the note "
        f"({events}, reason: {edit.reason})"
    )
    then = _asked(past, budget_ns, budget, as_of=f"{_clock(when)} UTC (seq {seq})", seq=seq)
    report.earlier.append(Earlier([(then, why)], _asked(engine, budget_ns, budget)))


def _clock(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _trail(report: DemoReport, store: LogBackend) -> None:
    for edit in (EDITS[0], next(e for e in EDITS if e.erase)):
        report.trails.append((edit.namespace, edit.id, store.history(edit.id, edit.namespace)))


def _changes(report: DemoReport, store: LogBackend) -> None:
    a = store.at(time=report.time_after_ingest).seq
    b = store.head
    before, after = store.at(a), store.at(b)
    for namespace in sorted({e.namespace for e, _ in report.edits}):
        result = store.diff(a, b, namespace=namespace)
        for change, ids, view in (("added", result.added, after),
                                  ("removed", result.removed, before),
                                  ("changed", result.changed, after)):
            found = {r.id: r.note.text for r in view.get(view.get_request(ids, namespace)).records}
            for rid in ids:
                text = found.get(rid, "(content erased)")
                report.changes.append((namespace, change, rid, text))


def _files(report: DemoReport, store: LogBackend, directory: Path) -> None:
    report.dump_file = directory / "team-atlas.coniti-memory.jsonl"
    report.dumped = store.dump(report.dump_file, ("team", "atlas"))
    report.export_file = directory / "history.coniti-log.jsonl.gz"
    report.exported = store.export_log(report.export_file)


def _truth(report: DemoReport, directory: Path) -> None:
    """On a copy of the store (imported from the export, so the tour's store stays as it is)."""
    assert report.export_file is not None
    copy = directory / TRUTH_STORE
    with LogBackend.import_log(report.export_file, copy) as store, Container(memory=store, embedding="minilm") as c:
        _supersede_and_consolidate(report, store, c.engine, copy)


def _supersede_and_consolidate(report: DemoReport, store: LogBackend, engine: ContinuityEngine, copy: Path) -> None:
    namespace, question = LAUNCH
    actor, reason = SUPERSEDE
    fact = Note(
        id="atlas-launch-date", kind="fact", timestamp=_day("2025-03-12"), valid_from=_day("2025-03-12"),
        text="Atlas launch date: May 15, moved from April 1 (the Kafka vendor delayed the cluster upgrade).",
        derived_from=["note:atlas-vendor-delay"],
    )  # fmt: skip
    with store.audit(actor=actor, reason=reason):
        engine.supersede("atlas-launch-plan", fact, namespace=namespace)
    seq = store.head
    query = Query(text=question, k=2)
    now = engine.ask(query, namespace=namespace)
    then_day = "2025-02-01"
    then = engine.ask(query, namespace=namespace, valid_at=_day(then_day))
    marked = engine.ask(Query(text=question, k=4), namespace=namespace, include_superseded=True)
    chat = Conversation(engine, "launch-sync", namespace=namespace)
    start = _day("2025-05-21")
    chat.append([Turn(id=f"sync-{i}", speaker=who, text=text, timestamp=start + 60 * i)
                 for i, (who, text) in enumerate(SYNC)], actor="assistant", reason="meeting notes")  # fmt: skip
    consolidated = engine.consolidate(chat, actor="assistant")
    summary = engine.get(list(consolidated.notes), namespace=chat.namespace).records[0].note.text
    report.truth = Truth(
        store=copy, old="atlas-launch-plan", new=fact.id, seq=seq, actor=actor, reason=reason,
        now=Asked(question, namespace, _relevances(now.hits)),
        then_day=then_day,
        then=Asked(question, namespace, _relevances(then.hits), as_of=f"true on {then_day}"),
        marked=[(h.note.id, h.superseded) for h in marked.hits],
        conversation=chat.namespace, consolidation=consolidated, summary=summary,
        blame=engine.blame(consolidated.notes[0], namespace=chat.namespace),
    )  # fmt: skip


def _relevances(hits: Sequence[Hit]) -> list[tuple[float, Note]]:
    """Each hit as (its relevance, 0-1; its score for a ranking without one, ``recent``), note)."""
    return [(h.score if h.relevance is None else h.relevance, h.note) for h in hits]

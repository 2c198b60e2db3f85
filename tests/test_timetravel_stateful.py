"""Model-based test of time travel and audit: hypothesis drives puts, deletes, metadata writes,
clears, erasures of records, of metadata keys and of whole namespaces (inside random audit blocks),
reopens and compactions against a LogBackend and a plain model that keeps every event and the memory
after each one. After every step the audit trail and the current reads (get / paged scan / count /
get_meta) equal the model's; every record's history, views of sampled points and diffs between
sampled points too; after an erasure the namespace reads like the model at every point (erased
content is never visible, ``log/FORMAT.md`` §3.4, §15), and after a compaction no byte of content
that only erased events held is left in the store's files. verify() is clean at the end, and so is
an export -> import copy with the same answers.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import numpy as np
from hypothesis import HealthCheck, event, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from coniti.actor import Note
from coniti.events import EraseResult
from coniti.impl.log import LogBackend
from coniti.log.keys import name_key
from coniti.memory import (
    ClearRequest,
    CountRequest,
    DeleteRequest,
    GetRequest,
    MemoryBackend,
    MemoryRecord,
    MetaGetRequest,
    MetaSetRequest,
    PutRequest,
    ScanRequest,
)
from coniti.testing.helpers import Exact, exact

NAMESPACES: list[tuple[str, ...]] = [(), ("t",), ("l" * 450,)]
UNKNOWN = ("never-used",)  # drawn by the erasure rules only: a namespace the store never held
IDS = ["a", "b", "c", "d", "e" * 420]
KEYS = ["k", "embedding_id", "m" * 420]  # the long key is hashed in the index (FORMAT.md §4.3)
ACTORS = [None, "alice", "bob"]
# Content that the compaction check looks for in the store's files, one per kind of content.
SECRET_TEXT = "secret-text-3f9a"
SECRET_NOTE_META = "secret-note-meta-51c0"
SECRET_BLOB = b"secret-blob-a7e2"
SECRET_META = "secret-meta-value-7c21"
SECRETS = [SECRET_TEXT.encode(), SECRET_NOTE_META.encode(), SECRET_BLOB, SECRET_META.encode()]

namespaces = st.sampled_from(NAMESPACES)
erase_namespaces = st.sampled_from([*NAMESPACES, UNKNOWN])
ids = st.sampled_from(IDS)
stamps = st.one_of(st.none(), st.tuples(st.sampled_from(ACTORS), st.sampled_from([None, "why", "fix"])))
json_values = st.one_of(st.none(), st.integers(-5, 5), st.booleans(), st.text(max_size=4),
                        st.lists(st.integers(0, 3), max_size=2), st.just(SECRET_META))


@st.composite
def records(draw: Any, ns: tuple[str, ...]) -> MemoryRecord:
    """A record with a float16/32/64 vector or none (event version 3), and sometimes a blob."""
    dtype = draw(st.sampled_from(["float16", "float32", "float64", None]))
    vector = None
    if dtype is not None:
        vector = np.array(draw(st.lists(st.sampled_from([0.5, -1.0, 2.0]), min_size=1, max_size=3)), dtype)
    return MemoryRecord(
        note=Note(id=draw(ids), text=draw(st.sampled_from(["x", "y", "", SECRET_TEXT])),
                  timestamp=draw(st.sampled_from([0.0, -0.0, 1.0, 2.5])),
                  metadata=draw(st.sampled_from([{}, {"n": 1}, {"n": 1.0}, {"n": True}, {"s": SECRET_NOTE_META}]))),
        vector=vector,
        embedding_id=None if vector is None else draw(st.sampled_from([None, "emb"])),
        namespace=ns,
        blob=draw(st.sampled_from([None, None, b"", b"\x00\xff", bytes(range(256)), SECRET_BLOB])),
    )


@dataclass
class ModelEvent:
    seq: int
    kind: str
    ns: tuple[str, ...]
    id: str | None
    key: str | None
    value: Any
    actor: str | None
    reason: str | None
    record: MemoryRecord | None = None

    def content(self) -> bytes:
        """The content this event's payload holds (text, note metadata and blob of a put, the value of
        a meta write) as bytes to look for; empty for the other kinds."""
        if self.record is not None:
            note = self.record.note
            return b"\n".join([note.text.encode(), json.dumps(note.metadata).encode(), self.record.blob or b""])
        return json.dumps(self.value).encode() if self.kind == "meta" else b""


@dataclass
class State:
    """The memory right after one event: per namespace, live records (put seq, record) and the
    metadata keys set (meta seq, value)."""

    records: dict[tuple[str, ...], dict[str, tuple[int, MemoryRecord]]] = field(default_factory=dict)
    meta: dict[tuple[str, ...], dict[str, tuple[int, Any]]] = field(default_factory=dict)

    def copy(self) -> State:
        return State({ns: dict(r) for ns, r in self.records.items()}, {ns: dict(m) for ns, m in self.meta.items()})


class Model:
    def __init__(self) -> None:
        self.events: list[ModelEvent] = []
        self.states: list[State] = [State()]
        self.erasures: dict[tuple[tuple[str, ...], str], list[int]] = {}
        self.key_erasures: dict[tuple[tuple[str, ...], str], list[int]] = {}

    @property
    def head(self) -> int:
        return len(self.events)

    def now(self) -> State:
        return self.states[-1]

    def append(self, event: ModelEvent, state: State) -> None:
        self.events.append(event)
        self.states.append(state)

    def erased(self, ns: tuple[str, ...], rid: str, put_seq: int) -> bool:
        return any(seq > put_seq for seq in self.erasures.get((ns, rid), []))

    def key_erased(self, ns: tuple[str, ...], key: str, meta_seq: int) -> bool:
        """Whether the value metadata key ``key`` got at event ``meta_seq`` was erased later (at any
        point: erased content is never visible, not even as of a point before its erasure)."""
        return any(seq > meta_seq for seq in self.key_erasures.get((ns, key), []))

    def event_erased(self, e: ModelEvent) -> bool:
        """Whether ``e`` is a put or meta event whose content was erased after it."""
        if e.kind == "put":
            assert e.id is not None
            return self.erased(e.ns, e.id, e.seq)
        if e.kind == "meta":
            assert e.key is not None
            return self.key_erased(e.ns, e.key, e.seq)
        return False

    def visible(self, seq: int, ns: tuple[str, ...]) -> dict[str, MemoryRecord]:
        live = self.states[seq].records.get(ns, {})
        return {rid: rec for rid, (ps, rec) in live.items() if not self.erased(ns, rid, ps)}

    def ordered(self, seq: int, ns: tuple[str, ...]) -> list[MemoryRecord]:
        """The records visible right after ``seq`` in scan order: (timestamp, put seq)."""
        live = self.states[seq].records.get(ns, {})
        return sorted(self.visible(seq, ns).values(), key=lambda r: (r.note.timestamp, live[r.id][0]))

    def visible_meta(self, seq: int, ns: tuple[str, ...]) -> dict[str, Any]:
        live = self.states[seq].meta.get(ns, {})
        return {key: value for key, (ms, value) in live.items() if not self.key_erased(ns, key, ms)}

    def held_keys(self, ns: tuple[str, ...]) -> list[str]:
        """Metadata keys the namespace ever held: written, or erased (an erasure is on record)."""
        return list(dict.fromkeys(e.key for e in self.events if e.ns == ns and e.key is not None))

    def key_state(self, ns: tuple[str, ...], key: str) -> str:
        """``key`` of ``ns`` as an erasure finds it: set (a value not erased), erased before (its last
        event is an erasure) or never set."""
        last = [e.kind for e in self.events if e.ns == ns and e.key == key][-1:]
        return {"meta": "set", "erase": "erased before"}.get(last[0], "") if last else "never set"

    def with_content(self, ns: tuple[str, ...]) -> tuple[list[str], list[str]]:
        """Record ids and metadata keys of ``ns`` with a put (meta) event not erased yet, in key
        order: what ``erase_namespace`` erases."""
        rids = {e.id for e in self.events if e.kind == "put" and e.ns == ns and not self.event_erased(e)}
        keys = {e.key for e in self.events if e.kind == "meta" and e.ns == ns and not self.event_erased(e)}
        return sorted(map(str, rids), key=name_key), sorted(map(str, keys), key=name_key)

    def holds(self, secret: bytes) -> bool:
        """Whether some event not erased holds ``secret`` in its content."""
        return any(secret in e.content() for e in self.events if not self.event_erased(e))

    def erase(self, ns: tuple[str, ...], rid: str | None, key: str | None, actor: str | None, reason: str) -> None:
        """The receipt of erasing record ``rid`` (which ends it if live) or metadata key ``key``."""
        seq = self.head + 1
        state = self.now().copy()
        if rid is not None:
            state.records.get(ns, {}).pop(rid, None)
            self.erasures.setdefault((ns, rid), []).append(seq)
        if key is not None:
            state.meta.get(ns, {}).pop(key, None)
            self.key_erasures.setdefault((ns, key), []).append(seq)
        self.append(ModelEvent(seq, "erase", ns, rid, key, None, actor, reason), state)

    def history(self, ns: tuple[str, ...], rid: str) -> list[int]:
        out = []
        for e in self.events:
            if e.ns != ns:
                continue
            touched = e.id == rid if e.kind in ("put", "delete", "erase") else (
                e.kind == "clear" and rid in self.states[e.seq - 1].records.get(ns, {})
            )
            if touched:
                out.append(e.seq)
        return out


class TimeTravel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="coniti-timetravel-")
        self.store = LogBackend(f"{self.dir}/store", actor="default")
        self.model = Model()
        self.erased_since_compact = False  # compact only when an erasure came since the last one

    def stamp(self, given: tuple[str | None, str | None] | None) -> tuple[str | None, str | None]:
        return ("default", None) if given is None else given

    def run(self, given: tuple[str | None, str | None] | None, call: Any) -> Any:
        if given is None:
            return call()
        with self.store.audit(actor=given[0], reason=given[1]):
            return call()

    @initialize(batch=namespaces.flatmap(lambda ns: st.lists(records(ns), min_size=1, max_size=4,
                                                           unique_by=lambda r: r.id)))
    def fill(self, batch: list[MemoryRecord]) -> None:
        self.put(batch, None)

    @initialize(writes=st.lists(st.tuples(namespaces, st.sampled_from(KEYS), json_values), max_size=3))
    def fill_meta(self, writes: list[tuple[tuple[str, ...], str, Any]]) -> None:
        """A few metadata writes from the start (so that erasures of keys find values to erase)."""
        for ns, key, value in writes:
            self.write_meta(ns, key, value, None)

    @rule(batch=namespaces.flatmap(lambda ns: st.lists(records(ns), min_size=1, max_size=3,
                                                     unique_by=lambda r: r.id)), given=stamps)
    def put(self, batch: list[MemoryRecord], given: tuple[str | None, str | None] | None) -> None:
        ns = batch[0].namespace
        live = self.model.now().records.get(ns, {})
        if any(r.id in live for r in batch):
            return
        self.run(given, lambda: self.store.put(PutRequest(records=batch)))
        actor, reason = self.stamp(given)
        for r in batch:
            state = self.model.now().copy()
            seq = self.model.head + 1
            state.records.setdefault(ns, {})[r.id] = (seq, r)
            self.model.append(ModelEvent(seq, "put", ns, r.id, None, None, actor, reason, r), state)

    @rule(ns=namespaces, rids=st.lists(ids, max_size=3, unique=True), given=stamps)
    def delete(self, ns: tuple[str, ...], rids: list[str], given: tuple[str | None, str | None] | None) -> None:
        self.run(given, lambda: self.store.delete(DeleteRequest(ids=rids, namespace=ns)))
        actor, reason = self.stamp(given)
        for rid in rids:
            if rid in self.model.now().records.get(ns, {}):
                state = self.model.now().copy()
                del state.records[ns][rid]
                self.model.append(ModelEvent(self.model.head + 1, "delete", ns, rid, None, None, actor, reason), state)

    @rule(data=st.data(), value=json_values, given=stamps)
    def set_meta(self, data: st.DataObject, value: Any, given: tuple[str | None, str | None] | None) -> None:
        """A metadata write, as often to a key written before as to any (so that keys come to hold
        several values, each of which an erasure must remove)."""
        written = list(dict.fromkeys((e.ns, str(e.key)) for e in self.model.events if e.kind == "meta"))
        ns, key = data.draw(self.often(written, st.tuples(namespaces, st.sampled_from(KEYS))))
        self.write_meta(ns, key, value, given)

    def write_meta(self, ns: tuple[str, ...], key: str, value: Any, given: tuple[str | None, str | None] | None) -> None:
        self.run(given, lambda: self.store.set_meta(MetaSetRequest(key=key, value=value, namespace=ns)))
        actor, reason = self.stamp(given)
        state = self.model.now().copy()
        seq = self.model.head + 1
        state.meta.setdefault(ns, {})[key] = (seq, value)
        self.model.append(ModelEvent(seq, "meta", ns, None, key, value, actor, reason), state)

    @rule(ns=namespaces, given=stamps)
    def clear(self, ns: tuple[str, ...], given: tuple[str | None, str | None] | None) -> None:
        self.run(given, lambda: self.store.clear(ClearRequest(namespace=ns)))
        actor, reason = self.stamp(given)
        state = self.model.now().copy()
        state.records[ns] = {}
        self.model.append(ModelEvent(self.model.head + 1, "clear", ns, None, None, None, actor, reason), state)

    # -- erasure (records, metadata keys, whole namespaces) and compaction ----------------------

    @rule(ns=erase_namespaces, rids=st.lists(ids, min_size=1, max_size=2, unique=True), actor=st.sampled_from(ACTORS))
    def erase(self, ns: tuple[str, ...], rids: list[str], actor: str | None) -> None:
        with self.store.audit(actor=actor):
            result = self.store.erase(rids, namespace=ns, reason="privacy")
        held = [rid for rid in rids if any(
            e.kind == "put" and e.ns == ns and e.id == rid for e in self.model.events)]
        assert (result.erased, result.missing) == (held, [r for r in rids if r not in held])
        assert (result.erased_keys, result.missing_keys) == ([], [])
        self.follow(ns, result, actor, "privacy")

    def follow(self, ns: tuple[str, ...], result: EraseResult, actor: str | None, reason: str) -> None:
        """Apply an erasure's ``result`` to the model: one receipt per erased record, then per erased
        key, numbered from the old head on; then check the reads (:meth:`check_erased`)."""
        first = self.model.head + 1
        for rid in result.erased:
            self.model.erase(ns, rid, None, actor, reason)
        for key in result.erased_keys:
            self.model.erase(ns, None, key, actor, reason)
        assert result.receipts == list(range(first, self.model.head + 1))
        self.check_erased(ns, first)

    def often(self, wanted: list[Any], others: st.SearchStrategy[Any]) -> Any:
        """A strategy drawing from ``wanted`` (when there is any) as often as from ``others``, so that
        the erasure rules find something to erase within a short run."""
        return st.one_of(st.sampled_from(wanted), others) if wanted else others

    @rule(data=st.data(), actor=st.sampled_from(ACTORS))
    def erase_meta(self, data: st.DataObject, actor: str | None) -> None:
        """erase_meta of keys set, never set and erased before (a key held only by an earlier
        erasure gets a second receipt): one receipt per key the namespace ever held, in the order
        asked; the others are missing."""
        ns = data.draw(self.often([n for n in NAMESPACES if self.model.held_keys(n)], erase_namespaces))
        names = self.often(self.model.held_keys(ns), st.sampled_from([*KEYS, "never-set"]))
        keys = data.draw(st.lists(names, min_size=1, max_size=2, unique=True))
        with self.store.audit(actor=actor):
            result = self.store.erase_meta(keys, namespace=ns, reason="privacy")
        held = [key for key in keys if key in self.model.held_keys(ns)]
        for key in keys:
            event("erase_meta: " + self.model.key_state(ns, key))
        assert (result.erased_keys, result.missing_keys) == (held, [k for k in keys if k not in held])
        assert (result.erased, result.missing) == ([], [])
        self.follow(ns, result, actor, "privacy")

    @rule(data=st.data(), actor=st.sampled_from(ACTORS))
    def erase_namespace(self, data: st.DataObject, actor: str | None) -> None:
        """erase_namespace of a namespace with records and metadata, one with nothing left to erase,
        or one never used: one receipt per record id, then per key, that still held content (in key
        order), none for the rest; afterwards the namespace reads as empty at every point."""
        ns = data.draw(self.often([n for n in NAMESPACES if any(self.model.with_content(n))], erase_namespaces))
        rids, keys = self.model.with_content(ns)
        used = any(e.ns == ns for e in self.model.events)
        event("erase_namespace: " + ("records and metadata" if rids and keys else "records only" if rids
                                     else "metadata only" if keys else "nothing left" if used else "never used"))
        with self.store.audit(actor=actor):
            result = self.store.erase_namespace(ns, reason="tenant left")
        assert (result.erased, result.erased_keys, result.missing, result.missing_keys) == (rids, keys, [], [])
        self.follow(ns, result, actor, "tenant left")
        for seq in range(self.model.head + 1):
            view = self.store.at(seq)
            assert view.count(CountRequest(namespace=ns)).count == 0, seq
            assert [view.get_meta(MetaGetRequest(key=k, namespace=ns)).value for k in KEYS] == [None] * len(KEYS)

    @rule()
    def compact(self) -> None:
        """After compact() the store's files hold no byte of content that only erased events held,
        and still hold the content of every event not erased. (Skipped when no erasure came since the
        last compaction: it would find what that one found.)"""
        if not self.erased_since_compact:
            return
        self.store.compact()
        self.erased_since_compact = False
        files = b"".join(f.read_bytes() for f in sorted(Path(self.store.path).rglob("*")) if f.is_file())
        for secret in SECRETS:
            assert (secret in files) == self.model.holds(secret), secret

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = LogBackend(f"{self.dir}/store", actor="default")

    # -- checks ----------------------------------------------------------------------------------

    def expected_record(self, e: ModelEvent) -> Exact | None:
        if e.record is None or self.model.event_erased(e):
            return None
        return exact(e.record)

    @invariant()
    def audit_trail_equals_the_model(self) -> None:
        got = list(self.store.events())
        assert len(got) == self.model.head == self.store.head
        for g, m in zip(got, self.model.events, strict=True):
            erased = self.model.event_erased(m)
            assert (g.seq, g.kind, g.namespace, g.id, g.key, g.actor, g.reason, g.erased) == (
                m.seq, m.kind, m.ns, m.id, m.key, m.actor, m.reason, erased
            )
            assert g.value == (None if erased else m.value)
            assert (None if g.record is None else exact(g.record)) == self.expected_record(m)

    @rule(data=st.data(), ns=erase_namespaces)
    def current_reads_equal_the_model(self, data: st.DataObject, ns: tuple[str, ...]) -> None:
        self.check_reads(self.store, ns, self.model.head, limit=data.draw(st.integers(1, 3)))

    @rule(ns=namespaces, rid=ids)
    def history_equals_the_model(self, ns: tuple[str, ...], rid: str) -> None:
        assert [e.seq for e in self.store.history(rid, ns)] == self.model.history(ns, rid)

    @precondition(lambda self: self.model.head > 0)
    @rule(data=st.data(), ns=namespaces)
    def view_equals_the_model(self, data: st.DataObject, ns: tuple[str, ...]) -> None:
        seq = data.draw(st.integers(0, self.model.head))
        self.check_reads(self.store.at(seq), ns, seq, limit=data.draw(st.integers(1, 3)))

    def check_erased(self, ns: tuple[str, ...], first: int) -> None:
        """After an erasure whose receipts start at ``first``: the namespace reads like the model now
        (the store's current reads) and in the view of every point where the erased content was
        visible (right after each put or meta event it erased), and of the point just before the
        receipts (other points are drawn by :meth:`view_equals_the_model`); each erased record's
        history ends with its receipt, as the model's does."""
        self.erased_since_compact = True
        receipts = self.model.events[first - 1:]
        rids = {e.id for e in receipts if e.id is not None}
        keys = {e.key for e in receipts if e.key is not None}
        points = {first - 1, self.model.head} | {
            e.seq for e in self.model.events[: first - 1]
            if e.ns == ns and (e.kind == "put" and e.id in rids or e.kind == "meta" and e.key in keys)
        }
        self.check_reads(self.store, ns, self.model.head, limit=2)
        for seq in sorted(points):
            self.check_reads(self.store.at(seq), ns, seq, limit=2)
        for rid in rids:
            self.history_equals_the_model(ns, rid)

    def check_reads(self, reader: MemoryBackend, ns: tuple[str, ...], seq: int, *, limit: int) -> None:
        """get / count / paged scan / get_meta of ``ns`` through ``reader`` (the store, or a view of
        ``seq``) equal the model's memory right after event ``seq``."""
        want = self.model.visible(seq, ns)
        got = reader.get(GetRequest(ids=IDS, namespace=ns))
        assert [exact(r) for r in got.records] == [exact(want[i]) for i in IDS if i in want]
        assert got.missing == [i for i in IDS if i not in want]
        assert reader.count(CountRequest(namespace=ns)).count == len(want)
        pages: list[MemoryRecord] = []
        cursor = None
        while True:
            page = reader.scan(ScanRequest(namespace=ns, limit=limit, cursor=cursor))
            pages.extend(page.records)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert [exact(r) for r in pages] == [exact(r) for r in self.model.ordered(seq, ns)]
        meta = self.model.visible_meta(seq, ns)
        for key in KEYS:
            assert reader.get_meta(MetaGetRequest(key=key, namespace=ns)).value == meta.get(key)

    @precondition(lambda self: self.model.head > 0)
    @rule(data=st.data(), ns=namespaces)
    def diff_equals_the_model(self, data: st.DataObject, ns: tuple[str, ...]) -> None:
        a = data.draw(st.integers(0, self.model.head))
        b = data.draw(st.integers(0, self.model.head))
        va, vb = self.model.visible(a, ns), self.model.visible(b, ns)
        d = self.store.diff(a, b, namespace=ns)
        assert d.added == sorted(set(vb) - set(va))
        assert d.removed == sorted(set(va) - set(vb))
        assert d.changed == sorted(i for i in set(va) & set(vb) if exact(va[i]) != exact(vb[i]))

    def teardown(self) -> None:
        try:
            report = self.store.verify()
            assert list(report.problems) == [] and report.events_checked == self.model.head
            self.store.export_log(f"{self.dir}/log.jsonl")
            with LogBackend.import_log(f"{self.dir}/log.jsonl", f"{self.dir}/copy") as copy:
                assert copy.head_hash == self.store.head_hash and copy.verify().ok
                assert [(e.erased, e.value, e.record and exact(e.record)) for e in copy.events()] == [
                    (e.erased, e.value, e.record and exact(e.record)) for e in self.store.events()
                ]
                for seq in {0, self.model.head // 2, self.model.head}:
                    for ns in NAMESPACES:
                        view, copied = self.store.at(seq), copy.at(seq)
                        assert [exact(r) for r in copied.iter_all(namespace=ns)] == [
                            exact(r) for r in view.iter_all(namespace=ns)
                        ]
                        for key in KEYS:
                            request = MetaGetRequest(key=key, namespace=ns)
                            assert copied.get_meta(request).value == view.get_meta(request).value
            self.store.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


TimeTravel.TestCase.settings = settings(
    max_examples=20,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestTimeTravel = TimeTravel.TestCase

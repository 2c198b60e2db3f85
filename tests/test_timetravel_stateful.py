"""Model-based test of time travel and audit: hypothesis drives puts, deletes, metadata writes,
clears and erasures (inside random audit blocks) against a LogBackend and a plain model that keeps
every event and the memory after each one. After the steps, the audit trail, every record's history,
views of sampled points (get / paged scan / count / get_meta) and diffs between sampled points must
equal the model's; verify() is clean, and so is an export -> import copy with the same answers.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any

import hypothesis.strategies as st
import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from coniti.actor import Note
from coniti.impl.log import LogBackend
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
IDS = ["a", "b", "c", "d", "e" * 420]
KEYS = ["k", "embedding_id"]
ACTORS = [None, "alice", "bob"]

namespaces = st.sampled_from(NAMESPACES)
ids = st.sampled_from(IDS)
stamps = st.one_of(st.none(), st.tuples(st.sampled_from(ACTORS), st.sampled_from([None, "why", "fix"])))
json_values = st.one_of(st.none(), st.integers(-5, 5), st.booleans(), st.text(max_size=4),
                        st.lists(st.integers(0, 3), max_size=2))


@st.composite
def records(draw: Any, ns: tuple[str, ...]) -> MemoryRecord:
    """A record with a float16/32/64 vector or none (event version 3), and sometimes a blob."""
    dtype = draw(st.sampled_from(["float16", "float32", "float64", None]))
    vector = None
    if dtype is not None:
        vector = np.array(draw(st.lists(st.sampled_from([0.5, -1.0, 2.0]), min_size=1, max_size=3)), dtype)
    return MemoryRecord(
        note=Note(id=draw(ids), text=draw(st.sampled_from(["x", "y", ""])),
                  timestamp=draw(st.sampled_from([0.0, -0.0, 1.0, 2.5])),
                  metadata=draw(st.sampled_from([{}, {"n": 1}, {"n": 1.0}, {"n": True}]))),
        vector=vector,
        embedding_id=None if vector is None else draw(st.sampled_from([None, "emb"])),
        namespace=ns,
        blob=draw(st.sampled_from([None, None, b"", b"\x00\xff", bytes(range(256))])),
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


@dataclass
class State:
    """The memory right after one event: per namespace, live records (put seq, record) and meta."""

    records: dict[tuple[str, ...], dict[str, tuple[int, MemoryRecord]]] = field(default_factory=dict)
    meta: dict[tuple[str, ...], dict[str, Any]] = field(default_factory=dict)

    def copy(self) -> State:
        return State({ns: dict(r) for ns, r in self.records.items()}, {ns: dict(m) for ns, m in self.meta.items()})


class Model:
    def __init__(self) -> None:
        self.events: list[ModelEvent] = []
        self.states: list[State] = [State()]
        self.erasures: dict[tuple[tuple[str, ...], str], list[int]] = {}

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

    def visible(self, seq: int, ns: tuple[str, ...]) -> dict[str, MemoryRecord]:
        live = self.states[seq].records.get(ns, {})
        return {rid: rec for rid, (ps, rec) in live.items() if not self.erased(ns, rid, ps)}

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

    @rule(ns=namespaces, key=st.sampled_from(KEYS), value=json_values, given=stamps)
    def set_meta(self, ns: tuple[str, ...], key: str, value: Any, given: tuple[str | None, str | None] | None) -> None:
        self.run(given, lambda: self.store.set_meta(MetaSetRequest(key=key, value=value, namespace=ns)))
        actor, reason = self.stamp(given)
        state = self.model.now().copy()
        state.meta.setdefault(ns, {})[key] = value
        self.model.append(ModelEvent(self.model.head + 1, "meta", ns, None, key, value, actor, reason), state)

    @rule(ns=namespaces, given=stamps)
    def clear(self, ns: tuple[str, ...], given: tuple[str | None, str | None] | None) -> None:
        self.run(given, lambda: self.store.clear(ClearRequest(namespace=ns)))
        actor, reason = self.stamp(given)
        state = self.model.now().copy()
        state.records[ns] = {}
        self.model.append(ModelEvent(self.model.head + 1, "clear", ns, None, None, None, actor, reason), state)

    @rule(ns=namespaces, rids=st.lists(ids, min_size=1, max_size=2, unique=True), actor=st.sampled_from(ACTORS))
    def erase(self, ns: tuple[str, ...], rids: list[str], actor: str | None) -> None:
        with self.store.audit(actor=actor):
            result = self.store.erase(rids, namespace=ns, reason="privacy")
        held = [rid for rid in rids if any(
            e.kind == "put" and e.ns == ns and e.id == rid for e in self.model.events)]
        assert (result.erased, result.missing) == (held, [r for r in rids if r not in held])
        for rid in held:
            seq = self.model.head + 1
            state = self.model.now().copy()
            state.records.get(ns, {}).pop(rid, None)
            self.model.append(ModelEvent(seq, "erase", ns, rid, None, None, actor, "privacy"), state)
            self.model.erasures.setdefault((ns, rid), []).append(seq)
        assert result.receipts == list(range(self.model.head - len(held) + 1, self.model.head + 1))

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = LogBackend(f"{self.dir}/store", actor="default")

    # -- checks ----------------------------------------------------------------------------------

    def expected_record(self, e: ModelEvent) -> Exact | None:
        if e.record is None or self.model.erased(e.ns, e.record.id, e.seq):
            return None
        return exact(e.record)

    @invariant()
    def audit_trail_equals_the_model(self) -> None:
        got = list(self.store.events())
        assert len(got) == self.model.head == self.store.head
        for g, m in zip(got, self.model.events, strict=True):
            assert (g.seq, g.kind, g.namespace, g.id, g.key, g.value, g.actor, g.reason) == (
                m.seq, m.kind, m.ns, m.id, m.key, m.value, m.actor, m.reason
            )
            want = self.expected_record(m)
            assert (None if g.record is None else exact(g.record)) == want
            assert g.erased == (m.kind == "put" and want is None)

    @rule(ns=namespaces, rid=ids)
    def history_equals_the_model(self, ns: tuple[str, ...], rid: str) -> None:
        assert [e.seq for e in self.store.history(rid, ns)] == self.model.history(ns, rid)

    @precondition(lambda self: self.model.head > 0)
    @rule(data=st.data(), ns=namespaces)
    def view_equals_the_model(self, data: st.DataObject, ns: tuple[str, ...]) -> None:
        seq = data.draw(st.integers(0, self.model.head))
        view = self.store.at(seq)
        want = self.model.visible(seq, ns)
        ordered = sorted(want.values(), key=lambda r: (r.note.timestamp, self.model.states[seq].records[ns][r.id][0]))
        self.check_view(view, ns, want, ordered, self.model.states[seq].meta.get(ns, {}), data)

    def check_view(self, view: MemoryBackend, ns: tuple[str, ...], want: dict[str, MemoryRecord],
                   ordered: list[MemoryRecord], meta: dict[str, Any], data: st.DataObject) -> None:
        got = view.get(GetRequest(ids=IDS, namespace=ns))
        assert [exact(r) for r in got.records] == [exact(want[i]) for i in IDS if i in want]
        assert view.count(CountRequest(namespace=ns)).count == len(want)
        limit = data.draw(st.integers(1, 3))
        pages: list[MemoryRecord] = []
        cursor = None
        while True:
            page = view.scan(ScanRequest(namespace=ns, limit=limit, cursor=cursor))
            pages.extend(page.records)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert [exact(r) for r in pages] == [exact(r) for r in ordered]
        for key in KEYS:
            assert view.get_meta(MetaGetRequest(key=key, namespace=ns)).value == meta.get(key)

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
                for seq in {0, self.model.head // 2, self.model.head}:
                    for ns in NAMESPACES:
                        assert [exact(r) for r in copy.at(seq).iter_all(namespace=ns)] == [
                            exact(r) for r in self.store.at(seq).iter_all(namespace=ns)
                        ]
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

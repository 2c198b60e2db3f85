"""Model-based test: LogBackend and InMemoryBackend driven side by side by hypothesis.

Random put / delete / set_meta / clear / write (upsert, patch, delete ops with expectations and op
ids, replayed and conflicting) / get / count / paged scans (cursors kept open across other
steps and across reopen) / close-and-reopen / second handle / rebuild steps run on both backends;
every answer (or error type) must be the same, and after every step the whole memory must be equal.
A plain model keeps a snapshot of the memory after every event (sequence number) so that ``at(seq)`` views
of earlier points can be compared with it. ``verify()`` must be clean at teardown.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    precondition,
    rule,
)

from coniti.actor import Note, TimeRange
from coniti.errors import ConitiError, ReadOnlyError
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.memory import (
    ClearRequest,
    CountRequest,
    DeleteOp,
    DeleteRequest,
    GetRequest,
    MemoryBackend,
    MemoryRecord,
    MetaGetRequest,
    MetaSetRequest,
    PatchOp,
    PutRequest,
    ScanRequest,
    UpsertOp,
    WriteRequest,
    WriteResult,
    patched,
)

NAMESPACES: list[tuple[str, ...]] = [(), ("a",), ("a", "b"), ("l" * 600,)]
IDS = [f"n{i}" for i in range(10)] + ["i" * 520, "i" * 520 + "j"]
META_KEYS = ["k", "embedding_id", "m" * 600]
TIMES = [0.0, 1.0, 1.5, 2.0, 3.0, -4.25, 1e9]

namespaces = st.sampled_from([(), (), (), *NAMESPACES])
ids = st.sampled_from(IDS)
times = st.one_of(st.sampled_from(TIMES), st.floats(-10, 10, allow_nan=False, width=32))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


@st.composite
def records(draw: Any, ns: tuple[str, ...]) -> MemoryRecord:
    """A record with a float16/32/64 vector or (now and then) none, and sometimes a blob."""
    dtype = draw(st.sampled_from(["float16", "float32", "float64", "float32", None]))
    dim = draw(st.integers(1, 4))
    vec = None
    if dtype is not None:
        vec = np.array(draw(st.lists(st.floats(-2, 2, width=16), min_size=dim, max_size=dim)), dtype=dtype)
    return MemoryRecord(
        note=Note(id=draw(ids), text=draw(st.text(max_size=12)), timestamp=draw(times),
                  metadata=draw(st.dictionaries(st.sampled_from(["x", "y"]), json_values, max_size=2))),
        vector=vec,
        embedding_id=None if vec is None else draw(st.none() | st.just("emb-1")),
        namespace=ns,
        blob=draw(st.none() | st.binary(max_size=24)),
    )


@st.composite
def put_batches(draw: Any) -> list[MemoryRecord]:
    ns = draw(namespaces)
    if draw(st.integers(0, 9)) == 0:  # now and then a batch that repeats an id (refused whole)
        return draw(st.lists(records(ns), min_size=2, max_size=4))
    return draw(st.lists(records(ns), min_size=1, max_size=6, unique_by=lambda r: r.id))


@st.composite
def time_ranges(draw: Any) -> TimeRange | None:
    if draw(st.booleans()):
        return None
    a = draw(st.none() | times)
    b = draw(st.none() | times)
    if a is not None and b is not None and a > b:
        a, b = b, a
    return TimeRange(start=a, end=b)


@dataclass
class Space:
    """The model of one namespace: records in write order (with their order key) and metadata."""

    records: list[tuple[int, MemoryRecord]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def copy(self) -> Space:
        return Space(list(self.records), dict(self.meta))

    def ordered(self, time_range: TimeRange | None = None) -> list[MemoryRecord]:
        rows = sorted(self.records, key=lambda p: (p[1].note.timestamp, p[0]))
        return [r for _, r in rows if time_range is None or time_range.contains(r.note.timestamp)]

    def by_id(self, rid: str) -> MemoryRecord | None:
        return next((r for _, r in self.records if r.id == rid), None)


class Model:
    """The memory as a plain value, and a snapshot of it after every event a log would append
    (one per put record, per deleted live id, per meta write, per clear), keyed by sequence number."""

    def __init__(self) -> None:
        self.spaces: dict[tuple[str, ...], Space] = {}
        self.order = 0
        self.events = 0
        self.history: dict[int, dict[tuple[str, ...], Space]] = {0: {}}

    def space(self, ns: tuple[str, ...]) -> Space:
        return self.spaces.setdefault(ns, Space())

    def _event(self) -> None:
        self.events += 1
        self.history[self.events] = {ns: s.copy() for ns, s in self.spaces.items()}

    def put(self, batch: list[MemoryRecord]) -> None:
        for r in batch:
            self.order += 1
            self.space(r.namespace).records.append((self.order, r.with_version(self.events + 1)))
            self._event()

    def delete(self, ns: tuple[str, ...], rids: list[str]) -> None:
        space = self.space(ns)
        for rid in dict.fromkeys(rids):
            if space.by_id(rid) is not None:
                space.records = [p for p in space.records if p[1].id != rid]
                self._event()

    def set_meta(self, ns: tuple[str, ...], key: str, value: Any) -> None:
        self.space(ns).meta[key] = value
        self._event()

    def clear(self, ns: tuple[str, ...]) -> None:
        self.space(ns).records = []
        self._event()

    def write(self, request: WriteRequest, result: WriteResult) -> None:
        """Apply what ``result`` says the request did, one event per change, then the op receipt."""
        if result.replayed:
            return
        space = self.space(request.namespace)
        for i, op in enumerate(request.ops):
            if isinstance(op, DeleteOp):
                if op.id in result.deleted:
                    space.records = [p for p in space.records if p[1].id != op.id]
                    self._event()
                continue
            rid = op.record.id if isinstance(op, UpsertOp) else op.id
            if rid not in result.versions or rid in result.unchanged:
                continue
            if isinstance(op, UpsertOp):
                new = op.record
            else:
                current = space.by_id(rid)
                assert current is not None
                new = patched(current, op, i)
            space.records = [p for p in space.records if p[1].id != rid]
            self.order += 1
            space.records.append((self.order, new.with_version(self.events + 1)))
            self._event()
        if request.op_id is not None:
            self._event()


def answer(call: Any) -> Any:
    """The result of ``call()`` or the type of the coniti error it raised."""
    try:
        return call()
    except ConitiError as exc:
        return type(exc)


class LogVersusMemory(RuleBasedStateMachine):
    scans = Bundle("scans")

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="coniti-stateful-")
        self.path = f"{self.dir}/store"
        self.log: Any = LogBackend(self.path)
        self.mem = InMemoryBackend()
        self.model = Model()

    @initialize(batches=st.lists(put_batches(), min_size=1, max_size=5))
    def fill(self, batches: list[list[MemoryRecord]]) -> None:
        """Start from a few puts (so that scans have pages to turn and views have history)."""
        assert self.log.head == 0
        for batch in batches:
            self.put(batch)

    def both(self, method: str, request: Any) -> Any:
        got = answer(lambda: getattr(self.log, method)(request))
        want = answer(lambda: getattr(self.mem, method)(request))
        assert got == want, f"{method}({request!r}): log gave {got!r}, memory gave {want!r}"
        return want

    # -- writes ---------------------------------------------------------------------------

    @rule(batch=put_batches())
    def put(self, batch: list[MemoryRecord]) -> None:
        result = self.both("put", PutRequest(records=batch))
        if not isinstance(result, type):
            self.model.put(batch)

    @rule(record=namespaces.flatmap(records))
    def put_one(self, record: MemoryRecord) -> None:
        """A single-record put (weighs puts up against the many other rules)."""
        self.put([record])

    @rule(ns=namespaces, rids=st.lists(ids, max_size=3))
    def delete(self, ns: tuple[str, ...], rids: list[str]) -> None:
        self.both("delete", DeleteRequest(ids=rids, namespace=ns))
        self.model.delete(ns, rids)

    @rule(ns=namespaces, key=st.sampled_from(META_KEYS), value=json_values)
    def set_meta(self, ns: tuple[str, ...], key: str, value: Any) -> None:
        self.both("set_meta", MetaSetRequest(key=key, value=value, namespace=ns))
        self.model.set_meta(ns, key, value)

    @rule(ns=namespaces)
    def clear(self, ns: tuple[str, ...]) -> None:
        self.both("clear", ClearRequest(namespace=ns))
        self.model.clear(ns)

    @rule(data=st.data(), ns=namespaces)
    def write(self, data: st.DataObject, ns: tuple[str, ...]) -> None:
        """One write request of upserts, patches and deletes with (sometimes stale) expectations and
        an op id from a small set, so that replays and op-id conflicts happen: the same result (or
        error) on both backends, versions included."""
        rids = data.draw(st.lists(ids, min_size=1, max_size=3, unique=True))
        ops: list[Any] = []
        for rid in rids:
            kind = data.draw(st.sampled_from(["upsert", "upsert", "patch", "delete"]))
            if kind == "upsert":
                r = data.draw(records(ns))
                ops.append(UpsertOp(record=r.model_copy(update={"note": r.note.model_copy(update={"id": rid})})))
            elif kind == "patch":
                current = self.mem.get(GetRequest(ids=[rid], namespace=ns)).records
                text = data.draw(st.none() | st.text(max_size=6))
                vector = None
                stored = current[0].vector if current else None
                if text is not None and stored is not None and current[0].note.text != text:
                    vector = np.ones(stored.shape, dtype=stored.dtype)
                blob = data.draw(st.sampled_from([None, None, b"", b"patched\x00", "clear"]))
                ops.append(PatchOp(
                    id=rid, text=text, timestamp=data.draw(st.none() | times), vector=vector,
                    metadata_patch=data.draw(st.none() | st.dictionaries(st.sampled_from(["x", "y"]), st.none() | st.integers(0, 3), max_size=2)),
                    blob=None if blob == "clear" else blob, clear_blob=blob == "clear",
                ))
            else:
                ops.append(DeleteOp(id=rid))
        expect: dict[str, int | None] = {}
        if data.draw(st.booleans()):
            rid = data.draw(st.sampled_from(rids))
            current = self.mem.get(GetRequest(ids=[rid], namespace=ns)).records
            live = current[0].version if current else None
            expect[rid] = data.draw(st.sampled_from([live, None, 1]))
        request = WriteRequest(
            ops=ops, namespace=ns, expect=expect,
            op_id=data.draw(st.none() | st.sampled_from(["op-a", "op-b", "op-c"])),
            missing_ok=data.draw(st.booleans()),
        )
        result = self.both("write", request)
        if not isinstance(result, type):
            self.model.write(request, result)

    # -- reads ----------------------------------------------------------------------------

    @rule(ns=namespaces, rids=st.lists(ids, max_size=4))
    def get(self, ns: tuple[str, ...], rids: list[str]) -> None:
        self.both("get", GetRequest(ids=rids, namespace=ns))

    @rule(ns=namespaces, time_range=time_ranges())
    def count(self, ns: tuple[str, ...], time_range: TimeRange | None) -> None:
        self.both("count", CountRequest(namespace=ns, time_range=time_range))

    @rule(ns=namespaces, key=st.sampled_from(META_KEYS))
    def get_meta(self, ns: tuple[str, ...], key: str) -> None:
        self.both("get_meta", MetaGetRequest(key=key, namespace=ns))

    @rule(ns=namespaces, time_range=time_ranges(), limit=st.sampled_from([None, 1, 1, 2, 3]))
    def scan_all_pages(self, ns: tuple[str, ...], time_range: TimeRange | None, limit: int | None) -> None:
        """Walk every page on both backends: the same pages, and next_cursor None at the same end."""
        got_cursor: str | None = None
        want_cursor: str | None = None
        while True:
            got = self.log.scan(ScanRequest(namespace=ns, time_range=time_range, limit=limit, cursor=got_cursor))
            want = self.mem.scan(ScanRequest(namespace=ns, time_range=time_range, limit=limit, cursor=want_cursor))
            assert got.records == want.records
            assert (got.next_cursor is None) == (want.next_cursor is None)
            if want.next_cursor is None:
                return
            got_cursor, want_cursor = got.next_cursor, want.next_cursor

    @rule(target=scans, ns=namespaces, time_range=time_ranges(), limit=st.integers(1, 2))
    def open_scan(
        self, ns: tuple[str, ...], time_range: TimeRange | None, limit: int
    ) -> tuple[Any, ...]:
        """First page of a scan whose cursors stay open while other steps run."""
        got = self.log.scan(ScanRequest(namespace=ns, time_range=time_range, limit=limit))
        want = self.mem.scan(ScanRequest(namespace=ns, time_range=time_range, limit=limit))
        assert got.records == want.records
        assert (got.next_cursor is None) == (want.next_cursor is None)
        return (ns, time_range, limit, got.next_cursor, want.next_cursor)

    @rule(scan=consumes(scans), limit=st.integers(1, 3))
    def continue_scan(self, scan: tuple[Any, ...], limit: int) -> None:
        """A later page from an open scan (after writes, reopen ...) resumes the same way on both."""
        ns, time_range, _, got_cursor, want_cursor = scan
        if want_cursor is None:
            return
        got = self.log.scan(ScanRequest(namespace=ns, time_range=time_range, limit=limit, cursor=got_cursor))
        want = self.mem.scan(ScanRequest(namespace=ns, time_range=time_range, limit=limit, cursor=want_cursor))
        assert got.records == want.records
        assert (got.next_cursor is None) == (want.next_cursor is None)

    # -- the store itself -----------------------------------------------------------------

    @rule()
    def reopen(self) -> None:
        self.log.close()
        self.log = LogBackend(self.path)

    @rule(ns=namespaces)
    def second_handle(self, ns: tuple[str, ...]) -> None:
        """Another handle on the same path sees the same memory; closing it leaves ours working."""
        with LogBackend(self.path) as other:
            assert other.head == self.log.head
            assert [r.to_dict() for r in other.iter_all(namespace=ns)] == [
                r.to_dict() for r in self.mem.iter_all(namespace=ns)
            ]
        assert self.log.count(CountRequest(namespace=ns)).count == self.mem.count(
            CountRequest(namespace=ns)
        ).count

    @rule()
    def rebuild(self) -> None:
        """rebuild() recomputes the projections from the log: the answers do not change."""
        self.log.rebuild()

    @precondition(lambda self: self.model.events > 0)
    @rule(data=st.data())
    def time_travel(self, data: st.DataObject) -> None:
        """A view right after any earlier event (also one inside a multi-record call) answers
        get / paged scan / count / get_meta like the model did at that point."""
        seq = data.draw(st.integers(0, self.model.events))
        view = self.log.at(seq)
        assert view.seq == seq
        spaces = self.model.history[seq]
        for ns in NAMESPACES:
            space = spaces.get(ns, Space())
            self.check_view(view, ns, space, data)
        request = PutRequest(records=[MemoryRecord(note=Note(id="ro", text="", timestamp=0.0), vector=[1.0])])
        with pytest.raises(ReadOnlyError):
            view.put(request)

    def check_view(self, view: MemoryBackend, ns: tuple[str, ...], space: Space, data: st.DataObject) -> None:
        got = view.get(GetRequest(ids=IDS, namespace=ns))
        want = [r for rid in IDS if (r := space.by_id(rid)) is not None]
        assert got.records == want
        assert [r.version for r in got.records] == [r.version for r in want]
        assert got.missing == [rid for rid in IDS if space.by_id(rid) is None]
        time_range = data.draw(time_ranges())
        assert view.count(CountRequest(namespace=ns, time_range=time_range)).count == len(
            space.ordered(time_range)
        )
        limit = data.draw(st.integers(1, 3))
        pages: list[MemoryRecord] = []
        cursor: str | None = None
        while True:
            page = view.scan(ScanRequest(namespace=ns, time_range=time_range, limit=limit, cursor=cursor))
            pages.extend(page.records)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert pages == space.ordered(time_range)
        for key in META_KEYS:
            assert view.get_meta(MetaGetRequest(key=key, namespace=ns)).value == space.meta.get(key)

    # -- after every step -----------------------------------------------------------------

    @invariant()
    def same_memory(self) -> None:
        for ns in NAMESPACES:
            got = [(r.to_dict(), r.version) for r in self.log.iter_all(namespace=ns, page_size=7)]
            want = [(r.to_dict(), r.version) for r in self.mem.iter_all(namespace=ns, page_size=7)]
            assert got == want, f"namespace {ns!r} differs"

    @invariant()
    def head_counts_events(self) -> None:
        assert self.log.head == self.model.events

    def teardown(self) -> None:
        try:
            report = self.log.verify()
            assert list(report.problems) == []
            assert report.events_checked == report.head_seq == self.log.head == self.model.events
            self.log.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


LogVersusMemory.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestLogVersusMemory = LogVersusMemory.TestCase

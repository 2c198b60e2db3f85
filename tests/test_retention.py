"""Store-wide and per-kind retention of LogBackend (coniti/retention.py, coniti/impl/log_retention.py):
records written without an expiry get one, through the store's audited expiry; no_expiry per write;
the policy is kept in the store across reopen, export and import."""

from __future__ import annotations

import io
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from coniti import Container, Note, Scope
from coniti.conversation import Turn
from coniti.errors import ContractError
from coniti.impl.log import LogBackend
from coniti.memory import UpsertOp, WriteRequest
from coniti.retention import RETENTION_KEY, no_expiry

HOUR = timedelta(hours=1)


def expiry(c: Container[Any], id: str, namespace: tuple[str, ...] = ()) -> float | None:
    [record] = c.engine.get([id], namespace=namespace).records
    return record.expires_at


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store"


def test_a_write_without_expiry_expires_after_the_retention(path: Path) -> None:
    """ingest under retention=1h: expires_at is the time of the write plus one hour."""
    with Container(memory="log", path=path, retention=HOUR) as c:
        before = time.time()
        c.engine.ingest(Note(id="a", text="kept an hour", timestamp=1.0))
        after = time.time()
        got = expiry(c, "a")
    assert got is not None and before + 3600 <= got <= after + 3600


def test_an_expired_record_is_hidden_and_swept_with_an_audited_delete(path: Path) -> None:
    """Retention goes through the store's expiry: hidden from reads once due, then swept by
    a delete event stamped coniti-ttl / expired."""
    with Container(memory="log", path=path, retention=timedelta(milliseconds=200)) as c:
        c.engine.ingest_many([Note(id="a", text="short", timestamp=1.0), Note(id="b", text="also", timestamp=2.0)])
        time.sleep(0.3)
        assert c.engine.get(["a", "b"]).missing == ["a", "b"]
        assert c.memory.sweep().deleted == 2
        deletes = [e for e in c.memory.events() if e.kind == "delete"]
    assert {(e.id, e.actor, e.reason) for e in deletes} == {("a", "coniti-ttl", "expired"), ("b", "coniti-ttl", "expired")}


def test_an_explicit_expiry_is_kept(path: Path) -> None:
    """upsert(expires_at=...) keeps its own expiry under retention."""
    when = time.time() + 99
    with Container(memory="log", path=path, retention=HOUR) as c:
        c.engine.upsert(Note(id="a", text="x", timestamp=1.0), expires_at=when)
        assert expiry(c, "a") == pytest.approx(when)


def test_no_expiry_per_write(path: Path) -> None:
    """ingest(no_expiry=True), upsert(no_expiry=True) and a store put inside no_expiry() get no
    expiry; a plain write beside them does."""
    with Container(memory="log", path=path, retention=HOUR) as c:
        c.engine.ingest(Note(id="a", text="forever", timestamp=1.0), no_expiry=True)
        c.engine.upsert(Note(id="b", text="forever too", timestamp=1.0), no_expiry=True)
        with no_expiry():
            c.engine.ingest(Note(id="c", text="in the block", timestamp=1.0))
        c.engine.ingest(Note(id="d", text="an hour", timestamp=1.0))
        assert [expiry(c, i) for i in "abc"] == [None, None, None]
        assert expiry(c, "d") is not None


def test_no_expiry_and_expires_at_together_are_refused(path: Path) -> None:
    """upsert with both: ContractError naming them; nothing written."""
    with Container(memory="log", path=path, retention=HOUR) as c:
        head = c.memory.head
        with pytest.raises(ContractError, match="expires_at or no_expiry"):
            c.engine.upsert(Note(id="a", text="x", timestamp=1.0), expires_at=time.time() + 5, no_expiry=True)
        assert c.memory.head == head


def test_a_patch_keeps_the_records_expiry(path: Path) -> None:
    """update (a patch) does not renew nor add an expiry."""
    with Container(memory="log", path=path, retention=HOUR) as c:
        c.engine.ingest(Note(id="a", text="x", timestamp=1.0))
        c.engine.ingest(Note(id="b", text="y", timestamp=1.0), no_expiry=True)
        first = expiry(c, "a")
        time.sleep(0.01)
        c.engine.update("a", metadata_patch={"k": 1})
        c.engine.update("b", metadata_patch={"k": 1})
        assert expiry(c, "a") == first and expiry(c, "b") is None


def test_a_load_gets_the_retention(path: Path) -> None:
    """A memory-file load (put_batches) gives records without expiry the retention expiry."""
    out = io.StringIO()
    with Container(memory="log", path=path.with_name("plain")) as plain:
        plain.engine.ingest(Note(id="a", text="x", timestamp=1.0))
        plain.memory.dump(out)
    with Container(memory="log", path=path, retention=HOUR) as c:
        c.memory.load(io.StringIO(out.getvalue()))
        assert expiry(c, "a") is not None


def test_a_retried_write_with_an_op_id_replays_under_retention(path: Path) -> None:
    """The op id's digest is the request's as given: a retry replays instead of conflicting."""
    with Container(memory="log", path=path, retention=HOUR) as c:
        note = Note(id="a", text="x", timestamp=1.0)
        first = c.engine.upsert(note, op_id="op-1")
        time.sleep(0.01)
        again = c.engine.upsert(note, op_id="op-1")
        assert again.replayed and again.versions == first.versions


def test_the_retention_is_kept_in_the_store_across_reopen(path: Path) -> None:
    """Opened once with retention, reopened without: the store keeps it and applies it."""
    LogBackend(path, retention=timedelta(days=30)).close()
    with LogBackend(path) as store:
        assert store.retention.timedelta() == timedelta(days=30)
        with Container(memory=store) as c:
            c.engine.ingest(Note(id="a", text="x", timestamp=1.0))
            assert expiry(c, "a") is not None


def test_setting_the_retention_is_an_audited_meta_event_written_once(path: Path) -> None:
    """The policy is a meta event of the root namespace, reason 'retention'; reopening with the
    same policy writes nothing."""
    LogBackend(path, retention=HOUR, actor="ops").close()
    LogBackend(path, retention=HOUR).close()
    with LogBackend(path, read_only=True) as store:
        events = [(e.kind, e.namespace, e.key, e.actor, e.reason) for e in store.events()]
    assert events == [("meta", (), RETENTION_KEY, "ops", "retention")]


def test_retention_none_turns_it_off(path: Path) -> None:
    """Reopened with retention=None, writes get no expiry."""
    LogBackend(path, retention=HOUR).close()
    with Container(memory="log", path=path, retention=None) as c:
        c.engine.ingest(Note(id="a", text="x", timestamp=1.0))
        assert expiry(c, "a") is None and c.memory.retention.default is None


def test_export_and_import_keep_the_retention(path: Path) -> None:
    """The policy travels with the log."""
    out = io.StringIO()
    with LogBackend(path, retention=HOUR) as store:
        store.export_log(out)
    with LogBackend.import_log(io.StringIO(out.getvalue()), path.with_name("copy")) as copy:
        assert copy.retention.timedelta() == HOUR


def test_a_read_only_open_cannot_change_the_retention(path: Path) -> None:
    """retention= that differs on a read-only store: ContractError naming retention."""
    LogBackend(path, retention=HOUR).close()
    with pytest.raises(ContractError, match="^retention: this store is opened read-only"):
        LogBackend(path, read_only=True, retention=timedelta(days=1))
    with LogBackend(path, read_only=True, retention=HOUR) as store:  # the same: fine
        assert store.retention.timedelta() == HOUR


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"retention": timedelta(seconds=-1)}, "retention"),
        ({"retention": timedelta(0)}, "retention"),
        ({"retention": 3600}, "retention"),
        ({"kind_retention": {"message": timedelta(days=-1)}}, r"kind_retention\['message'\]"),
        ({"kind_retention": {"": HOUR}}, "kind_retention"),
        ({"kind_retention": [("message", HOUR)]}, "kind_retention"),
    ],
)
def test_bad_retention_is_refused_before_the_store_opens(path: Path, options: dict[str, Any], field: str) -> None:
    """A negative, zero or non-timedelta retention, a bad kind: one-line ContractError naming the
    argument, and no store is created."""
    with pytest.raises(ContractError, match=f"^{field}") as info:
        LogBackend(path, **options)
    assert "\n" not in str(info.value) and not path.exists()


def test_a_scoped_handle_passes_no_expiry(path: Path) -> None:
    """The scoped handle's writes follow the retention and its no_expiry flag."""
    with Container(memory="log", path=path, retention=HOUR) as c:
        h = c.scoped(Scope(user="alice"))
        h.ingest(Note(id="a", text="x", timestamp=1.0))
        h.ingest(Note(id="b", text="y", timestamp=1.0), no_expiry=True)
        assert [r.expires_at is None for r in h.get(["a", "b"]).records] == [False, True]


def test_a_plain_write_request_upsert_gets_the_retention(path: Path) -> None:
    """LogBackend.write with an upsert of a record without expiry: the retention applies."""
    with Container(memory="log", path=path, retention=HOUR) as c:
        c.engine.ingest(Note(id="a", text="x", timestamp=1.0), no_expiry=True)
        [record] = c.engine.get(["a"]).records
        c.memory.write(WriteRequest(ops=[UpsertOp(record=record.model_copy(update={
            "note": record.note.model_copy(update={"text": "x2"}), "version": None}))]))  # fmt: skip
        assert expiry(c, "a") is not None


def test_retention_per_kind(path: Path) -> None:
    """kind_retention overrides the default for its kind; None keeps that kind forever."""
    with Container(
        memory="log", path=path, retention=HOUR,
        kind_retention={"message": timedelta(minutes=1), "preference": None},
    ) as c:  # fmt: skip
        before = time.time()
        c.engine.ingest_many([
            Note.create("hi", kind="message"), Note.create("likes tea", kind="preference"),
            Note.create("plain"),
        ])  # fmt: skip
        records = {r.note.text: r for r in c.memory.iter_all()}
    assert before + 60 <= (records["hi"].expires_at or 0) <= time.time() + 60
    assert records["likes tea"].expires_at is None
    assert (records["plain"].expires_at or 0) >= before + 3600


def test_per_kind_retention_is_kept_in_the_store(path: Path) -> None:
    """kind_retention is recorded with the default and read back on reopen."""
    LogBackend(path, kind_retention={"message": timedelta(days=7), "preference": None}).close()
    with LogBackend(path) as store:
        assert store.retention.timedelta("message") == timedelta(days=7)
        assert store.retention.timedelta("preference") is None and store.retention.default is None


WRITES = {
    "ingest": lambda c: c.engine.ingest(Note(id="m", text="hi", timestamp=1.0, kind="message")),
    "ingest_many": lambda c: c.engine.ingest_many([Note(id="m", text="hi", timestamp=1.0, kind="message")]),
    "upsert": lambda c: c.engine.upsert(Note(id="m", text="hi", timestamp=1.0, kind="message")),
    "scoped upsert": lambda c: c.scoped(Scope(user="a")).upsert(Note(id="m", text="hi", timestamp=1.0, kind="message")),
    "conversation append": lambda c: c.conversation("chat").append(
        Turn(id="m", speaker="ada", text="hi", timestamp=1.0)
    ),
    "scoped conversation append": lambda c: c.scoped(Scope(user="a")).conversation("chat").append(
        Turn(id="m", speaker="ada", text="hi", timestamp=1.0)
    ),
}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_kind_retention_applies_on_every_write_path(path: Path, write: Any) -> None:
    """A note of kind 'message' takes the message retention (1 minute, not the 1 hour default)
    whichever engine path writes it: ingest, ingest_many, upsert, a scoped upsert, a conversation's
    append (also through a scoped handle)."""
    with Container(memory="log", path=path, retention=HOUR, kind_retention={"message": timedelta(minutes=1)}) as c:
        before = time.time()
        write(c)
        found = [r for ns in c.memory.namespaces(()) for r in c.memory.iter_all(namespace=ns) if r.note.id == "m"]
    [record] = found
    assert record.note.kind == "message"
    assert before + 60 <= (record.expires_at or 0) <= time.time() + 60

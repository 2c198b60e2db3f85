"""Reads never write: asks (every strategy, filtered, over a prefix), refresh, verify and close of an
engine that only reads leave every file of the store directory as it was, bytes and modification
times, ``derived/`` included, on a store of 5,000 notes whose snapshots lag or are missing; snapshots
are written by writers (``persist``, the background saver, ``coniti`` writer commands).

LMDB's ``lock.mdb`` is left out of the comparison: it holds LMDB's reader table, which every process
that opens the environment writes, readers included (LMDB's design; it holds no data).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coniti import ContinuityEngine, Note, Query, TimeRange
from coniti.derived import snapshot_name
from coniti.embedding import LocalHashEmbedder
from coniti.engine import saver
from coniti.impl.log import LogBackend
from coniti.log.guard import LOCK_FILE
from coniti.memory import DeleteRequest, MemoryRecord, MetaSetRequest, PutRequest
from coniti.strategy import DefaultStrategy
from coniti.structure import FlatStructure, SegmentTreeStructure

EMBEDDER = LocalHashEmbedder(dim=32)
WORDS = ["budget", "lunch", "gym", "ana", "bob", "report", "trip", "code", "plan", "tea"]
SAVED = ("team", "saved")
"""2,000 notes with a snapshot, then 1,200 more written after it (the snapshot lags)."""
UNSAVED = ("team", "unsaved")
"""1,800 notes and no snapshot."""

Files = dict[str, tuple[int, int, str]]


def engine(memory: LogBackend) -> ContinuityEngine:
    return ContinuityEngine(
        memory, EMBEDDER, [FlatStructure(), SegmentTreeStructure()], DefaultStrategy()
    )


def notes(n: int, start: int = 0) -> list[Note]:
    return [
        Note(
            id=f"n{i}", text=f"{WORDS[i % 10]} {WORDS[(i * 7) % 10]} item {i}", timestamp=float(i),
            metadata={"kind": "fact" if i % 25 == 0 else "chat", "n": i},
        )
        for i in range(start, start + n)
    ]


def files(root: Path) -> Files:
    """Every file under ``root`` but LMDB's lock file: (size, mtime in ns, SHA-256)."""
    out: Files = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.name != LOCK_FILE:
            stat = path.stat()
            out[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
    return out


def put(store: LogBackend, batch: list[Note], ns: tuple[str, ...]) -> None:
    """Write ``batch`` to memory directly, as another writer does (no engine, no snapshot)."""
    vectors = EMBEDDER.embed([n.text for n in batch])
    store.put(PutRequest(records=[
        MemoryRecord(note=n, vector=v, embedding_id=EMBEDDER.spec_id, namespace=ns)
        for n, v in zip(batch, vectors, strict=True)
    ]))  # fmt: skip


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """The store (5,000 notes in two namespaces, one snapshot lagging by 1,200+ events written by
    another writer, one namespace with none) and the head after the first 2,000 notes."""
    path = tmp_path_factory.mktemp("reads") / "store"
    with LogBackend(path) as store:
        e = engine(store)
        for a in range(0, 2_000, 500):
            e.ingest_many(notes(500, a), namespace=SAVED)
        middle = store.head
        assert e.persist() == 1
        e.close()
        for a in range(2_000, 3_200, 400):
            put(store, notes(400, a), SAVED)
        store.delete(DeleteRequest(ids=[f"n{i}" for i in range(0, 3_200, 97)], namespace=SAVED))
        store.set_meta(MetaSetRequest(key="embedding_id", value=EMBEDDER.spec_id, namespace=UNSAVED))
        for a in range(0, 1_800, 600):
            put(store, notes(600, a), UNSAVED)
    return path, middle


@pytest.fixture()
def store_path(built: tuple[Path, int], tmp_path: Path) -> Iterator[Path]:
    """A copy of the built store for one test (its files' times kept)."""
    copy = tmp_path / "store"
    shutil.copytree(built[0], copy)
    yield copy


QUERIES = [
    Query(text="budget plan", k=10),
    Query(text="budget plan", k=10, filter={"kind": "fact"}),
    Query(text="gym tea", k=5, strategy="semantic", filter={"n": {"$gte": 1_000}}),
    Query(text="report", k=5, strategy="keyword", min_score=0.1),
    Query(time_range=TimeRange(start=100.0, end=900.0), k=5),
    Query(text="lunch", k=5, mmr=0.5),
]


def ask_everything(e: ContinuityEngine) -> None:
    for query in QUERIES:
        for scope in ({"namespace": SAVED}, {"namespace": UNSAVED}, {"prefix": ("team",)}):
            assert e.ask(query, **scope) is not None  # type: ignore[arg-type]
    assert e.ask(Query(near="n42", k=5), namespace=SAVED).hits
    e.context("budget", token_budget=200, prefix=("team",))


def test_the_store_has_a_lagging_snapshot_and_a_namespace_without_one(store_path: Path) -> None:
    """The premise: one snapshot on disk, 1,200+ events behind its namespace (a close used to save
    it), and a namespace of 1,000+ rows with none (its first ask used to save one)."""
    with LogBackend(store_path, read_only=True) as store:
        assert len(list((store_path / "derived").glob("*.json"))) == 1
        removed = len(range(0, 3_200, 97))
        assert store.count(store.count_request(namespace=SAVED)).count == 3_200 - removed
        assert store.count(store.count_request(namespace=UNSAVED)).count == 1_800


def test_asks_of_a_read_only_engine_leave_the_store_unchanged(store_path: Path) -> None:
    """A read-only store: asks of every kind, refresh, verify and close change no file."""
    before = files(store_path)
    time.sleep(0.01)
    with LogBackend(store_path, read_only=True) as store:
        e = engine(store)
        ask_everything(e)
        e.refresh()
        assert e.verify(SAVED).ok and e.verify(UNSAVED).ok
        assert e.persist() == 0
        e.close()
    assert files(store_path) == before


def test_a_current_engine_that_only_asks_leaves_the_store_unchanged(store_path: Path) -> None:
    """A writable store and an engine that only reads (asks, refresh, verify, close): no file
    changes, although a snapshot lags and a namespace of 1,000+ rows has none."""
    before = files(store_path)
    time.sleep(0.01)
    with LogBackend(store_path) as store:
        e = engine(store)
        ask_everything(e)
        e.refresh()
        assert e.verify(SAVED).ok and e.verify(UNSAVED).ok
        e.close()
    assert files(store_path) == before


def test_asks_of_a_past_engine_leave_the_store_unchanged(built: tuple[Path, int], store_path: Path) -> None:
    """engine.at(seq) and its asks (and its owner's loads for them) change no file."""
    middle = built[1]
    before = files(store_path)
    time.sleep(0.01)
    with LogBackend(store_path) as store:
        e = engine(store)
        for seq in (middle, store.head):
            ask_everything(e.at(seq))
        e.close()
    assert files(store_path) == before


def test_close_after_writes_saves_nothing(store_path: Path) -> None:
    """close() drops the derived state only: after writes that leave a snapshot lagging by 1,300+
    events, the snapshot on disk is the one that was there."""
    snapshot = {k: v for k, v in files(store_path).items() if k.startswith("derived/")}
    with pytest.MonkeyPatch.context() as mp, LogBackend(store_path) as store:
        mp.setattr(saver, "IDLE", 3600.0)
        e = engine(store)
        e.ingest_many(notes(100, 10_000), namespace=SAVED)
        e.close()
    assert {k: v for k, v in files(store_path).items() if k.startswith("derived/")} == snapshot


def test_persist_writes_what_lags_and_the_next_open_restores_it(store_path: Path) -> None:
    """persist() (a writer) saves both namespaces; a new engine then restores them (verify: the
    snapshot is current)."""
    with LogBackend(store_path) as store:
        e = engine(store)
        e.structures(SAVED)
        e.structures(UNSAVED)
        assert e.persist() == 2
        reports = [engine(store).verify(ns) for ns in (SAVED, UNSAVED)]
        assert all(r.ok and r.snapshot == "current" for r in reports)


def _snapshot_of(e: ContinuityEngine, store_path: Path, ns: tuple[str, ...]) -> int | None:
    """The seq of the snapshot of ``ns`` that ``e`` would read, on disk (None without one)."""
    key = e._indexes.snapshots.key()  # type: ignore[attr-defined]
    manifest = store_path / "derived" / f"{snapshot_name(ns, key)}.json"
    return int(json.loads(manifest.read_bytes())["seq"]) if manifest.exists() else None


def test_the_background_saver_writes_a_lagging_snapshot_after_a_pause(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a write that leaves a namespace lagging by SAVE_LAG events or more, the saver writes
    its snapshot once no write came for IDLE seconds; the snapshot is then current."""
    monkeypatch.setattr(saver, "IDLE", 0.2)
    with LogBackend(store_path) as store:
        e = engine(store)
        e.ingest_many(notes(10, 20_000), namespace=UNSAVED)
        head = store.head
        deadline = time.monotonic() + 60
        while _snapshot_of(e, store_path, UNSAVED) != head and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _snapshot_of(e, store_path, UNSAVED) == head
        e.close()
        assert engine(store).verify(UNSAVED).snapshot == "current"


def test_the_background_saver_never_saves_after_close(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """close() stops the saver before its pause is over: no snapshot appears afterwards."""
    monkeypatch.setattr(saver, "IDLE", 0.3)
    with LogBackend(store_path) as store:
        e = engine(store)
        e.ingest_many(notes(10, 20_000), namespace=UNSAVED)
        assert e._saver is not None and e._saver.running
        e.close()
        time.sleep(0.8)
        assert _snapshot_of(e, store_path, UNSAVED) is None


@pytest.mark.parametrize("rows", [5, 50])
def test_close_frees_the_dropped_state_at_once_or_on_a_thread(rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """close() drops the namespace indexes: below RELEASE_ROWS they are freed before it returns,
    above on a thread of their own (close does not wait for it); either way they are freed."""
    import gc
    import weakref

    from coniti.impl.memory import InMemoryBackend

    monkeypatch.setattr(saver, "RELEASE_ROWS", 20)
    e = ContinuityEngine(InMemoryBackend(), EMBEDDER, [FlatStructure()], DefaultStrategy())
    e.ingest_many(notes(rows))
    index = weakref.ref(e._indexes.get(()))
    e.close()
    if rows < 20:
        assert index() is None  # freed before close returned
    deadline = time.monotonic() + 30
    while index() is not None and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.01)
    assert index() is None
    assert e.ask("budget").hits  # a closed engine loads again on use

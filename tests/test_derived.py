"""The engine's derived state: versioned rows, snapshots on disk, catch-up, verify, as-of views.

Crash tests kill real processes (SIGKILL) during an ingest and during a snapshot write; after each,
a new engine opens the store and answers exactly as a fresh build does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers_derived import array_place, flip_byte
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coniti import ContinuityEngine, Note, Query, TimeRange
from coniti.derived import ARRAYS_FILE, DerivedDir, StaleSnapshot, pack_strings, unpack_strings
from coniti.embedding import LocalHashEmbedder
from coniti.errors import NotSupported, StoreError
from coniti.impl.log import LogBackend
from coniti.impl.memory import InMemoryBackend
from coniti.memory import MemoryBackend, MemoryRecord, PutRequest
from coniti.strategy import DefaultStrategy
from coniti.structure import FlatStructure, SegmentTreeStructure, Structure

EMBEDDER = LocalHashEmbedder(dim=32)
WORDS = ["budget", "lunch", "gym", "ana", "bob", "report", "trip", "code", "plan", "tea"]
ROOT = Path(__file__).resolve().parent.parent


def engine(memory: MemoryBackend, *structures: Structure) -> ContinuityEngine:
    return ContinuityEngine(
        memory, EMBEDDER, list(structures) or [FlatStructure(), SegmentTreeStructure(leaf_size=2)],
        DefaultStrategy(),
    )


def notes(n: int, start: int = 0) -> list[Note]:
    return [
        Note(id=f"n{i}", text=f"{WORDS[i % 10]} {WORDS[(i * 7) % 10]} item {i}", timestamp=float(i))
        for i in range(start, start + n)
    ]


def fresh(store: LogBackend, seq: int | None = None) -> ContinuityEngine:
    """The old way: an engine over a view, structures built by one scan of it."""
    view = store.at(seq)
    return ContinuityEngine(view, EMBEDDER, [FlatStructure()], DefaultStrategy(), read_only=True)


QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("budget plan", {}),
    ("gym tea", {"time_range": TimeRange(start=5.0, end=40.0)}),
    ("", {"time_range": TimeRange(start=0.0)}),  # the most recent
]


def answers(e: ContinuityEngine) -> list[list[tuple[str, float]]]:
    return [
        [(h.note.id, h.score) for h in e.ask(Query(text=q or None, k=5, **kw)).hits]
        for q, kw in QUERIES
    ]


def snapshot_files(store: LogBackend) -> list[Path]:
    return sorted(Path(store.derived_path).glob("*.json"))


# -- capability and layout ------------------------------------------------------------------------


def test_log_backend_declares_derived_state_and_in_memory_does_not(tmp_path: Path) -> None:
    """LogBackend declares supports_derived_state with a directory inside the store; InMemoryBackend
    does not, and its engine builds at open and keeps nothing on disk."""
    with LogBackend(tmp_path / "s") as store:
        assert store.supports_derived_state is True
        assert Path(store.derived_path).parent == Path(store.path)
    assert InMemoryBackend.supports_derived_state is False
    memory = InMemoryBackend()
    e = engine(memory)
    e.ingest_many(notes(3))
    assert e.persist() == 0 and getattr(e._indexes, "snapshots", None) is None
    assert answers(engine(memory)) == answers(e)


def test_event_hash_names_each_event_and_zero(tmp_path: Path) -> None:
    """event_hash(seq) is the hash the event feed reports; 64 zeros for 0."""
    with LogBackend(tmp_path / "s") as store:
        engine(store).ingest_many(notes(2))
        assert store.event_hash(0) == "0" * 64
        assert [store.event_hash(ev.seq) for ev in store.events()] == [ev.hash for ev in store.events()]


def test_strings_pack_and_unpack_any_text() -> None:
    """pack_strings/unpack_strings round-trip ASCII, non-ASCII and empty strings."""
    values = ["a", "", "ünï", "x" * 300, "\n"]
    assert unpack_strings(*pack_strings(values)) == values
    assert unpack_strings(*pack_strings([])) == []


# -- snapshots: written, restored, refused --------------------------------------------------------


def test_persist_writes_a_snapshot_the_next_open_restores_reading_only_new_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After persist, a new engine restores the snapshot and folds only the events after it."""
    with LogBackend(tmp_path / "s") as store:
        first = engine(store)
        first.ingest_many(notes(40))
        expected = answers(first)
        assert first.persist() == 1
        first.close()
        assert len(snapshot_files(store)) == 1
        seq = store.head
        engine(store).ingest_many(notes(5, 40))  # written after the snapshot
        reads: list[int] = []
        original = LogBackend.events

        def spy(self: LogBackend, after: int = 0, **kw: Any) -> Any:
            reads.append(after)
            return original(self, after, **kw)

        monkeypatch.setattr(LogBackend, "events", spy)
        second = engine(store)
        assert answers(second) != [] and len(second.structures()[0]) == 45
        assert reads and min(reads) >= seq - 1  # never a read from the start of the log
        monkeypatch.undo()
        assert answers(fresh(store, seq)) == expected
        assert answers(second) == answers(fresh(store))


def test_duplicates_are_judged_on_the_snapshot_plus_the_events_folded_after_it(tmp_path: Path) -> None:
    """An engine restored from a snapshot, with a delete and an ingest folded after it (its content
    index still packed, so an ask never unpacks it), refuses a duplicate of a live note and admits
    the text of the deleted one."""
    with LogBackend(tmp_path / "s") as store:
        first = engine(store)
        first.ingest_many(notes(1200))
        first.persist()
        first.close()
        other = engine(store)
        other.remove(["n5"])
        other.ingest(Note(id="late", text="a note written after the snapshot", timestamp=5000.0))
        other.close()  # lags by 2 events: not saved again
        second = engine(store)
        assert second.ask("budget").hits  # an ask folds the 2 events; the index stays packed
        again = notes(7)
        assert not second.ingest(Note(id="dup", text=again[6].text, timestamp=6.0)).admitted
        assert not second.ingest(Note(id="dup2", text="a note written after the snapshot", timestamp=5000.0)).admitted
        assert second.ingest(Note(id="back", text=again[5].text, timestamp=5.0)).admitted


def test_close_leaves_a_snapshot_that_lags_and_persist_saves_it(tmp_path: Path) -> None:
    """close() never rewrites a snapshot, however much it lags; persist() saves any lag; either
    way the next open answers as a fresh build."""
    with LogBackend(tmp_path / "s") as store:
        e = engine(store)
        e.ingest_many(notes(20))
        e.close()
        assert snapshot_files(store) == []
        e = engine(store)
        e.ingest_many(notes(1, 30))
        e.persist()
        e.close()
        saved = json.loads(snapshot_files(store)[0].read_bytes())["seq"]
        e = engine(store)
        e.ingest_many(notes(1, 20))
        e.close()
        assert json.loads(snapshot_files(store)[0].read_bytes())["seq"] == saved
        assert answers(engine(store)) == answers(fresh(store))
        e = engine(store)
        e.structures()  # loads the namespace: the snapshot, then the one event after it
        assert e.persist() == 1
        assert json.loads(snapshot_files(store)[0].read_bytes())["seq"] == store.head


def test_a_snapshot_of_another_store_is_refused(tmp_path: Path) -> None:
    """A derived directory copied into another store is refused (store id) and rebuilt."""
    with LogBackend(tmp_path / "a") as a, LogBackend(tmp_path / "b") as b:
        ea = engine(a)
        ea.ingest_many(notes(20))
        ea.persist()
        engine(b).ingest_many(notes(5, 100))
        for path in Path(b.derived_path).glob("*"):
            path.unlink() if path.is_file() else None
        subprocess.run(["cp", "-r", f"{a.derived_path}/.", b.derived_path], check=True)
        report = engine(b).verify()
        assert "another store" in report.snapshot and report.ok
        assert answers(engine(b)) == answers(fresh(b))


def test_a_torn_vector_file_is_detected_and_rebuilt(tmp_path: Path) -> None:
    """A snapshot file cut short or with a flipped byte is refused (size or checksum); the engine
    answers as a fresh build."""
    with LogBackend(tmp_path / "s") as store:
        e = engine(store)
        e.ingest_many(notes(30))
        e.persist()
        flip_byte(snapshot_files(store)[0], "structure.0/vecs", -3, 0xFF)
        report = engine(store).verify()
        assert "checksum" in report.snapshot and report.ok
        file, _, _ = array_place(snapshot_files(store)[0], "structure.0/vecs")
        with open(file, "r+b") as f:
            f.truncate(file.stat().st_size - 10)
        assert "size" in engine(store).verify().snapshot
        assert answers(engine(store)) == answers(fresh(store))


def test_a_snapshot_whose_event_hash_differs_is_refused(tmp_path: Path) -> None:
    """A manifest naming a seq whose hash in the store differs (a rebuilt or rolled-back store)
    is refused."""
    with LogBackend(tmp_path / "s") as store:
        e = engine(store)
        e.ingest_many(notes(10))
        e.persist()
        path = snapshot_files(store)[0]
        manifest = json.loads(path.read_bytes())
        manifest["seq_hash"] = "1" * 64
        path.write_text(json.dumps(manifest))
        assert "another hash" in engine(store).verify().snapshot


def test_a_snapshot_beyond_the_head_is_refused(tmp_path: Path) -> None:
    """DerivedDir.load refuses a seq beyond the head, another key, and a missing manifest."""
    d = DerivedDir(tmp_path / "d", "store")
    d.save("x", seq=5, seq_hash="h", key={"k": 1}, parts={"p": {"a": np.arange(3)}})
    assert d.load("x", key={"k": 1}, head=5, hash_at=lambda s: "h").parts["p"]["a"].tolist() == [0, 1, 2]
    with pytest.raises(StaleSnapshot, match="not in the log"):
        d.load("x", key={"k": 1}, head=4, hash_at=lambda s: "h")
    with pytest.raises(StaleSnapshot, match="another configuration"):
        d.load("x", key={"k": 2}, head=5, hash_at=lambda s: "h")
    with pytest.raises(StaleSnapshot, match="no snapshot"):
        d.load("y", key={"k": 1}, head=5, hash_at=lambda s: "h")


def test_a_save_replaces_the_previous_snapshot_and_leaves_one_directory(tmp_path: Path) -> None:
    """A second save of a name replaces the first; only its data directory remains."""
    d = DerivedDir(tmp_path / "d", "store")
    for seq in (1, 2):
        d.save("x", seq=seq, seq_hash="h", key={}, parts={"p": {"a": np.arange(seq)}})
    assert d.load("x", key={}, head=9, hash_at=lambda s: "h").seq == 2
    assert len([p for p in (tmp_path / "d").iterdir() if p.is_dir()]) == 1


# -- symbolic links ------------------------------------------------------------------------------


def test_an_engine_refuses_a_store_whose_derived_directory_is_a_symlink(tmp_path: Path) -> None:
    """An engine over a store whose derived/ is a symbolic link raises StoreError naming it (as the
    store refuses symlinked store files), and nothing is written where the link points."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with LogBackend(tmp_path / "s") as store:
        Path(store.derived_path).symlink_to(elsewhere)
        with pytest.raises(StoreError, match=rf"{store.derived_path} is a symbolic link.*rm "):
            engine(store)
    assert list(elsewhere.iterdir()) == []


def test_a_derived_symlink_planted_after_open_is_never_written_through(tmp_path: Path) -> None:
    """derived/ replaced by a symbolic link while an engine is open: persist raises StoreError,
    close saves nothing, and the link's target stays empty."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with LogBackend(tmp_path / "s") as store:
        e = engine(store)
        e.ingest_many(notes(5))
        assert not Path(store.derived_path).exists()  # nothing saved yet
        Path(store.derived_path).symlink_to(elsewhere)
        with pytest.raises(StoreError, match="is a symbolic link"):
            e.persist()
        e.close()
    assert list(elsewhere.iterdir()) == []


def test_links_under_the_derived_directory_are_not_followed(tmp_path: Path) -> None:
    """A manifest, data directory or array file that is a symbolic link is not read
    (StaleSnapshot); a linked lock file is refused (StoreError); a save over a linked manifest
    replaces the link and leaves its target as it was."""
    d = DerivedDir(tmp_path / "d", "store")
    d.save("x", seq=1, seq_hash="h", key={}, parts={"p": {"a": np.arange(3)}})
    manifest = tmp_path / "d" / "x.json"
    data = tmp_path / "d" / json.loads(manifest.read_bytes())["data"]

    def load() -> Any:
        return d.load("x", key={}, head=1, hash_at=lambda s: "h")

    (data / ARRAYS_FILE).rename(tmp_path / ARRAYS_FILE)
    (data / ARRAYS_FILE).symlink_to(tmp_path / ARRAYS_FILE)
    with pytest.raises(StaleSnapshot, match="symbolic link"):
        load()
    data.rename(tmp_path / "data")
    data.symlink_to(tmp_path / "data")
    with pytest.raises(StaleSnapshot, match="data directory"):
        load()
    target = tmp_path / "x.json"
    manifest.rename(target)
    manifest.symlink_to(target)
    kept = target.read_bytes()
    with pytest.raises(StaleSnapshot, match="manifest is a symbolic link"):
        load()
    d.save("x", seq=1, seq_hash="h", key={}, parts={"p": {"a": np.arange(2)}})
    assert not manifest.is_symlink() and target.read_bytes() == kept
    assert load().parts["p"]["a"].tolist() == [0, 1]
    (tmp_path / "d" / "x.lock").unlink()
    (tmp_path / "d" / "x.lock").symlink_to(tmp_path / "victim")
    with pytest.raises(StoreError, match="x.lock is a symbolic link"):
        d.save("x", seq=1, seq_hash="h", key={}, parts={"p": {"a": np.arange(2)}})
    assert not (tmp_path / "victim").exists()


def test_an_ann_engine_restores_its_graph_and_answers_as_before(tmp_path: Path) -> None:
    """An engine with the ann structure saves rows and graph; the next open restores both (no
    rebuild) and answers as the engine that wrote them."""
    pytest.importorskip("usearch")
    from coniti.structure import AnnStructure

    with LogBackend(tmp_path / "s") as store:
        first = engine(store, AnnStructure(exact_rows=0, min_fraction=0.0))
        first.ingest_many(notes(60))
        first.remove(["n7"])
        expected = answers(first)
        first.persist()
        second = engine(store, AnnStructure(exact_rows=0, min_fraction=0.0))
        assert answers(second) == expected
        assert second.verify().snapshot == "current"


def test_compact_removes_the_derived_state_and_the_next_open_rebuilds(tmp_path: Path) -> None:
    """LogBackend.compact removes the derived directory (it may hold erased versions' vectors);
    the next engine rebuilds and answers as a fresh build."""
    with LogBackend(tmp_path / "s") as store:
        e = engine(store)
        e.ingest_many(notes(10))
        e.persist()
        store.erase(["n2"], reason="privacy")
        assert Path(store.derived_path).exists()
        store.compact()
        assert not Path(store.derived_path).exists()
        assert answers(engine(store)) == answers(fresh(store))


def test_reindex_rewrites_the_snapshot_and_verify_is_clean(tmp_path: Path) -> None:
    """reindex rebuilds from the events and saves; verify then reports the snapshot current."""
    with LogBackend(tmp_path / "s") as store:
        e = engine(store)
        e.ingest_many(notes(12))
        e.remove(["n3"])
        e.reindex()
        report = e.verify()
        assert report.ok and report.snapshot == "current" and report.rows == 11


def test_verify_reports_rows_that_differ_from_a_fresh_build(tmp_path: Path) -> None:
    """A row altered in the loaded structures is reported by verify."""
    with LogBackend(tmp_path / "s") as store:
        e = engine(store)
        e.ingest_many(notes(8))
        rows = e.structures()[0]._rows  # type: ignore[attr-defined]
        rows.vecs[0] = -rows.vecs[0]
        report = e.verify()
        assert not report.ok and "structure 0" in report.problems[0]


# -- refresh across handles and processes ---------------------------------------------------------


def test_refresh_folds_another_process_writes(tmp_path: Path) -> None:
    """Writes of another process (ingest, delete, upsert) reach an engine through refresh()."""
    path = tmp_path / "s"
    with LogBackend(path) as store:
        e = engine(store)
        e.ingest_many(notes(6))
        script = textwrap.dedent(f"""
            import sys; sys.path.insert(0, {str(ROOT / 'tests')!r})
            from test_derived import engine, notes
            from coniti import Note
            from coniti.impl.log import LogBackend
            with LogBackend({str(path)!r}) as store:
                e = engine(store)
                e.ingest_many(notes(3, 6))
                e.remove(["n0"])
                e.upsert(Note(id="n1", text="completely new words here", timestamp=1.0))
        """)
        subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
        assert e.refresh() > 0
        assert answers(e) == answers(fresh(store))
        assert e.verify().ok


# -- as-of views ---------------------------------------------------------------------------------


def test_at_masks_the_parent_rows_instead_of_rebuilding(tmp_path: Path) -> None:
    """engine.at(seq) shares its parent's rows: it scans nothing and answers as a rebuild does."""
    with LogBackend(tmp_path / "s") as store:
        e = engine(store)
        e.ingest_many(notes(10))
        middle = store.head
        e.remove(["n2", "n4"])
        e.upsert(Note(id="n5", text="budget plan budget", timestamp=5.0))
        past = e.at(middle)
        assert past.structures()[0]._source is e.structures()[0]  # type: ignore[attr-defined]
        assert answers(past) == answers(fresh(store, middle))
        assert past.read_only and past.refresh() == 0


def test_at_without_an_event_feed_is_not_supported() -> None:
    """Over InMemoryBackend at() raises NotSupported, as before."""
    with pytest.raises(NotSupported):
        engine(InMemoryBackend()).at(0)


Step = tuple[str, int, int]

steps = st.lists(
    st.tuples(
        st.sampled_from(["ingest", "remove", "upsert", "update", "expire", "erase", "clear", "ingest"]),
        st.integers(0, 11),
        st.integers(0, 9),
    ),
    min_size=1,
    max_size=14,
)


def play(e: ContinuityEngine, store: LogBackend, history: list[Step]) -> None:
    for kind, i, w in history:
        id_ = f"n{i}"
        text = f"{WORDS[w]} {WORDS[(w + i) % 10]} {i}"
        if kind == "ingest":
            e.ingest_many([Note(id=id_, text=text, timestamp=float(i)), Note(id=f"m{i}{w}", text=text + " m", timestamp=float(w))])
        elif kind == "remove":
            e.remove([id_, f"m{i}{w}"])
        elif kind == "upsert":
            e.upsert(Note(id=id_, text=text, timestamp=float(w)))
        elif kind == "update" and e.get([id_]).records:
            e.update(id_, text=text + " changed", timestamp=float(w) + 0.5)
        elif kind == "expire":
            e.upsert(Note(id=id_, text=text, timestamp=float(i)), expires_at=time.time() - 1.0 if w % 2 else time.time() + 3600)
        elif kind == "erase":
            store.erase([id_], reason="test")
        elif kind == "clear" and w == 0:
            store.clear(store.clear_request())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=steps, data=st.data())
def test_as_of_answers_equal_a_rebuild_at_every_point(tmp_path_factory: pytest.TempPathFactory, history: list[Step], data: st.DataObject) -> None:
    """For random histories (ingest, delete, upsert, update, expiry, erase, clear, some by the
    store directly), e.at(seq).ask(...) equals an engine rebuilt by scan from store.at(seq)."""
    with LogBackend(tmp_path_factory.mktemp("s")) as store:
        e = engine(store)
        play(e, store, history)
        e.refresh()
        for seq in sorted(set(data.draw(st.lists(st.integers(0, store.head), min_size=1, max_size=4)) + [store.head])):
            past, rebuilt = e.at(seq), fresh(store, seq)
            for q, kw in QUERIES:
                query = Query(text=q or None, k=4, **kw)
                got = [(h.note.id, h.score, h.version) for h in past.ask(query).hits]
                want = [(h.note.id, h.score, h.version) for h in rebuilt.ask(query).hits]
                assert got == want, (seq, q)
        assert e.verify().ok


# -- crashes (real processes, SIGKILL) -------------------------------------------------------------

WRITER = """
import sys, time
sys.path.insert(0, {tests!r})
from test_derived import engine, notes
from coniti.impl.log import LogBackend
store = LogBackend({path!r}, durability="nosync")
e = engine(store)
print("ready", flush=True)
for start in range(0, 100000, 50):
    e.ingest_many(notes(50, start))
    if {snapshots} and start % 200 == 0:
        e.persist()
"""


def kill_after(path: Path, delay: float, snapshots: bool) -> None:
    code = WRITER.format(tests=str(ROOT / "tests"), path=str(path), snapshots=snapshots)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


@pytest.mark.parametrize("delay", [0.3, 0.9])
def test_killed_during_ingest_the_next_open_equals_a_fresh_build(tmp_path: Path, delay: float) -> None:
    """A writer SIGKILLed mid-ingest (after a snapshot): the next engine opens, and its answers
    and rows equal a fresh build."""
    path = tmp_path / "s"
    with LogBackend(path) as store:
        e = engine(store)
        e.ingest_many(notes(30, 100_000))
        e.close()
    kill_after(path, delay, snapshots=False)
    with LogBackend(path) as store:
        e = engine(store)
        assert answers(e) == answers(fresh(store))
        assert e.verify().ok


@pytest.mark.parametrize("delay", [0.4, 0.7, 1.1])
def test_killed_during_snapshot_writes_the_next_open_equals_a_fresh_build(
    tmp_path: Path, delay: float
) -> None:
    """A writer SIGKILLed while it saves snapshots often: whatever it left (old snapshot, new one,
    a half-written directory) opens to answers and rows equal to a fresh build."""
    path = tmp_path / "s"
    kill_after(path, delay, snapshots=True)
    with LogBackend(path) as store:
        e = engine(store)
        report = e.verify()
        assert report.ok, report.problems
        assert answers(e) == answers(fresh(store))


def test_a_write_interleaved_by_another_writer_keeps_the_ids_earlier_versions(tmp_path: Path) -> None:
    """When another writer appends between an ingest's catch-up and its put, the engine drops only
    the rows it had just added and folds the events again: the earlier, deleted version of a
    re-ingested id stays visible to as-of asks, and the derived state equals a fresh build."""
    with LogBackend(tmp_path / "s") as store:
        e = engine(store)
        e.ingest(Note(id="a", text="budget plan first", timestamp=1.0))
        e.remove(["a"])
        deleted_at = store.head
        other = LogBackend(tmp_path / "s")
        original = store.put_batch

        def interleaved(*args: Any, **kwargs: Any) -> Any:
            other.put(PutRequest(records=[MemoryRecord(
                note=Note(id="b", text="lunch", timestamp=2.0), vector=np.ones(32, "float32"),
                embedding_id=EMBEDDER.spec_id,
            )]))
            return original(*args, **kwargs)

        store.put_batch = interleaved  # type: ignore[method-assign]
        e.ingest_many([Note(id="a", text="budget plan again", timestamp=3.0)])
        del store.put_batch
        other.close()
        past = e.at(deleted_at - 1).ask(Query(text="budget plan", k=3, strategy="semantic"))
        assert [h.note.text for h in past.hits] == ["budget plan first"]
        assert e.verify().ok

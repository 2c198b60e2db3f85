"""Snapshot checksums checked on first touch: a restored vector matrix is read only after the CRC-32C
(zlib's CRC-32 for snapshots written before) of each block a read touches passed, and a block that fails makes the engine rebuild (never answer
from it). Snapshots here are saved with a small ``CRC_BLOCK`` so that a few dozen rows span many
blocks; the manifest records the block size, so the load honours it.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import crc32c
import numpy as np
import pytest
from helpers_derived import flip_byte, read_parts

from coniti import ContinuityEngine, Note, Query, TimeRange, derived
from coniti.derived import DerivedDir, StaleSnapshot
from coniti.embedding import LocalHashEmbedder
from coniti.engine.fold import FoldedIndexes
from coniti.impl.log import LogBackend
from coniti.strategy import DefaultStrategy
from coniti.structure import FlatStructure, SegmentTreeStructure, Structure

EMBEDDER = LocalHashEmbedder(dim=32)  # 128 bytes per row
WORDS = ["budget", "lunch", "gym", "ana", "bob", "report", "trip", "code", "plan", "tea"]
BLOCK = 1000  # bytes: rows straddle block boundaries


def engine(store: LogBackend, structure: Structure | None = None) -> ContinuityEngine:
    return ContinuityEngine(store, EMBEDDER, [FlatStructure() if structure is None else structure], DefaultStrategy())


def fresh(store: LogBackend, seq: int | None = None) -> ContinuityEngine:
    """An engine over a view, its structures built by one scan (no snapshot involved)."""
    return ContinuityEngine(store.at(seq), EMBEDDER, [FlatStructure()], DefaultStrategy(), read_only=True)


def notes(n: int, start: int = 0) -> list[Note]:
    return [
        Note(id=f"n{i}", text=f"{WORDS[i % 10]} {WORDS[(i * 7) % 10]} item {i}", timestamp=float(i))
        for i in range(start, start + n)
    ]


def hits(e: ContinuityEngine, query: Query) -> list[tuple[str, float]]:
    return [(h.note.id, h.score) for h in e.ask(query).hits]


FULL = Query(text="budget plan", k=5, strategy="semantic")
EARLY = Query(text="budget plan", k=3, strategy="semantic", time_range=TimeRange(start=0.0, end=4.0))


def saved_store(path: Path, monkeypatch: pytest.MonkeyPatch, structure: Structure | None = None, n: int = 60) -> LogBackend:
    """A store of ``n`` notes (timestamps 0..n-1, row i is note i) whose snapshot has blocks of
    ``BLOCK`` bytes."""
    monkeypatch.setattr(derived, "CRC_BLOCK", BLOCK)
    store = LogBackend(path)
    e = engine(store, structure)
    e.ingest_many(notes(n))
    e.persist()
    monkeypatch.undo()
    return store


def damage_row(store: LogBackend, row: int) -> None:
    """Negate row ``row`` of the snapshot's vector matrix (rows of 32 float32: the sign bits)."""
    manifest_path = next(Path(store.derived_path).glob("*.json"))
    for sign in range(row * 128 + 3, (row + 1) * 128, 4):
        flip_byte(manifest_path, "structure.0/vecs", sign, 0x80)


# -- DerivedDir and BlockCheck ----------------------------------------------------------------


def small_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, matrix: np.ndarray) -> DerivedDir:
    monkeypatch.setattr(derived, "CRC_BLOCK", BLOCK)
    place = DerivedDir(tmp_path / "d", "store")
    place.save("x", seq=1, seq_hash="h", key={}, parts={"p": {"m": matrix, "small": np.arange(3)}})
    monkeypatch.undo()
    return place


def flip(place: DerivedDir, byte: int) -> None:
    """Flip one byte of the data of array ``p/m`` (``byte`` counts from the first data byte)."""
    flip_byte(place.path / "x.json", "p/m", byte)


MATRIX = np.arange(40 * 32, dtype=np.float32).reshape(40, 32)  # 5,120 bytes: 6 blocks


def test_a_deferred_array_comes_with_its_check_and_nothing_is_checked_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """load(defer=...) of a damaged array succeeds and returns a BlockCheck; rows whose blocks
    are intact pass it, the damaged block raises (naming the file) and the check stays failed."""
    place = small_blocks(tmp_path, monkeypatch, MATRIX)
    flip(place, 4500)  # block 4 (bytes 4000..4999): rows 31..39
    loaded = place.load("x", key={}, head=1, hash_at=lambda s: "h", defer={"p/m"})
    check = loaded.part_checks("p")["m"]
    assert check.blocks == 6 and not check.done
    check.rows(0, 31)  # blocks 0..3 (row 31 starts in block 3 and ends in block 4)
    with pytest.raises(StaleSnapshot, match="fails its checksum"):
        check.rows(31, 32)
    assert check.failure is not None
    with pytest.raises(StaleSnapshot):
        check.rows(0, 1)  # failed once, refused for good


def test_an_array_not_deferred_or_of_one_block_is_checked_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without defer the damaged array fails the load; an array of one block is checked at load
    even when deferred."""
    place = small_blocks(tmp_path, monkeypatch, MATRIX)
    flip(place, 4500)
    with pytest.raises(StaleSnapshot, match="checksum"):
        place.load("x", key={}, head=1, hash_at=lambda s: "h")
    one = small_blocks(tmp_path / "one", monkeypatch, MATRIX[:5])  # 640 bytes
    flip(one, 10)
    with pytest.raises(StaleSnapshot, match="checksum"):
        one.load("x", key={}, head=1, hash_at=lambda s: "h", defer={"p/m"})


def test_spans_cover_the_rows_in_order_and_stop_before_a_damaged_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """spans(a, b) partitions [a, b) into consecutive spans; the spans before a damaged block
    are yielded, the span that needs it never is."""
    place = small_blocks(tmp_path, monkeypatch, MATRIX)
    whole = place.load("x", key={}, head=1, hash_at=lambda s: "h", defer={"p/m"}).checks["p/m"]
    spans = list(whole.spans(3, 40))
    assert spans[0][0] == 3 and spans[-1][1] == 40 and whole.done
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    flip(place, 2100)  # block 2: rows 15..23
    check = place.load("x", key={}, head=1, hash_at=lambda s: "h", defer={"p/m"}).checks["p/m"]
    seen: list[tuple[int, int]] = []
    with pytest.raises(StaleSnapshot):
        for span in check.spans(0, 40):
            seen.append(span)
    assert seen and seen[-1][1] * 128 <= 2000  # nothing from block 2 on


def test_passed_tells_whether_a_range_needs_no_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """passed(a, b) is true exactly when every block holding rows [a, b) has passed (rows 0..6 lie
    in block 0, row 7 straddles blocks 0 and 1), and false for any range once a check failed."""
    place = small_blocks(tmp_path, monkeypatch, MATRIX)
    check = place.load("x", key={}, head=1, hash_at=lambda s: "h", defer={"p/m"}).checks["p/m"]
    assert not check.passed(0, 3) and check.passed(5, 5)
    check.rows(0, 3)
    assert check.passed(0, 7) and not check.passed(0, 8) and not check.passed(30, 40)
    flip(place, 4000)  # block 4
    damaged = place.load("x", key={}, head=1, hash_at=lambda s: "h", defer={"p/m"}).checks["p/m"]
    damaged.rows(0, 3)
    with pytest.raises(StaleSnapshot):
        damaged.rows(0, 40)
    assert not damaged.passed(0, 3)


def test_a_manifest_entry_without_a_block_size_reads_16_mib_blocks(tmp_path: Path) -> None:
    """An entry written before crc32_block was recorded is read with 16 MiB blocks."""
    place = DerivedDir(tmp_path / "d", "store")
    place.save("x", seq=1, seq_hash="h", key={}, parts={"p": {"m": MATRIX}})
    path = place.path / "x.json"
    manifest = json.loads(path.read_bytes())
    del manifest["arrays"]["p/m"]["crc32_block"]
    path.write_text(json.dumps(manifest))
    got = place.load("x", key={}, head=1, hash_at=lambda s: "h").parts["p"]["m"]
    assert np.array_equal(got, MATRIX)


# -- the engine: checked on first touch, rebuilt when a block fails -------------------------------


def test_an_ask_reads_only_the_blocks_its_range_touches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After open, an ask over an early time range checks only the blocks of its rows: a
    damaged block of later rows goes unnoticed (its bytes are not read) and the answer is right."""
    with saved_store(tmp_path / "s", monkeypatch) as store:
        damage_row(store, 50)
        e = engine(store)
        assert hits(e, EARLY) == hits(fresh(store), EARLY)
        check = e._indexes.get(()).checks["structure.0/vecs"]
        assert check.failure is None and not check.done


@pytest.mark.parametrize("structure", [FlatStructure, SegmentTreeStructure])
def test_a_window_whose_blocks_passed_takes_the_one_slice_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, structure: type[Structure]
) -> None:
    """On restored rows with blocks still unchecked, a window's first search checks its blocks
    through the general path; the same search again takes the one-slice path (its blocks passed)
    and both answer as a fresh build."""
    with saved_store(tmp_path / "s", monkeypatch, structure()) as store:
        e = engine(store, structure())
        rows = e.structures()[0]._rows  # type: ignore[attr-defined]
        lo, hi = rows.interval(0.0, 4.0)
        assert not rows.one_slice(lo, hi)
        first = hits(e, EARLY)
        assert rows.one_slice(lo, hi) and not rows.one_slice(0, rows.n)
        taken: list[int] = []
        real = rows.top_of_slice

        def counted(*args: object, **kwargs: object) -> object:
            taken.append(1)
            return real(*args, **kwargs)

        monkeypatch.setattr(rows, "top_of_slice", counted)
        assert hits(e, EARLY) == first == hits(fresh(store), EARLY) and taken == [1]


@pytest.mark.parametrize("structure", [FlatStructure, SegmentTreeStructure])
def test_an_ask_that_touches_a_damaged_block_answers_as_a_fresh_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, structure: type[Structure]
) -> None:
    """A full-range ask on a snapshot with a damaged block rebuilds the namespace from the log
    and answers as a fresh build; the rebuilt rows pass verify."""
    with saved_store(tmp_path / "s", monkeypatch, structure()) as store:
        damage_row(store, 30)
        e = engine(store, structure())
        assert hits(e, FULL) == hits(fresh(store), FULL)
        assert not e._indexes.get(()).checks  # the rebuilt state has no snapshot behind it
        assert e.verify().ok


def test_an_as_of_ask_that_touches_a_damaged_block_answers_as_a_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """engine.at(seq) reads its parent's rows: a damaged block found by its ask rebuilds the
    parent's namespace, and the view answers as a rebuild as of seq."""
    with saved_store(tmp_path / "s", monkeypatch) as store:
        middle = store.head - 20
        damage_row(store, 10)
        e = engine(store)
        past = e.at(middle)
        assert hits(past, EARLY) == hits(fresh(store, middle), EARLY)
        assert hits(past, FULL) == hits(fresh(store, middle), FULL)
        assert hits(e, FULL) == hits(fresh(store), FULL)


def test_a_write_checks_every_block_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write to a namespace restored with a damaged block rebuilds it first, then succeeds
    (here one whose rows must be merged into the mapped matrix, which reads all of it); the rows
    equal a fresh build."""
    def small_buffer() -> FlatStructure:
        return FlatStructure(buffer_min=1, buffer_fraction=0.01)

    with saved_store(tmp_path / "s", monkeypatch, small_buffer()) as store:
        damage_row(store, 50)
        e = engine(store, small_buffer())
        late = [Note(id=f"late{i}", text=f"budget plan late {i}", timestamp=99.0 + i) for i in range(2)]
        assert all(r.admitted for r in e.ingest_many(late))
        assert hits(e, FULL) == hits(fresh(store), FULL)
        assert e.verify().ok


def test_verify_checks_every_block_of_the_loaded_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """verify() after an ask that touched only intact blocks still checks the rest: the loaded
    rows are rebuilt (ok) and the snapshot on disk is reported as failing its checksum."""
    with saved_store(tmp_path / "s", monkeypatch) as store:
        damage_row(store, 55)
        e = engine(store)
        hits(e, EARLY)
        report = e.verify()
        assert report.ok and "checksum" in report.snapshot


def test_a_rebuild_after_a_failed_block_is_saved_by_the_next_persist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A namespace of 1,000+ rows rebuilt because a block failed during an ask leaves the damaged
    snapshot as it is (a read writes nothing); the next persist saves the rebuild, and the next
    open restores a snapshot that verifies current."""
    with saved_store(tmp_path / "s", monkeypatch, n=1200) as store:
        damage_row(store, 700)
        e = engine(store)
        assert hits(e, FULL) == hits(fresh(store), FULL)
        assert "checksum" in engine(store).verify().snapshot
        assert e.persist() == 1
        report = engine(store).verify()
        assert report.ok and report.snapshot == "current"


def test_persist_with_a_damaged_block_saves_a_rebuild(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """persist() never copies unchecked bytes into a new snapshot: a damaged block found while
    saving rebuilds the namespace, and the saved snapshot verifies current."""
    with saved_store(tmp_path / "s", monkeypatch) as store:
        other = engine(store)
        other.ingest_many(notes(3, 60))
        other.close()  # lags by 3 events: not saved
        damage_row(store, 20)
        e = engine(store)
        hits(e, EARLY)
        e.persist()
        report = engine(store).verify()
        assert report.ok and report.snapshot == "current"


def test_a_damaged_content_index_is_never_used_for_admission(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The content index (duplicate detection) is checked before it is unpacked: with a damaged
    block in its keys, an ask answers, and a duplicate of a stored note is still refused."""
    with saved_store(tmp_path / "s", monkeypatch) as store:
        manifest_path = next(Path(store.derived_path).glob("*.json"))
        entry = json.loads(manifest_path.read_bytes())["arrays"]["content/key_bytes"]
        assert len(entry["crc32_blocks"]) > 1  # deferred: checked when first unpacked
        flip_byte(manifest_path, "content/key_bytes", -20)
        e = engine(store)
        assert hits(e, FULL) == hits(fresh(store), FULL)
        duplicate = Note(id="dup", text=notes(60)[59].text, timestamp=59.0)
        assert not e.ingest(duplicate).admitted
        assert e.verify().ok


# -- which checksum: CRC-32C written, zlib's CRC-32 of older snapshots still checked ----------


def as_zlib_snapshot(manifest_path: Path) -> None:
    """Rewrite a snapshot's manifest as one written before ``checksum`` was recorded: no
    ``checksum`` key, each block's zlib CRC-32."""
    manifest = json.loads(manifest_path.read_bytes())
    parts = read_parts(manifest_path)
    for label, entry in manifest["arrays"].items():
        del entry["checksum"]
        part, _, field = label.partition("/")
        raw = np.ascontiguousarray(parts[part][field]).reshape(-1).view(np.uint8)
        block = entry["crc32_block"]
        entry["crc32_blocks"] = [zlib.crc32(raw[a : a + block].data) for a in range(0, raw.shape[0], block)]
    manifest_path.write_text(json.dumps(manifest))


def test_a_save_records_crc32c_for_each_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every array entry a save writes names checksum "crc32c", and its block values are the
    CRC-32C (not zlib's CRC-32) of each block of the array's data."""
    place = small_blocks(tmp_path, monkeypatch, MATRIX)
    entry = json.loads((place.path / "x.json").read_bytes())["arrays"]["p/m"]
    raw = MATRIX.reshape(-1).view(np.uint8)
    want = [crc32c.crc32c(raw[a : a + BLOCK].data) for a in range(0, raw.shape[0], BLOCK)]
    assert entry["checksum"] == derived.CHECKSUM == "crc32c"
    assert entry["crc32_blocks"] == want
    assert want != [zlib.crc32(raw[a : a + BLOCK].data) for a in range(0, raw.shape[0], BLOCK)]


def test_an_entry_without_a_checksum_is_checked_with_zlib_crc32(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot written before the checksum was recorded (zlib's CRC-32 per block) loads, at
    load and deferred, and a damaged block of it still fails its check."""
    place = small_blocks(tmp_path, monkeypatch, MATRIX)
    as_zlib_snapshot(place.path / "x.json")
    loaded = place.load("x", key={}, head=1, hash_at=lambda s: "h")
    assert np.array_equal(loaded.parts["p"]["m"], MATRIX)
    deferred = place.load("x", key={}, head=1, hash_at=lambda s: "h", defer={"p/m"})
    deferred.checks["p/m"].all()
    flip(place, 4500)
    with pytest.raises(StaleSnapshot, match="fails its checksum"):
        place.load("x", key={}, head=1, hash_at=lambda s: "h")
    check = place.load("x", key={}, head=1, hash_at=lambda s: "h", defer={"p/m"}).checks["p/m"]
    check.rows(0, 31)  # the blocks before the damage pass
    with pytest.raises(StaleSnapshot, match="fails its checksum"):
        check.rows(31, 40)


def test_an_entry_naming_an_unknown_checksum_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A manifest entry whose checksum is not one this version computes is refused at load,
    naming the checksum."""
    place = small_blocks(tmp_path, monkeypatch, MATRIX)
    path = place.path / "x.json"
    manifest = json.loads(path.read_bytes())
    manifest["arrays"]["p/m"]["checksum"] = "sha1"
    path.write_text(json.dumps(manifest))
    with pytest.raises(StaleSnapshot, match="unknown checksum 'sha1'"):
        place.load("x", key={}, head=1, hash_at=lambda s: "h", defer={"p/m"})


def test_an_engine_restores_a_snapshot_checked_with_zlib_crc32_without_a_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine opening a store whose snapshot predates CRC-32C restores it (never rebuilds from
    the events) and answers as a fresh build."""
    with saved_store(tmp_path / "s", monkeypatch) as store:
        as_zlib_snapshot(next(Path(store.derived_path).glob("*.json")))

        def refuse(*args: object, **kw: object) -> object:
            raise AssertionError("rebuilt from the events")

        monkeypatch.setattr(FoldedIndexes, "build", refuse)
        e = engine(store)
        got = hits(e, FULL)
        monkeypatch.undo()
        assert got == hits(fresh(store), FULL)
        assert e._indexes.get(()).checks["structure.0/vecs"].done
